use toolguard::{tool, ToolError};

/// Deletes the caller's account.
#[tool(risk = "critical")]
fn delete_account(
    /// Reason given by the caller.
    #[arg(max_len = 200)]
    reason: String,
) -> Result<(), ToolError> {
    let _ = reason;
    Ok(())
}

/// Reads the caller's statements (fine: read-only).
#[tool(risk = "high", read_only, output = "trusted")]
fn statements(
    /// Month, `YYYY-MM`.
    #[arg(kind = "identifier")]
    month: String,
) -> Result<Vec<String>, ToolError> {
    Ok(vec![month])
}

/// Sends a payment.
#[tool(risk = "high")]
fn pay(
    /// Amount in cents.
    amount: u64,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

fn main() {}
