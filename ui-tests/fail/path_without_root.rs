use std::path::{Path, PathBuf};
use toolguard::{tool, ToolError};

/// Reads a report file.
#[tool(read_only)]
fn read_report(
    /// File to read.
    file: PathBuf,
    /// Directory of the report.
    #[arg(kind = "path")]
    dir: String,
    /// Template to apply.
    template: &Path,
) -> Result<String, ToolError> {
    let _ = (file, dir, template);
    Ok(String::new())
}

fn main() {}
