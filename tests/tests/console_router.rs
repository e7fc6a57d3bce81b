//! The approval console over a real HTTP connection on 127.0.0.1: every route, who may see and
//! decide what, CSRF refusal, cross-tenant refusal, escaping of model-proposed text, redaction of
//! `sensitive` fields, and the security headers.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::HeaderMap;
use reqwest::StatusCode;
use serde_json::{Value, json};
use toolguard::{
    BoxFuture, Dispatcher, MemoryAuditSink, MemoryStore, Principal, RiskPolicy, Status, ToolCall,
    ToolContext, ToolError, tool,
};
use toolguard_console::{Console, History, Ineligible, ReviewerAuth};
use toolguard_tests::*;

/// Rotates a partner's API key; always needs a human. The key is `sensitive`.
#[tool(risk = "critical", idempotent)]
async fn rotate_key(
    ctx: &ToolContext<Ledger>,
    /// Partner.
    #[arg(kind = "identifier", max_len = 32)]
    partner: String,
    /// The new key.
    #[arg(sensitive, max_len = 64)]
    new_key: String,
) -> Result<bool, ToolError> {
    let _ = (partner, new_key);
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(true)
}

/// The test's authentication: header `x-test-user` names the reviewer, `x-test-session` (optional)
/// their login session.
struct HeaderAuth;

fn principal(user: &str, session: &str) -> Option<Principal> {
    let (tenant, roles): (&str, &[&str]) = match user {
        "alice" => ("acme", &[]),
        "bob" | "dave" => ("acme", &["approver"]),
        "eve" => ("acme", &["auditor"]),
        "carol" => ("globex", &["approver"]),
        _ => return None,
    };
    let mut p = Principal::new(tenant, user, session);
    for r in roles {
        p = p.with_role(*r);
    }
    Some(p)
}

impl ReviewerAuth for HeaderAuth {
    fn reviewer<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Option<Principal>> {
        Box::pin(async move {
            let user = headers.get("x-test-user")?.to_str().ok()?;
            let session = headers
                .get("x-test-session")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("login-1");
            principal(user, session)
        })
    }
}

struct H {
    url: String,
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    http: reqwest::Client,
}

async fn harness(ineligible: Ineligible) -> H {
    harness_served(ineligible, Served::Nested).await
}

/// How the test serves the console.
enum Served {
    /// `Console::router` nested into the test's own axum app.
    Nested,
    /// `Console::serve` on the test's listener.
    Own,
}

async fn harness_served(ineligible: Ineligible, served: Served) -> H {
    let ledger = Arc::new(Ledger::seeded());
    let history = History::new();
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(WireOut)
        .tool(RotateKey)
        .host_keys(toolguard::HostKeys::ephemeral())
        .audit(MemoryAuditSink::new())
        .store(Arc::new(MemoryStore::new()))
        .policy(RiskPolicy::new().approver_roles(["approver"]))
        .notifier(history.clone())
        .build()
        .unwrap();
    let console = Console::new(d.clone(), HeaderAuth)
        .mounted_at("/console")
        .ineligible(ineligible)
        .history(history);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/console", listener.local_addr().unwrap());
    match served {
        Served::Nested => {
            let app = axum::Router::new().nest("/console", console.router());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        }
        Served::Own => {
            tokio::spawn(async move { console.serve(listener).await.unwrap() });
        }
    }
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    H {
        url,
        d,
        ledger,
        http,
    }
}

impl H {
    /// alice's agent proposes `tool` with `args`; returns the approval id.
    async fn propose(&self, tool: &str, mut args: Value, key: &str) -> String {
        args["idempotency_key"] = json!(key);
        let out = self
            .d
            .dispatch(ToolCall::new(key, tool, args.to_string()), &alice())
            .await;
        assert_eq!(out.status, Status::PendingApproval, "{out:?}");
        out.approval.unwrap().approval_id
    }

