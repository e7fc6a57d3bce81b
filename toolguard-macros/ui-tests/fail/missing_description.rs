use toolguard::{tool, ToolError};

#[tool(read_only)]
fn undocumented(page: u32) -> Result<u32, ToolError> {
    Ok(page)
}

/// Closes an account.
#[tool(risk = "high", idempotent)]
fn close_account(
    #[arg(kind = "identifier")] account: String,
    /// Whether to keep the statements.
    keep_statements: bool,
) -> Result<(), ToolError> {
    let _ = (account, keep_statements);
    Ok(())
}

/// Deletes a customer's data.
#[tool(risk = "critical", idempotent)]
fn erase_customer(
    #[arg(kind = "identifier")] customer: String,
    #[arg(max_len = 200)] reason: String,
) -> Result<(), ToolError> {
    let _ = (customer, reason);
    Ok(())
}

fn main() {}
