//! The addresses the sanitizer checked for a `url` field reach the handler, so it connects to
//! them instead of resolving the host again.

use serde_json::json;
use toolguard::{Dispatcher, Principal, Status, ToolCall, ToolContext, ToolError, tool};

/// Fetches a public page.
/// It answers with the address it would connect to, which the application produced.
#[tool(read_only, output = "trusted")]
async fn fetch_page(
    ctx: &ToolContext<()>,
    /// Page address.
    #[arg(kind = "url", max_len = 200)]
    page: String,
) -> Result<String, ToolError> {
    let checked = ctx
        .resolved_url("/page")
        .ok_or_else(|| ToolError::failed("unchecked url"))?;
    let _ = page;
    Ok(format!(
        "{}:{} via {:?}",
        checked.host, checked.port, checked.addrs
    ))
}

#[tokio::test]
async fn handlers_see_the_checked_addresses() {
    let d = Dispatcher::builder(()).tool(FetchPage).build().unwrap();
    let who = Principal::new("acme", "alice", "s");
    let out = d
        .dispatch(
            ToolCall::new(
                "c",
                "fetch_page",
                json!({"page": "https://93.184.216.34/index.html"}),
            ),
            &who,
        )
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert_eq!(
        out.data(),
        Some(&json!("93.184.216.34:443 via [93.184.216.34]"))
    );
    let metadata = d
        .dispatch(
            ToolCall::new(
                "c",
                "fetch_page",
                json!({"page": "http://169.254.169.254/latest/meta-data"}),
            ),
            &who,
        )
        .await;
    assert_eq!(metadata.status, Status::Blocked);
}
