use toolguard::{tool, Tool, ToolError};

/// Places an order; the model sends the key.
#[tool(idempotent)]
fn place_order(
    /// Product number.
    product: u32,
) -> Result<u32, ToolError> {
    Ok(product)
}

/// Places an order; the host supplies the key.
#[tool(idempotent(key = "host"), risk = "high")]
fn place_order_host(
    /// Product number.
    product: u32,
) -> Result<u32, ToolError> {
    Ok(product)
}

fn main() {
    let a = PlaceOrderArgs { product: 1, idempotency_key: String::from("abcdefgh") };
    let b = PlaceOrderHostArgs { product: 1 };
    let _ = (a, b);
    let spec = <PlaceOrder as Tool<()>>::spec(&PlaceOrder);
    assert_eq!(spec.idempotency_key_field.as_deref(), Some("idempotency_key"));
    let spec = <PlaceOrderHost as Tool<()>>::spec(&PlaceOrderHost);
    assert_eq!(spec.idempotency_key_field, None);
}
