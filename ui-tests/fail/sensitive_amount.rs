use toolguard::{tool, ToolError};

/// Pays an invoice.
#[tool(idempotent, approval_over = 10_000)]
fn pay(
    /// Amount in cents.
    #[arg(sensitive, min = 1)]
    amount: u64,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

fn main() {}
