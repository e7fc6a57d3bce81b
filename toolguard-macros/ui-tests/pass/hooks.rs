// Hooks of every kind, including ones named like the generated code's own items.
use toolguard::{tool, Reconciled, Tool, ToolContext, ToolError};

pub struct Shop;

async fn hook(_ctx: &ToolContext<Shop>, _args: &RestockArgs) -> Result<(), ToolError> {
    Ok(())
}

async fn args(_ctx: &ToolContext<Shop>, _args: &RestockArgs) -> Result<(), ToolError> {
    Ok(())
}

async fn ctx(
    _ctx: &ToolContext<Shop>,
    _args: &RestockArgs,
) -> Result<Reconciled<u32>, ToolError> {
    Ok(Reconciled::Unknown)
}

/// Restocks one item.
#[tool(idempotent(key = "host"), preflight = hook, authorize = args, reconcile = ctx)]
fn restock(_ctx: &ToolContext<Shop>, item: u32) -> Result<u32, ToolError> {
    Ok(item)
}

fn main() {
    let _ = <Restock as Tool<Shop>>::spec(&Restock);
    assert_eq!(Restock::NAME, "restock");
    assert_eq!(Restock::FIELDS.item, "item");
}
