use toolguard::{tool, Egress, Tool, ToolError, Url};

/// Reads the latest message of a shared inbox: someone else's words.
#[tool(read_only, output = "untrusted")]
fn latest_message() -> Result<String, ToolError> {
    Ok(String::new())
}

/// Reads a status line the application writes itself.
#[tool(read_only, output = "trusted")]
fn status_line() -> Result<String, ToolError> {
    Ok(String::new())
}

/// Fetches a partner page; destinations restricted by the sanitizer's host allowlist.
#[tool(read_only, output = "untrusted", egress = "allowlisted")]
fn fetch_partner_page(
    /// Page address.
    url: Url,
) -> Result<String, ToolError> {
    Ok(url.to_string())
}

/// Fetches any page; every call needs a human.
#[tool(risk = "critical", idempotent, output = "untrusted", egress)]
fn fetch_any_page(
    /// Page address.
    url: Url,
) -> Result<String, ToolError> {
    Ok(url.to_string())
}

fn main() {
    let inbox = <LatestMessage as Tool<()>>::spec(&LatestMessage);
    assert!(inbox.untrusted_output);
    assert_eq!(inbox.egress, Egress::None);
    let status = <StatusLine as Tool<()>>::spec(&StatusLine);
    assert!(!status.untrusted_output);
    let partner = <FetchPartnerPage as Tool<()>>::spec(&FetchPartnerPage);
    assert!(partner.untrusted_output);
    assert_eq!(partner.egress, Egress::Allowlisted);
    let any = <FetchAnyPage as Tool<()>>::spec(&FetchAnyPage);
    assert_eq!(any.egress, Egress::Open);
}
