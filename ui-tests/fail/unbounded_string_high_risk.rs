use toolguard::{tool, ToolError};

/// Sends an e-mail to a customer.
#[tool(risk = "high", idempotent)]
fn send_mail(
    /// Recipient account.
    #[arg(kind = "identifier")]
    to: String,
    /// Subject line.
    #[arg(max_len = 120)]
    subject_line: String,
    /// Message body.
    body: String,
    /// Optional signature.
    signature: Option<String>,
) -> Result<(), ToolError> {
    let _ = (to, subject_line, body, signature);
    Ok(())
}

fn main() {}