    async fn transfer(&self, memo: &str) -> String {
        let args = json!({"from_account": "acc-alice-1", "to_account": "acc-bob-1",
            "amount": 2_000_000, "currency": "USD", "memo": memo});
        self.propose(
            "transfer_funds",
            args,
            &format!("k-{}", uuid::Uuid::new_v4().simple()),
        )
        .await
    }

    async fn get(&self, user: Option<&str>, path: &str) -> (StatusCode, HeaderMap, String) {
        let mut req = self.http.get(format!("{}{path}", self.url));
        if let Some(u) = user {
            req = req.header("x-test-user", u);
        }
        let res = req.send().await.unwrap();
        let (status, headers) = (res.status(), res.headers().clone());
        (status, headers, res.text().await.unwrap())
    }

    async fn csrf(&self, user: &str) -> String {
        let (status, _, body) = self.get(Some(user), "/api/session").await;
        assert_eq!(status, StatusCode::OK);
        let v: Value = serde_json::from_str(&body).unwrap();
        v["csrf_token"].as_str().unwrap().to_owned()
    }

    async fn post_form(
        &self,
        user: Option<&str>,
        path: &str,
        form: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> (StatusCode, String) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header("content-type", "application/x-www-form-urlencoded");
        let body: Vec<String> = form
            .iter()
            .map(|(k, v)| format!("{k}={}", urlencode(v)))
            .collect();
        req = req.body(body.join("&"));
        if let Some(u) = user {
            req = req.header("x-test-user", u);
        }
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        let res = req.send().await.unwrap();
        (res.status(), res.text().await.unwrap())
    }

    async fn approve(&self, user: &str, id: &str) -> (StatusCode, String) {
        let token = self.csrf(user).await;
        self.post_form(
            Some(user),
            &format!("/requests/{id}/approve"),
            &[("csrf", &token)],
            &[],
        )
        .await
    }

    async fn post_api(
        &self,
        user: &str,
        path: &str,
        token: Option<&str>,
        body: Value,
    ) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .header("x-test-user", user)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(t) = token {
            req = req.header("x-csrf-token", t);
        }
        let res = req.send().await.unwrap();
        let status = res.status();
        (
            status,
            serde_json::from_str(&res.text().await.unwrap()).unwrap(),
        )
    }

    fn state_of(&self, id: &str) -> impl Future<Output = toolguard::store::ApprovalState> + '_ {
        let id = id.to_owned();
        async move {
            let viewer = bob_approver();
            self.d
                .approvals()
                .get(&viewer, &id)
                .await
                .unwrap()
                .unwrap()
                .state
        }
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn assert_secure_headers(path: &str, h: &HeaderMap) {
    let csp = h
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{path}: no CSP"));
    assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
    assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
    assert!(!csp.contains("unsafe-inline"), "{path}: {csp}");
    assert_eq!(h["x-frame-options"], "DENY", "{path}");
    assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
    assert!(
        h["cache-control"].to_str().unwrap().contains("no-store"),
        "{path}"
    );
    assert_eq!(h["referrer-policy"], "no-referrer", "{path}");
}

#[tokio::test]
async fn the_pending_list_shows_the_exact_amount_and_the_detail_escapes_model_text() {
    let h = harness(Ineligible::ReadOnly).await;
    // (A `<script>` element is refused by the sanitizer as markup; any other tag still reaches
    // the reviewer and must be shown as text.)
    let id = h.transfer("rent <marquee>alert('x')</marquee> & co").await;
    let (status, _, list) = h.get(Some("bob"), "/requests").await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains(&id));
    assert!(list.contains("20,000.00 USD"), "{list}");
    assert!(list.contains("You can decide"));
    let (status, _, page) = h.get(Some("bob"), &format!("/requests/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains("rent &lt;marquee&gt;alert('x')&lt;/marquee&gt; &amp; co"),
        "{page}"
    );
    assert!(
        !page.contains("<marquee>alert"),
        "model text must never become markup"
    );
    assert!(page.contains("acc-bob-1"));
    assert!(
        page.contains("Moves money from one of the caller"),
        "tool description"
    );
    assert!(page.contains("risk <strong class=\"risk\">high</strong>"));
    let request =
        h.d.approvals()
            .get(&bob_approver(), &id)
            .await
            .unwrap()
            .unwrap();
    assert!(
        page.contains(&request.binding_digest),
        "binding digest shown"
    );
    assert!(page.contains("0 of 1 approvals"));
    assert!(page.contains("id=\"approve\""));
    assert!(page.contains("name=\"csrf\""));
    // The only scripts are the console's own file.
    assert_eq!(page.matches("<script").count(), 1);
    assert!(page.contains("<script src=\"/console/assets/console.js\" defer></script>"));
}

