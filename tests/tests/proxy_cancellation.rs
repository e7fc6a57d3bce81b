//! Progress and cancellation through `toolguard mcp-proxy`, tied to the request they belong to:
//! the gateway in front of a FastMCP server (`tests/python/slow_server.py`, the Python MCP SDK
//! that `.ci/run` installs) whose slow tool reports progress and logs what reached it.
//!
//! - Progress the upstream reports for the gateway's request reaches the client under the
//!   client's own progress token.
//! - A client's `notifications/cancelled` for its call cancels the upstream's request (the
//!   upstream sees the cancellation, the tool never finishes), and the call still ends in one
//!   terminal audit entry.
//! - A call that is not cancelled runs to its end with the same progress.

mod proxy_support;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use proxy_support::{Scratch, call, connect, proxy_command};
use rmcp::model::{ClientRequest, ProgressNotificationParam, ProgressToken, Request, ServerResult};
use rmcp::service::{NotificationContext, PeerRequestOptions};
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Value, json};
use toolguard::audit::AuditQuery;
use toolguard::sqlite::SqliteAuditSink;

const POLICY: &str = r#"[proxy]
store = "audit.sqlite"

[principal]
tenant = "acme"
subject = "agent"
roles = ["agent"]

[tools.wait]
risk = "low"
read_only = true
"#;

/// Collects the progress notifications the client receives.
#[derive(Clone, Default)]
struct Progress(Arc<Mutex<Vec<ProgressNotificationParam>>>);

impl ClientHandler for Progress {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.lock().unwrap().push(params);
    }
}

impl Progress {
    fn tokens(&self) -> Vec<ProgressToken> {
        let seen = self.0.lock().unwrap();
        seen.iter().map(|p| p.progress_token.clone()).collect()
    }
}

fn server_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/slow_server.py")
}

/// The upstream's log: one JSON object a line.
fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Waits until the upstream logged `event`, at most ten seconds.
async fn logged(log: &Path, event: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if events(log).iter().any(|e| e["event"] == event) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn wait_request(steps: u64) -> ClientRequest {
    ClientRequest::CallToolRequest(Request::new(call("wait", json!({ "steps": steps }), None)))
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_fastmcp),
    ignore = "needs python3 with the MCP SDK (installed by .ci/run)"
)]
async fn progress_and_cancellation_reach_the_request_they_belong_to() {
    let dir = Scratch::new("tg-cancel");
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, POLICY).expect("policy");
    let log = dir.join("upstream.log");
    let mut cmd = proxy_command(&policy);
    cmd.arg("--")
        .arg("python3")
        .arg(server_script())
        .env("SLOW_SERVER_LOG", &log)
        .current_dir(&dir.0);
    let progress = Progress::default();
    let client = connect(cmd, progress.clone()).await;
    let peer = client.peer().clone();

    // A call left to run: progress arrives under the client's token, the tool finishes.
    let handle = peer
        .send_cancellable_request(wait_request(3), PeerRequestOptions::no_options())
        .await
        .expect("send");
    let token = handle.progress_token.clone();
    let answer = handle.await_response().await.expect("the call answers");
    assert!(
        matches!(answer, ServerResult::CallToolResult(_)),
        "{answer:?}"
    );
    assert!(logged(&log, "finished").await, "{:?}", events(&log));
    let seen = progress.tokens();
    assert!(!seen.is_empty(), "no progress reached the client");
    assert!(seen.iter().all(|t| *t == token), "{seen:?} vs {token:?}");
    // The upstream was handed the gateway's own token, not the client's.
    let started = &events(&log)[0];
    assert!(!started["progress_token"].is_null(), "{started}");

    // A call cancelled while it runs: the upstream's request is cancelled, the tool never ends.
    let before = events(&log).len();
    let handle = peer
        .send_cancellable_request(wait_request(100), PeerRequestOptions::no_options())
        .await
        .expect("send");
    let deadline = Instant::now() + Duration::from_secs(10);
    while events(&log).len() == before && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    handle
        .cancel(Some("the user stopped it".to_owned()))
        .await
        .expect("cancel");
    assert!(logged(&log, "cancelled").await, "{:?}", events(&log));
    let after: Vec<Value> = events(&log).split_off(before);
    assert!(
        after.iter().all(|e| e["event"] != "finished"),
        "the cancelled call ran to its end: {after:?}"
    );

    // The session goes on, and both calls end in one terminal audit entry each.
    let again = peer
        .send_cancellable_request(wait_request(1), PeerRequestOptions::no_options())
        .await
        .expect("send")
        .await_response()
        .await
        .expect("the session goes on after a cancellation");
    assert!(matches!(again, ServerResult::CallToolResult(_)));
    client.cancel().await.expect("close");
    let audit = SqliteAuditSink::open(dir.join("audit.sqlite")).expect("open the audit");
    let calls = audit.by_tool("wait", 100).await.expect("query");
    assert_eq!(calls.len(), 3, "{calls:#?}");
}
