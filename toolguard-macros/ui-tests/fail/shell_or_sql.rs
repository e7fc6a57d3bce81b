use std::process::Command;
use toolguard::{tool, ToolError};

/// Runs a maintenance job.
#[tool(idempotent)]
fn maintenance(
    /// Script to run.
    #[arg(kind = "shell", max_len = 100)]
    script: String,
    /// Report query.
    #[arg(kind = "sql", max_len = 100)]
    query: String,
    /// Command to spawn.
    command: Command,
) -> Result<(), ToolError> {
    let _ = (script, query, command);
    Ok(())
}

fn main() {}
