use toolguard::{tool, Reconciled, ToolContext, ToolError};

pub struct Bank;

// Not async.
fn landed(_ctx: &ToolContext<Bank>, _args: &PayArgs) -> Result<Reconciled<u64>, ToolError> {
    Ok(Reconciled::Unknown)
}

// The wrong result: `Reconciled` of another type than the tool's output (`u64`).
async fn refunded(
    _ctx: &ToolContext<Bank>,
    _args: &RefundArgs,
) -> Result<Reconciled<String>, ToolError> {
    Ok(Reconciled::Unknown)
}

// The wrong argument type: the arguments by value.
async fn voided(_ctx: &ToolContext<Bank>, _args: VoidArgs) -> Result<Reconciled<u64>, ToolError> {
    Ok(Reconciled::Unknown)
}

/// Pays an invoice.
#[tool(idempotent(key = "host"), reconcile = landed)]
fn pay(_ctx: &ToolContext<Bank>, amount: u64) -> Result<u64, ToolError> {
    Ok(amount)
}

/// Refunds an invoice.
#[tool(idempotent(key = "host"), reconcile = refunded)]
fn refund(_ctx: &ToolContext<Bank>, amount: u64) -> Result<u64, ToolError> {
    Ok(amount)
}

/// Voids an invoice.
#[tool(idempotent(key = "host"), reconcile = voided)]
fn void(_ctx: &ToolContext<Bank>, amount: u64) -> Result<u64, ToolError> {
    Ok(amount)
}

fn main() {}
