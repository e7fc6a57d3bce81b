use toolguard::{tool, ToolContext, ToolError};

pub struct Shop;

pub struct Other;

// Not async.
fn in_stock(_ctx: &ToolContext<Shop>, _args: &BuyArgs) -> Result<(), ToolError> {
    Ok(())
}

// The wrong argument type: another tool's arguments.
async fn may_sell(_ctx: &ToolContext<Shop>, _args: &Other) -> Result<(), ToolError> {
    Ok(())
}

// The wrong result: a `bool` instead of `Result<(), ToolError>`.
async fn has_budget(_ctx: &ToolContext<Shop>, _args: &RestockArgs) -> bool {
    true
}

// The wrong argument type: the context by value.
async fn owns_shelf(_ctx: ToolContext<Shop>, _args: &RestockArgs) -> Result<(), ToolError> {
    Ok(())
}

/// Buys one item.
#[tool(preflight = in_stock, authorize = may_sell)]
fn buy(_ctx: &ToolContext<Shop>, item: u32) -> Result<u32, ToolError> {
    Ok(item)
}

/// Restocks one item.
#[tool(preflight = has_budget, authorize = owns_shelf)]
fn restock(_ctx: &ToolContext<Shop>, item: u32) -> Result<u32, ToolError> {
    Ok(item)
}

fn main() {}
