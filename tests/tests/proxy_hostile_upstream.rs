//! What `toolguard mcp-proxy` reads from its upstream meets the same limits as what its clients
//! send: an answer over the message limits (70 000 keys, a repeated key, a 5 MiB line) fails the
//! call it answers at once (`failed`; the gateway's log names the limit) instead of being built
//! or passed on; the session goes on. The upstream is `tests/python/hostile_server.py`, which answers by hand.
//!
//! An upstream over Streamable HTTP (`--upstream-url`, feature `mcp-proxy-upstream-http`) is
//! read under the same size limit: a JSON body or an SSE event over it fails its call at once and
//! is never held whole. That upstream is a hand-written HTTP/1.1 server on 127.0.0.1 in this file.

mod proxy_support;

use std::path::Path;
use std::time::{Duration, Instant};

use proxy_support::{Scratch, call, connect, payload, proxy_command};
use serde_json::json;

const POLICY: &str = r#"[proxy]
store = "audit.sqlite"
upstream_timeout_secs = 120

[principal]
tenant = "acme"
subject = "agent"
roles = ["agent"]

[tools.answer]
risk = "low"
read_only = true
"#;

#[tokio::test]
#[cfg_attr(
    not(toolguard_fastmcp),
    ignore = "needs python3 (installed by .ci/run)"
)]
async fn answers_over_the_limits_fail_their_call_at_once() {
    let dir = Scratch::new("tg-hostile-upstream");
    std::fs::write(dir.join("policy.toml"), POLICY).expect("policy");
    let mut cmd = proxy_command(&dir.join("policy.toml"));
    cmd.arg("--")
        .arg("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python/hostile_server.py"));
    let client = connect(cmd, ()).await;
    refused_then_fine(client, &["wide", "duplicate", "long"]).await;
}

