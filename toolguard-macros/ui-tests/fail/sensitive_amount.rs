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

/// Tips a courier.
#[tool(idempotent, approval_over = 5_000)]
fn tip(
    /// Tip in cents.
    #[arg(amount, sensitive)]
    tip_cents: u64,
) -> Result<(), ToolError> {
    let _ = tip_cents;
    Ok(())
}

fn main() {}
