use toolguard::{tool, ToolError};

/// Pays an invoice.
#[tool(idempotent, aproval_over = 10_000, risk = "severe", colour = "red")]
fn pay(
    /// Amount in cents.
    #[arg(maxlen = 10, sensitve)]
    amount: u64,
    /// Invoice number.
    #[arg(kind = "identfier")]
    invoice: String,
) -> Result<(), ToolError> {
    let _ = (amount, invoice);
    Ok(())
}

fn main() {}
