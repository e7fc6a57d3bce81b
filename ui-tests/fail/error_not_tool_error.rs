use toolguard::tool;

/// An error type with no conversion into `ToolError`.
#[derive(Debug)]
pub struct BankError;

/// Checks the bank.
#[tool(read_only)]
fn ping() -> Result<(), BankError> {
    Ok(())
}

fn main() {}
