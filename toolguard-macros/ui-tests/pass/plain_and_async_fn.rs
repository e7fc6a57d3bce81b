use toolguard::{tool, Tool, ToolError};

/// Adds two numbers.
#[tool(read_only)]
fn add(
    /// First term.
    a: i64,
    /// Second term.
    b: i64,
) -> Result<i64, ToolError> {
    Ok(a + b)
}

/// Echoes a word, asynchronously.
#[tool]
pub async fn echo(
    /// The word.
    #[arg(max_len = 20)]
    word: &str,
) -> Result<String, String> {
    Ok(word.to_owned())
}

fn main() {
    let _ = add(1, 2);
    let _ = echo("hi");
    let _: toolguard::ToolSpec = <Add as Tool<()>>::spec(&Add);
    let _ = EchoArgs { word: String::from("hi") };
}