#[tokio::test]
async fn every_route_sets_the_security_headers() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    for path in [
        String::new(),
        "/requests".to_owned(),
        format!("/requests/{id}"),
        "/history".to_owned(),
        "/api/session".to_owned(),
        "/api/requests".to_owned(),
        format!("/api/requests/{id}"),
        "/api/history".to_owned(),
        "/assets/console.css".to_owned(),
        "/assets/console.js".to_owned(),
        "/requests/apr_missing".to_owned(),
    ] {
        let (_, headers, _) = h.get(Some("bob"), &path).await;
        assert_secure_headers(&path, &headers);
        let (_, headers, _) = h.get(None, &path).await;
        assert_secure_headers(&path, &headers);
    }
    let res = h
        .http
        .post(format!("{}/requests/{id}/approve", h.url))
        .send()
        .await
        .unwrap();
    assert_secure_headers("POST approve", res.headers());
}

#[tokio::test]
async fn without_a_session_every_route_answers_401_and_nothing_executes() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    for path in [
        "/requests".to_owned(),
        format!("/requests/{id}"),
        "/history".to_owned(),
        "/api/session".to_owned(),
        "/api/requests".to_owned(),
        format!("/api/requests/{id}"),
        "/api/history".to_owned(),
    ] {
        let (status, _, body) = h.get(None, &path).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(!body.contains("20,000.00"), "{path} leaks the preview");
    }
    let (status, _) = h
        .post_form(
            None,
            &format!("/requests/{id}/approve"),
            &[("csrf", "00")],
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = h
        .post_api(
            "nobody",
            &format!("/api/requests/{id}/approve"),
            None,
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"], "unauthenticated");
    assert_eq!(h.ledger.transfers(), 0);
    assert_eq!(
        h.state_of(&id).await,
        toolguard::store::ApprovalState::Pending
    );
}

#[tokio::test]
async fn decisions_without_the_sessions_csrf_token_are_refused_without_effect() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    let path = format!("/requests/{id}/approve");
    let bobs = h.csrf("bob").await;
    let daves = h.csrf("dave").await;
    // No token, another user's token, a token of bob's other session, garbage.
    for (token, session) in [
        ("", None),
        (daves.as_str(), None),
        (bobs.as_str(), Some("login-2")),
        ("zz", None),
    ] {
        let mut extra = Vec::new();
        if let Some(s) = session {
            extra.push(("x-test-session", s));
        }
        let (status, body) = h
            .post_form(Some("bob"), &path, &[("csrf", token)], &extra)
            .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "token {token:?}");
        assert!(body.contains("security token"), "{body}");
    }
    // The right token from a cross-site page.
    let (status, _) = h
        .post_form(
            Some("bob"),
            &path,
            &[("csrf", &bobs)],
            &[("sec-fetch-site", "cross-site")],
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The JSON API needs the header.
    let api = format!("/api/requests/{id}/approve");
    let (status, body) = h.post_api("bob", &api, None, json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error"], "csrf");
    let (status, _) = h.post_api("bob", &api, Some(&daves), json!({})).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A GET never decides.
    let res = h
        .http
        .get(format!("{}{path}?csrf={bobs}", h.url))
        .header("x-test-user", "bob")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(h.ledger.transfers(), 0);
    assert_eq!(
        h.state_of(&id).await,
        toolguard::store::ApprovalState::Pending
    );
}

#[tokio::test]
async fn an_approval_executes_once_shows_the_outcome_and_enters_the_history() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    let (status, page) = h.approve("bob", &id).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("id=\"outcome-status\">ok<"), "{page}");
    assert!(page.contains("id=\"state\">executed<"), "{page}");
    assert_eq!(h.ledger.transfers(), 1);
    // Deciding again changes nothing.
    let (status, page) = h.approve("dave", &id).await;
    assert_eq!(status, StatusCode::CONFLICT, "{page}");
    assert_eq!(h.ledger.transfers(), 1);
    let (_, _, list) = h.get(Some("bob"), "/requests").await;
    assert!(
        !list.contains(&id),
        "decided requests leave the pending list"
    );
    let (_, _, history) = h.get(Some("dave"), "/history").await;
    assert!(history.contains(&id));
    assert!(history.contains("executed"));
    let (_, _, api) = h.get(Some("dave"), "/api/history").await;
    let api: Value = serde_json::from_str(&api).unwrap();
    assert_eq!(api["requests"][0]["id"], json!(id));
    assert_eq!(api["requests"][0]["state"], "executed");
    assert_eq!(api["requests"][0]["decisions"][0]["approver"], "bob");
}

