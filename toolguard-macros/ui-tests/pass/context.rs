use toolguard::{tool, ToolContext, ToolError, ToolHandle};

/// Application state.
pub struct Notes {
    pub prefix: String,
}

/// Returns the caller's note.
#[tool(risk = "medium", read_only, output = "trusted")]
async fn my_note(
    ctx: &ToolContext<Notes>,
    /// Which note.
    #[arg(min = 1, max = 99)]
    number: u8,
) -> Result<String, ToolError> {
    Ok(format!("{}{}:{number}", ctx.state().prefix, ctx.subject()))
}

/// Sync with a context.
#[tool(read_only, output = "trusted")]
fn whoami(ctx: &ToolContext<Notes>) -> Result<String, ToolError> {
    Ok(ctx.subject().to_owned())
}

fn main() {
    let _handles: Vec<ToolHandle<Notes>> = vec![ToolHandle::new(MyNote), ToolHandle::new(Whoami)];
}
