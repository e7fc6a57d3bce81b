use toolguard::{tool, ToolError};

/// Dollars as a float, hidden behind an alias.
type Dollars = f64;

/// Refunds with a signed amount.
#[tool(idempotent, approval_over = 10_000)]
fn refund(
    /// Amount in cents.
    amount: i64,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

/// Tips with a text amount.
#[tool(idempotent, approval_over = 10_000)]
fn tip(
    /// Amount, as written by the model.
    #[arg(amount, max_len = 20)]
    how_much: String,
) -> Result<(), ToolError> {
    let _ = how_much;
    Ok(())
}

/// Donates an aliased float.
#[tool(idempotent, approval_over = 10_000)]
fn donate(
    /// Amount in dollars.
    amount: Option<Dollars>,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

fn main() {}
