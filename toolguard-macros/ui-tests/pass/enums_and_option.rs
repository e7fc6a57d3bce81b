use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolguard::{tool, ToolError};

/// Sort order.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Oldest first.
    Oldest,
    /// Newest first.
    Newest,
}

/// A filter with data.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum Filter {
    /// By status.
    Status { open: bool },
    /// By customer number.
    Customer { number: u32 },
}

/// One order line: numbers only, which the compiler checks.
#[derive(Debug, Serialize, JsonSchema, toolguard::NoFreeText)]
pub struct Line {
    /// Order number.
    pub number: u32,
}

/// Lists orders.
#[tool(read_only)]
fn list_orders(
    /// Sort order.
    order: Order,
    /// Optional filter.
    filter: Option<Filter>,
    /// Page size.
    #[arg(min = 1, max = 100)]
    limit: Option<u32>,
    /// Search text.
    #[arg(max_len = 50)]
    search: Option<String>,
) -> Result<Vec<Line>, ToolError> {
    let _ = (order, filter, limit, search);
    Ok(vec![Line { number: 1 }])
}

fn main() {}
