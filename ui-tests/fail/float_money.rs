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

fn main() {}