/// An upstream tool whose input schema multiplies its branches (20^16 checks of one value)
/// would let one call run for ever: the gateway refuses to start when the policy exposes it,
/// naming the policy line, the tool and the schema position; hidden, it changes nothing (the
/// test above serves the same upstream).
#[tokio::test]
#[cfg_attr(
    not(toolguard_fastmcp),
    ignore = "needs python3 (installed by .ci/run)"
)]
async fn an_upstream_schema_whose_branches_multiply_is_refused_at_start() {
    let dir = Scratch::new("tg-hostile-schema");
    let policy = format!("{POLICY}\n[tools.nested]\nrisk = \"low\"\nread_only = true\n");
    std::fs::write(dir.join("policy.toml"), &policy).expect("policy");
    let line = policy
        .lines()
        .position(|l| l == "[tools.nested]")
        .expect("the table")
        + 1;
    let mut cmd = proxy_command(&dir.join("policy.toml"));
    cmd.arg("--")
        .arg("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python/hostile_server.py"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("the gateway stops at once")
        .expect("the gateway runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    for part in [
        format!("policy.toml:{line}"),
        "tool `nested`".to_owned(),
        "`/properties/xs`".to_owned(),
        "flatten the schema".to_owned(),
    ] {
        assert!(stderr.contains(&part), "{part}: {stderr}");
    }
}

/// Each answer `kinds` names fails its call at once (by the refusal, not the upstream's 120 s
/// deadline); then a fine answer passes: the session goes on.
async fn refused_then_fine(
    client: rmcp::service::RunningService<rmcp::RoleClient, ()>,
    kinds: &[&str],
) {
    for kind in kinds {
        let started = Instant::now();
        let result = client
            .call_tool(call("answer", json!({ "kind": kind }), None))
            .await
            .expect("a failed call is a tool result");
        // (The answer is printed only once it is known to be a refusal: one let through could
        // be 4 MiB.)
        assert_eq!(
            result.is_error,
            Some(true),
            "{kind}: an answer over the limit passed"
        );
        let answer = payload(&result);
        assert_eq!(answer["status"], "failed", "{kind}: {answer}");
        assert!(started.elapsed() < Duration::from_secs(60), "{kind}");
    }
    let fine = client
        .call_tool(call("answer", json!({ "kind": "fine" }), None))
        .await
        .expect("the session goes on");
    assert_ne!(fine.is_error, Some(true), "{fine:?}");
    client.cancel().await.ok();
}

/// The hostile Streamable HTTP upstream: one request a connection, answered and closed.
#[cfg(feature = "mcp-proxy-upstream-http")]
mod hostile_http {
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::{TcpListener, TcpStream};

    /// Over the gateway's message limit (4 MiB).
    const OVER: usize = (4 << 20) + 1024;

    /// Listens on 127.0.0.1 and serves until the test ends; the upstream's URL.
    pub async fn start() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("listen");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream));
            }
        });
        url
    }

    async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<(String, Value)> {
        let mut head = String::new();
        stream.read_line(&mut head).await.ok()?;
        let method = head.split(' ').next()?.to_owned();
        let mut length = 0;
        loop {
            let mut line = String::new();
            stream.read_line(&mut line).await.ok()?;
            if line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().ok()?;
            }
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await.ok()?;
        Some((method, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }

    fn answer(request: &Value) -> (&'static str, &'static str, String) {
        let id = request["id"].clone();
        let result = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        let text = |text: String| result(json!({"content": [{"type": "text", "text": text}]}));
        match request["method"].as_str().unwrap_or_default() {
            "initialize" => {
                let init = result(json!({
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"}
                }));
                ("200 OK", "application/json", init.to_string())
            }
            "tools/list" => {
                let tools = result(json!({"tools": [{
                    "name": "answer",
                    "description": "Answers as the argument `kind` says.",
                    "inputSchema": {"type": "object", "properties": {"kind": {"type": "string"}}}
                }]}));
                ("200 OK", "application/json", tools.to_string())
            }
            "tools/call" => match request["params"]["arguments"]["kind"].as_str() {
                Some("json") => {
                    let body = text("x".repeat(OVER)).to_string();
                    ("200 OK", "application/json", body)
                }
                Some("sse") => {
                    let event = format!("id: 1\ndata: {}\n\n", text("x".repeat(OVER)));
                    ("200 OK", "text/event-stream", event)
                }
                _ => (
                    "200 OK",
                    "application/json",
                    text("fine".into()).to_string(),
                ),
            },
            _ if request.get("id").is_none() => ("202 Accepted", "text/plain", String::new()),
            _ => ("200 OK", "application/json", result(json!({})).to_string()),
        }
    }

    async fn serve(stream: TcpStream) {
        let mut stream = BufReader::new(stream);
        let Some((method, request)) = read_request(&mut stream).await else {
            return;
        };
        let (status, kind, body) = match method.as_str() {
            "POST" => answer(&request),
            "DELETE" => ("200 OK", "text/plain", String::new()),
            _ => ("405 Method Not Allowed", "text/plain", String::new()),
        };
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\nmcp-session-id: hostile-1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        let stream = stream.get_mut();
        let _ = stream.write_all(head.as_bytes()).await;
        // The proxy may hang up once it read up to its limit.
        let _ = stream.write_all(body.as_bytes()).await;
        let _ = stream.shutdown().await;
    }
}

#[cfg(feature = "mcp-proxy-upstream-http")]
#[tokio::test]
async fn http_answers_over_the_size_limit_fail_their_call_at_once() {
    let url = hostile_http::start().await;
    let dir = Scratch::new("tg-hostile-http-upstream");
    std::fs::write(dir.join("policy.toml"), POLICY).expect("policy");
    let mut cmd = proxy_command(&dir.join("policy.toml"));
    cmd.arg("--upstream-url").arg(&url);
    let client = connect(cmd, ()).await;
    refused_then_fine(client, &["json", "sse"]).await;
}
