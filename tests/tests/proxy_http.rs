//! `toolguard mcp-proxy --listen`: the proxy served over MCP Streamable HTTP on 127.0.0.1 in
//! front of the reference file-system server, each call's principal taken from its request's
//! bearer token. Driven by plain HTTP/1.1 requests carrying MCP JSON-RPC, so that the exact
//! status codes of refused requests (401 before MCP) are visible.

mod proxy_support;

use std::path::Path;
use std::process::Stdio;

use proxy_support::{Scratch, free_port, npm_server, proxy_command, wait_for_port};
use serde_json::{Value, json};

const AGENT: &str = "agent-token-0123456789abcdef";
const REVIEWER: &str = "reviewer-token-0123456789abcdef";

fn policy(data: &Path, reviewer_port: u16) -> String {
    format!(
        r#"[proxy]
store = "audit.sqlite"
reviewer_listen = "127.0.0.1:{reviewer_port}"

[[tokens]]
token = "{AGENT}"
tenant = "acme"
subject = "agent"
roles = ["agent"]

[[tokens]]
token = "{REVIEWER}"
tenant = "acme"
subject = "alice"
roles = ["approver"]

[tools.read_text_file]
risk = "low"
read_only = true
roles = ["agent"]
fields."/path" = {{ kind = "path", root = "{data}", max_len = 256 }}

[tools.write_file]
risk = "medium"
read_only = false
roles = ["agent"]
fields."/path" = {{ kind = "path", root = "{data}", max_len = 256 }}
fields."/content" = {{ max_len = 1000 }}
"#,
        data = data.display()
    )
}

