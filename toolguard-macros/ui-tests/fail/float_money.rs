use toolguard::{tool, ToolError};

/// Refunds an order.
#[tool(idempotent)]
fn refund(
    /// Order number.
    #[arg(kind = "identifier")]
    order: String,
    /// Amount to refund.
    amount: Option<f64>,
    /// Fee kept.
    #[arg(kind = "money")]
    fee: f32,
) -> Result<(), ToolError> {
    let _ = (order, amount, fee);
    Ok(())
}

/// Quotes prices; every field is named like money.
#[tool(read_only)]
#[allow(non_snake_case)]
fn quote(
    /// Unit price.
    price: f64,
    /// Total in dollars.
    total_usd: Option<f64>,
    /// Costs per line.
    unitCosts: Vec<f32>,
    /// Balance, in capitals.
    BALANCE: f64,
    /// Fee, in capitals.
    FEE_CENTS: f32,
    /// Grand total, in capitals.
    TOTAL_AMOUNT: Option<f64>,
    /// A ratio, not money (fine).
    discount_ratio: f64,
) -> Result<(), ToolError> {
    let _ = (price, total_usd, unitCosts, BALANCE, FEE_CENTS, TOTAL_AMOUNT, discount_ratio);
    Ok(())
}

/// Splits a payment; the amount is a list of floats.
#[tool(idempotent)]
fn split(
    /// Parts of the amount.
    amount: Vec<f64>,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

fn main() {}
