use toolguard::{tool, Email, ToolError};

/// Sends a note to a recipient.
#[tool(risk = "medium")]
fn send_note(
    /// The recipient.
    #[arg(role = "recipient")]
    to: Email,
    /// The text.
    #[arg(max_len = 200, role = "contnet")]
    body: String,
) -> Result<(), ToolError> {
    let _ = (to, body);
    Ok(())
}

fn main() {}
