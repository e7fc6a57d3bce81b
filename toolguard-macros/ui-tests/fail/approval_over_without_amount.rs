use toolguard::{tool, ToolError};

/// Sends a payment reminder.
#[tool(idempotent, approval_over = 10_000)]
fn remind(
    /// Invoice number.
    #[arg(kind = "identifier")]
    invoice: String,
) -> Result<(), ToolError> {
    let _ = invoice;
    Ok(())
}

/// Pays an invoice; the amount is a float.
#[tool(idempotent, approval_over = 10_000)]
fn pay(
    /// Invoice number.
    #[arg(kind = "identifier")]
    invoice: String,
    /// Amount in dollars.
    #[arg(amount)]
    total: f64,
) -> Result<(), ToolError> {
    let _ = (invoice, total);
    Ok(())
}

fn main() {}

/// Pays an invoice, but a retry would open a second approval request.
#[tool(approval_over = 10_000)]
fn pay_twice(
    /// Amount in cents.
    amount: u64,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}
