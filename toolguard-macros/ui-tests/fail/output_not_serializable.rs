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

/// An error type without a conversion into `ToolError`.
#[derive(Debug)]
pub struct LedgerError;

/// Reads a balance.
#[tool(read_only)]
fn balance() -> Result<u64, LedgerError> {
    Err(LedgerError)
}

fn main() {}
