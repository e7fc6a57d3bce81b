use toolguard::{tool, ToolContext, ToolError};

/// Application state.
pub struct Bank;

/// Option values of the wrong shape.
#[tool(risk, name = 5, approval_over = -1, approvals = 99999999999999999999999, read_only = true)]
fn wrong_shapes(
    /// Amount.
    amount: u64,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

/// More wrong values.
#[tool(idempotent(key = "cloud"), preflight = 42, revision = 1.5, risk = "low", risk = "medium")]
fn more(
    ctx: &ToolContext<Bank>,
    /// Bounds.
    #[arg(min = "x", max = 1e999, min_len = -3, sensitive = true, kind = identifier)]
    a: u32,
    /// Bare attribute.
    #[arg]
    b: u32,
    /// Bounds the wrong way round.
    #[arg(min_len = 9, max_len = 2, min = 10, max = 1, root = "/srv")]
    c: String,
) -> Result<(), ToolError> {
    let _ = (ctx, a, b, c);
    Ok(())
}

/// Context given an argument attribute, by value, and a pattern parameter.
#[tool(read_only)]
fn odd_params(
    #[arg(max_len = 3)] ctx: &ToolContext<Bank>,
    /// A tuple.
    (x, y): (u32, u32),
) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(x + y)
}

/// Not parseable.
#[tool(risk = = "high")]
fn unparseable() -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
