use toolguard::{tool, ToolError};

/// Shows a balance.
#[tool(read_only, idempotent, approval_over = 100)]
fn balance(
    /// Amount to compare with.
    amount: u64,
) -> Result<u64, ToolError> {
    Ok(amount)
}

/// Pays out.
#[tool(idempotent, approval_over = 0, approvals = 0)]
fn pay_out(
    /// Amount in cents.
    amount: u64,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

/// Archives an order.
#[tool(key_wins, timeout_ms = 0)]
fn archive(
    /// Order number.
    order: u32,
    /// Lines to archive; `max_items = 0` admits none.
    #[arg(max_items = 0)]
    lines: Vec<u32>,
) -> Result<(), ToolError> {
    let _ = (order, lines);
    Ok(())
}

fn main() {}
