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

/// Reads JSON-RPC lines from the proxy until the answer to request `id`; the notifications
/// before it, by method.
async fn until_answer(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    id: u64,
) -> (Value, Vec<Value>) {
    let mut notes = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the proxy answers within 30 s")
            .expect("read the proxy's output")
            .expect("the proxy's output ends before its answer");
        let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
        if message["id"] == id && message.get("method").is_none() {
            return (message, notes);
        }
        if message.get("id").is_none() {
            notes.push(message);
        }
    }
}

/// On the wire, in order: every progress notification and log message the upstream sends
/// before its result reaches the client before the result, none dropped (the gateway's MCP SDK
/// hands each notification to a task of its own; the gateway passes an answer on only after
/// the notifications that came before it).
#[tokio::test]
#[cfg_attr(
    not(toolguard_fastmcp),
    ignore = "needs python3 with the MCP SDK (installed by .ci/run)"
)]
async fn notifications_reach_the_client_before_the_result_they_precede() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

    let dir = Scratch::new("tg-burst");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        format!("{POLICY}\n[tools.burst]\nrisk = \"low\"\nread_only = true\n"),
    )
    .expect("policy");
    let mut cmd = proxy_command(&policy);
    cmd.arg("--")
        .arg("python3")
        .arg(server_script())
        .env("SLOW_SERVER_LOG", dir.join("upstream.log"))
        .current_dir(&dir.0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut proxy = cmd.spawn().expect("spawn the proxy");
    let mut stdin = proxy.stdin.take().expect("stdin");
    let mut lines = tokio::io::BufReader::new(proxy.stdout.take().expect("stdout")).lines();
    let mut send = async |message: Value| {
        let mut line = message.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.expect("write");
        stdin.flush().await.expect("flush");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "wire-test", "version": "1"}}}),
    )
    .await;
    let (init, _) = until_answer(&mut lines, 0).await;
    assert!(init.get("result").is_some(), "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    for (id, count) in [(1u64, 40u64), (2, 80)] {
        send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "burst", "arguments": {"count": count},
            "_meta": {"progressToken": format!("tok-{id}")}}}),
        )
        .await;
        let (answer, notes) = until_answer(&mut lines, id).await;
        assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
        let progress: Vec<&Value> = notes
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .collect();
        let logs = notes
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .count();
        assert_eq!(progress.len() as u64, count, "{notes:?}");
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["progressToken"] == format!("tok-{id}")),
            "{progress:?}"
        );
        assert_eq!(logs as u64, count, "{notes:?}");
    }
}
