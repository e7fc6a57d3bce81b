use toolguard::{tool, ToolError};

/// A result type without `Serialize` or `JsonSchema`.
pub struct Report {
    pub lines: Vec<String>,
}

/// Builds a report.
#[tool(read_only)]
fn build_report() -> Result<Report, ToolError> {
    Ok(Report { lines: vec![] })
}

fn main() {}