/// One HTTP exchange: status, headers (lowercase names) and body.
async fn post(
    port: u16,
    token: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> (u16, String, String) {
    proxy_support::mcp_post(port, token, session, &body.to_string()).await
}

/// The status of `GET path` on the reviewer endpoint with `token`.
async fn get_status(port: u16, token: &str, path: &str) -> u16 {
    proxy_support::reviewer(port, Some(token), "GET", path, "")
        .await
        .0
}

fn message(body: &str) -> Value {
    proxy_support::http_message(body)
}

/// The model-facing payload of a `tools/call` response.
fn payload(body: &str) -> Value {
    proxy_support::payload_of(&message(body)["result"])
}

fn tool_call(id: u64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}})
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn streamable_http_callers_are_the_principals_of_their_tokens() {
    let dir = Scratch::new("tg-http");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("dirs");
    std::fs::write(data.join("notes.txt"), "over http\n").expect("notes");
    let (port, reviewer_port) = (free_port(), free_port());
    std::fs::write(dir.join("policy.toml"), policy(&data, reviewer_port)).expect("policy");

    let mut child = proxy_command(&dir.join("policy.toml"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--")
        .arg("node")
        .arg(npm_server("server-filesystem"))
        .arg(&dir.0)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the proxy");
    wait_for_port(port, "the proxy").await;

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    // No token, or an unknown one: refused before MCP.
    assert_eq!(post(port, None, None, &init).await.0, 401);
    assert_eq!(
        post(port, Some("not-a-valid-token-000000"), None, &init)
            .await
            .0,
        401
    );

    let (session, initialized) = proxy_support::http_session(port, AGENT).await;
    assert_eq!(initialized["serverInfo"]["name"], "toolguard");

    let (_, _, body) = post(
        port,
        Some(AGENT),
        Some(&session),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    let mut names: Vec<String> = message(&body)["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["read_text_file", "write_file"]);

    let (_, _, body) = post(
        port,
        Some(AGENT),
        Some(&session),
        &tool_call(3, "read_text_file", json!({"path": "notes.txt"})),
    )
    .await;
    let read = payload(&body);
    assert_eq!(read["status"], "ok", "{read}");
    assert!(read["data"].to_string().contains("over http"), "{read}");

    // The same session with the reviewer's token: that principal has no `agent` role.
    let (_, _, body) = post(
        port,
        Some(REVIEWER),
        Some(&session),
        &tool_call(4, "read_text_file", json!({"path": "notes.txt"})),
    )
    .await;
    assert_eq!(payload(&body)["status"], "forbidden", "{body}");

    let (_, _, body) = post(
        port,
        Some(AGENT),
        Some(&session),
        &tool_call(
            5,
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
        ),
    )
    .await;
    let refused = payload(&body);
    assert_eq!(refused["status"], "blocked", "{refused}");
    assert_eq!(refused["reason"], "path_traversal");
    assert!(
        !dir.join("escape.txt").exists(),
        "nothing reached the upstream"
    );

    // The reviewer endpoint lists approvals to approvers only.
    assert_eq!(get_status(reviewer_port, AGENT, "/approvals").await, 403);
    assert_eq!(get_status(reviewer_port, REVIEWER, "/approvals").await, 200);

    let _ = child.kill().await;
}

/// Starts the proxy over Streamable HTTP with `policy` in front of the file-system server and
/// opens an MCP session as the agent: the child and the session id.
async fn start_session(dir: &Scratch, policy: &str, port: u16) -> (tokio::process::Child, String) {
    std::fs::write(dir.join("policy.toml"), policy).expect("policy");
    let child = proxy_command(&dir.join("policy.toml"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--")
        .arg("node")
        .arg(npm_server("server-filesystem"))
        .arg(&dir.0)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the proxy");
    wait_for_port(port, "the proxy").await;
    let (session, _) = proxy_support::http_session(port, AGENT).await;
    (child, session)
}

/// An ordinary MCP client sends no idempotency key in `_meta`. Without
/// `derive_idempotency_key` a write is refused with a message naming the missing key (not an
/// empty `errors` list); with it, a transport retry of the same JSON-RPC request replays (the
/// upstream is not called again), a new request id is a new action, and a rate-limited call
/// says which limit and when to retry.
#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn ordinary_clients_get_derived_keys_and_named_refusals() {
    let dir = Scratch::new("tg-http-keys");
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("dirs");
    let tool = |derive: bool| {
        format!(
            "[proxy]\nstore = \"audit.sqlite\"\nderive_idempotency_key = {derive}\n\n\
             [[tokens]]\ntoken = \"{AGENT}\"\ntenant = \"acme\"\nsubject = \"agent\"\nroles = [\"agent\"]\n\n\
             [tools.write_file]\nrisk = \"medium\"\nread_only = false\nidempotent = true\nroles = [\"agent\"]\n\
             session_rate = {{ calls = 3, window_secs = 60 }}\n\
             fields.\"/path\" = {{ kind = \"path\", root = \"{}\", max_len = 256 }}\n\
             fields.\"/content\" = {{ max_len = 1000 }}\n",
            data.display()
        )
    };
    let write = |id: u64| tool_call(id, "write_file", json!({"path": "a.txt", "content": "one"}));
    let written = data.join("a.txt");

    // Without a derived key: refused, and the model is told what is missing.
    let port = free_port();
    let (mut child, session) = start_session(&dir, &tool(false), port).await;
    let (_, _, body) = post(port, Some(AGENT), Some(&session), &write(10)).await;
    let refused = payload(&body);
    assert_eq!(refused["status"], "invalid_arguments", "{refused}");
    assert_eq!(refused["reason"], "missing_idempotency_key", "{refused}");
    let message = refused["message"].as_str().expect("a message");
    assert!(
        message.contains("idempotency key") && message.contains("_meta"),
        "{message}"
    );
    assert!(
        refused.get("errors").is_none(),
        "no empty errors list: {refused}"
    );
    assert!(!written.exists());
    let _ = child.kill().await;
    let _ = std::fs::remove_file(dir.join("audit.sqlite"));

    // With a derived key.
    let port = free_port();
    let (mut child, session) = start_session(&dir, &tool(true), port).await;
    let (_, _, body) = post(port, Some(AGENT), Some(&session), &write(10)).await;
    assert_eq!(payload(&body)["status"], "ok", "{body}");
    assert!(written.exists());
    std::fs::remove_file(&written).expect("remove");
    // The same request again (a transport retry): replayed, the upstream is not called.
    let (_, _, body) = post(port, Some(AGENT), Some(&session), &write(10)).await;
    assert_eq!(payload(&body)["status"], "ok", "{body}");
    assert!(
        !written.exists(),
        "a retry of the same request does not run again"
    );
    // A new request id is a new action.
    let (_, _, body) = post(port, Some(AGENT), Some(&session), &write(11)).await;
    assert_eq!(payload(&body)["status"], "ok", "{body}");
    assert!(written.exists(), "a new request runs");
    // The session rate (3 per 60 s) is used up: the reason and the retry time are given.
    let (_, _, body) = post(port, Some(AGENT), Some(&session), &write(12)).await;
    let limited = payload(&body);
    assert_eq!(limited["status"], "policy_denied", "{limited}");
    assert_eq!(limited["reason"], "rate_limited", "{limited}");
    assert_eq!(limited["retry_after_ms"], 60_000, "{limited}");
    let detail = limited["detail"].as_str().expect("a detail");
    assert!(detail.contains("retry_after_ms"), "{detail}");
    let _ = child.kill().await;
}
