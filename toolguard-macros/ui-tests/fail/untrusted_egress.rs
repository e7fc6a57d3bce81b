use toolguard::{tool, Email, ToolError, Url};

/// Fetches a web page; its query can carry data out.
#[tool(read_only, output = "untrusted", egress)]
fn fetch_page(
    /// Page address.
    url: Url,
) -> Result<String, ToolError> {
    Ok(url.to_string())
}

/// Forwards a message; claims an allowlist but names no destination.
#[tool(risk = "medium", egress = "allowlisted")]
fn forward(
    /// Message text.
    #[arg(max_len = 200)]
    text: String,
) -> Result<(), ToolError> {
    let _ = text;
    Ok(())
}

/// Reads the latest message of a shared inbox.
#[tool(read_only)]
fn latest_message() -> Result<String, ToolError> {
    Ok(String::new())
}

/// Sends a reply; fine: the result is trusted.
#[tool(risk = "medium", output = "trusted", egress)]
fn reply(
    /// Recipient.
    to: Email,
) -> Result<(), ToolError> {
    let _ = to;
    Ok(())
}

/// Unknown spellings.
#[tool(read_only, output = "external", egress = "anywhere")]
fn typo() -> Result<u64, ToolError> {
    Ok(1)
}

fn main() {}
