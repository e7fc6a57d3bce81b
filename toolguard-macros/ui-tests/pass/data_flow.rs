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

/// One booked transfer.
#[derive(serde::Serialize, schemars::JsonSchema)]
struct Booked {
    /// Written by the sender.
    subject: String,
    /// Recorded by the bank.
    cents: u64,
}

/// The newest transfers: the bank records accounts and amounts, senders write the subjects.
#[tool(read_only, untrusted_fields = ["/*/subject"])]
fn transactions() -> Result<Vec<Booked>, ToolError> {
    Ok(Vec::new())
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
    let history = <Transactions as Tool<()>>::spec(&Transactions);
    assert!(history.untrusted_output && history.output_declared);
    assert_eq!(history.untrusted_fields, ["/*/subject"]);
    let any = <FetchAnyPage as Tool<()>>::spec(&FetchAnyPage);
    assert_eq!(any.egress, Egress::Open);
}