#[tokio::test]
async fn rejecting_needs_a_reason_and_the_reason_is_shown_as_text() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    let token = h.csrf("bob").await;
    let path = format!("/requests/{id}/reject");
    for reason in ["", "   ", &"x".repeat(501)] {
        let (status, _) = h
            .post_form(
                Some("bob"),
                &path,
                &[("csrf", &token), ("reason", reason)],
                &[],
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{reason:?}");
    }
    assert_eq!(
        h.state_of(&id).await,
        toolguard::store::ApprovalState::Pending
    );
    let (status, page) = h
        .post_form(
            Some("bob"),
            &path,
            &[("csrf", &token), ("reason", "<b>unknown payee</b>")],
            &[],
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("approval_rejected"));
    assert!(page.contains("&lt;b&gt;unknown payee&lt;/b&gt;"), "{page}");
    assert_eq!(
        h.state_of(&id).await,
        toolguard::store::ApprovalState::Rejected
    );
    assert_eq!(h.ledger.transfers(), 0);
    // The JSON API also wants a reason.
    let id2 = h.transfer("rent").await;
    let (status, body) = h
        .post_api(
            "bob",
            &format!("/api/requests/{id2}/reject"),
            Some(&token),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"], "reason_required");
    let (status, body) = h
        .post_api(
            "bob",
            &format!("/api/requests/{id2}/reject"),
            Some(&token),
            json!({"reason": "duplicate"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["outcome"]["status"], "approval_rejected");
    assert_eq!(body["request"]["state"], "rejected");
}

#[tokio::test]
async fn the_requester_and_reviewers_without_the_role_are_read_only_and_refused() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    for (user, why) in [
        ("alice", "you requested this action"),
        ("eve", "needs one of the roles: approver"),
    ] {
        let (status, _, page) = h.get(Some(user), &format!("/requests/{id}")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains(why), "{user}: {page}");
        assert!(
            !page.contains("id=\"approve\""),
            "{user} gets no decision form"
        );
        let (_, _, list) = h.get(Some(user), "/requests").await;
        assert!(list.contains("Read-only"));
        // A forged POST with the user's own valid token reaches the dispatcher, which refuses.
        let (status, page) = h.approve(user, &id).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{user}: {page}");
        assert!(page.contains("id=\"outcome-status\">forbidden<"), "{page}");
    }
    assert_eq!(h.ledger.transfers(), 0);
    assert_eq!(
        h.state_of(&id).await,
        toolguard::store::ApprovalState::Pending
    );
}

#[tokio::test]
async fn another_tenants_reviewer_sees_nothing_and_cannot_decide() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    let (status, _, list) = h.get(Some("carol"), "/requests").await;
    assert_eq!(status, StatusCode::OK);
    assert!(!list.contains(&id));
    assert!(!list.contains("20,000.00"));
    let (status, _, page) = h.get(Some("carol"), &format!("/requests/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!page.contains("acc-bob-1"));
    let (status, _, body) = h.get(Some("carol"), &format!("/api/requests/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("not_found"));
    let (status, _) = h.approve("carol", &id).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let token = h.csrf("carol").await;
    let (status, _) = h
        .post_api(
            "carol",
            &format!("/api/requests/{id}/reject"),
            Some(&token),
            json!({"reason": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Ids that are not ids are not looked up.
    let (status, _, _) = h.get(Some("bob"), "/requests/..%2F..%2Fetc").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(h.ledger.transfers(), 0);
    assert_eq!(
        h.state_of(&id).await,
        toolguard::store::ApprovalState::Pending
    );
}

#[tokio::test]
async fn dual_control_needs_two_distinct_approvers() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h
        .propose("wire_out", json!({"amount": 4_500_000}), "wire-key-1")
        .await;
    let (_, _, page) = h.get(Some("bob"), &format!("/requests/{id}")).await;
    assert!(page.contains("0 of 2 approvals"));
    let (status, page) = h.approve("bob", &id).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("pending_approval"), "{page}");
    assert!(page.contains("1 of 2 approvals"), "{page}");
    assert_eq!(h.ledger.transfers(), 0);
    let (_, _, page) = h.get(Some("bob"), &format!("/requests/{id}")).await;
    assert!(page.contains("you already decided"), "{page}");
    let (status, _) = h.approve("bob", &id).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the same approver twice");
    let (status, page) = h.approve("dave", &id).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("id=\"outcome-status\">ok<"), "{page}");
    assert_eq!(h.ledger.transfers(), 1);
}

#[tokio::test]
async fn sensitive_arguments_are_redacted_on_pages_and_in_the_api() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h
        .propose(
            "rotate_key",
            json!({"partner": "acme-pay", "new_key": "sk_live_S3CRET"}),
            "rotate-key-1",
        )
        .await;
    let (_, _, page) = h.get(Some("bob"), &format!("/requests/{id}")).await;
    assert!(page.contains("acme-pay"));
    assert!(page.contains("[redacted]"));
    let (_, _, api) = h.get(Some("bob"), &format!("/api/requests/{id}")).await;
    let (_, _, list) = h.get(Some("bob"), "/api/requests").await;
    for body in [&page, &api, &list] {
        assert!(!body.contains("sk_live_S3CRET"), "{body}");
    }
    let v: Value = serde_json::from_str(&api).unwrap();
    let key = v["arguments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "new_key")
        .unwrap();
    assert_eq!(key["redacted"], true);
    assert_eq!(key["value"], "[redacted]");
}

#[tokio::test]
async fn hidden_mode_hides_requests_the_reviewer_cannot_decide() {
    let h = harness(Ineligible::Hidden).await;
    let id = h.transfer("rent").await;
    let (_, _, list) = h.get(Some("eve"), "/requests").await;
    assert!(!list.contains(&id));
    let (status, _, _) = h.get(Some("eve"), &format!("/requests/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, _, list) = h.get(Some("bob"), "/requests").await;
    assert!(list.contains(&id));
}

#[tokio::test]
async fn the_json_api_mirrors_the_pages() {
    let h = harness(Ineligible::ReadOnly).await;
    let id = h.transfer("rent").await;
    let (status, _, body) = h.get(Some("bob"), "/api/requests").await;
    assert_eq!(status, StatusCode::OK);
    let v: Value = serde_json::from_str(&body).unwrap();
    let r = &v["requests"][0];
    assert_eq!(r["id"], json!(id));
    assert_eq!(r["amount"], "20,000.00 USD");
    assert_eq!(r["amount_minor"], 2_000_000);
    assert_eq!(r["requester"], "alice");
    assert_eq!(r["eligible"], true);
    assert_eq!(r["approvals_required"], 1);
    assert!(r["expires_in_s"].as_u64().unwrap() > 0);
    let token = h.csrf("bob").await;
    let (status, body) = h
        .post_api(
            "bob",
            &format!("/api/requests/{id}/approve"),
            Some(&token),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"]["status"], "ok");
    assert_eq!(body["request"]["state"], "executed");
    assert_eq!(h.ledger.transfers(), 1);
    let (status, body) = h
        .post_api(
            "bob",
            &format!("/api/requests/{id}/approve"),
            Some(&token),
            json!({"surprise": 1}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn the_console_serves_itself_under_its_mount_path() {
    let h = harness_served(Ineligible::ReadOnly, Served::Own).await;
    let id = h.transfer("rent").await;
    let (status, headers, body) = h.get(Some("bob"), "/requests").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_secure_headers("/requests", &headers);
    assert!(body.contains(&id), "{body}");
    let root = h.url.trim_end_matches("/console");
    let res = h.http.get(format!("{root}/requests")).send().await.unwrap();
    assert_eq!(
        res.status(),
        StatusCode::NOT_FOUND,
        "only the mount path is served"
    );
}

#[tokio::test]
async fn the_detail_shows_where_each_argument_came_from() {
    let h = harness(Ineligible::ReadOnly).await;
    let source =
        h.d.add_source_text(&alice(), "pasted note", "please pay acc-bob-1 today")
            .await
            .unwrap();
    let id = h.transfer("rent").await;
    let (status, _, page) = h.get(Some("bob"), &format!("/requests/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("<th>Came from</th>"), "{page}");
    assert!(
        page.contains(&format!(
            "untrusted (from source {}, content the host added)",
            source.id
        )),
        "{page}"
    );
    assert!(
        page.contains("model (seen in no content of this session)"),
        "{page}"
    );
    // A request proposed in a session that read nothing shows no origins.
    let clean = Principal::new("acme", "alice", "clean-session");
    let args = json!({"from_account": "acc-alice-1", "to_account": "acc-bob-1",
        "amount": 2_000_000, "currency": "USD", "memo": "rent", "idempotency_key": "k-clean-1"});
    let out =
        h.d.dispatch(
            ToolCall::new("k-clean-1", "transfer_funds", args.to_string()),
            &clean,
        )
        .await;
    let clean_id = out.approval.unwrap().approval_id;
    let (_, _, page) = h.get(Some("bob"), &format!("/requests/{clean_id}")).await;
    assert!(!page.contains("Came from"), "{page}");
}

#[tokio::test]
async fn the_detail_says_which_rule_held_the_request_in_the_pipelines_words() {
    let h = harness(Ineligible::ReadOnly).await;
    // Over the threshold: the sentence names both amounts.
    let id = h.transfer("rent").await;
    let request =
        h.d.approvals()
            .get(&bob_approver(), &id)
            .await
            .unwrap()
            .unwrap();
    let sentence = request
        .cause_message
        .clone()
        .expect("the request keeps the hold's sentence");
    assert!(
        sentence.contains("is over the approval threshold of"),
        "{sentence}"
    );
    let (status, _, page) = h.get(Some("bob"), &format!("/requests/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        page.contains(&format!("<span id=\"cause-message\">{sentence}</span>")),
        "{page}"
    );
    assert!(page.contains("<code>approval_over</code>"), "{page}");
    // A critical tool: the fixed sentence of its cause, escaped as text.
    let key = format!("k-{}", uuid::Uuid::new_v4().simple());
    let id = h
        .propose(
            "rotate_key",
            json!({"partner": "partner-1", "new_key": "k"}),
            &key,
        )
        .await;
    let (_, _, page) = h.get(Some("bob"), &format!("/requests/{id}")).await;
    assert!(
        page.contains("every call of this tool needs a human (risk = &quot;critical&quot;)"),
        "{page}"
    );
}
