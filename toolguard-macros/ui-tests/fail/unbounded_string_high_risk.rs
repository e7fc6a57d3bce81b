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

/// Sends a batch of mails.
#[tool(risk = "critical", idempotent)]
fn send_batch(
    /// Recipient accounts.
    #[arg(kind = "identifier")]
    recipients: Vec<String>,
    /// Headers.
    headers: std::collections::HashMap<String, u32>,
    /// Priority; `max_items` bounds collections only.
    #[arg(max_items = 3)]
    priority: u8,
    /// Bounded list (fine).
    #[arg(kind = "identifier", max_items = 50)]
    cc: Vec<String>,
) -> Result<(), ToolError> {
    let _ = (recipients, headers, priority, cc);
    Ok(())
}

fn main() {}
