//! Compiles only if `#[tool]` and `#[derive(toolguard::JsonSchema)]` need no `schemars` crate of
//! the user's own.

use toolguard::{JsonSchema, ToolContext, ToolError, tool};

/// A result type whose schema comes through the re-export.
#[derive(serde::Serialize, JsonSchema)]
#[schemars(crate = "toolguard::schemars")]
struct Echoed {
    /// The text.
    text: String,
}

/// Echoes a text.
#[tool(read_only, risk = "low", output = "trusted")]
async fn echo(
    _ctx: &ToolContext<()>,
    /// Text to echo.
    #[arg(max_len = 100)]
    text: String,
) -> Result<Echoed, ToolError> {
    Ok(Echoed { text })
}

fn main() {
    let spec = <Echo as toolguard::Tool<()>>::spec(&Echo);
    let schema = toolguard::schemars::schema_for!(Echoed);
    println!("{} {}", spec.name, schema.as_value()["properties"]["text"]["type"]);
}
