//! What a client sends to `toolguard mcp-proxy` is read strictly before the SDK parses it, on
//! every transport the gateway serves: over stdio as a pipe (what `subprocess` and
//! `tokio::process` pass), over stdio as a Unix socket (what Node.js's `child_process` passes)
//! and over Streamable HTTP. A message that repeats a key, nests too deep, exceeds the limits
//! or is a batch is answered with a JSON-RPC error naming why, and nothing reaches the
//! upstream; the session goes on, and the next valid call is forwarded.
//!
//! The upstream is the reference file-system server (`@modelcontextprotocol/server-filesystem`
//! from npm, installed by `.ci/run` under `TOOLGUARD_NPM_PREFIX`); its `write_file` shows whether
//! a call reached it.

mod proxy_support;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use proxy_support::{
    Scratch, free_port, http_exchange, http_message, http_session, mcp_post, mcp_post_head,
    npm_server, proxy_command, wait_for_port,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

const AGENT: &str = "agent-token-0123456789abcdef";

fn policy(dir: &Scratch) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    let file = dir.join("policy.toml");
    std::fs::write(
        &file,
        format!(
            r#"[proxy]
store = "audit.sqlite"
derive_idempotency_key = true

[principal]
tenant = "acme"
subject = "agent"
roles = ["agent"]

[[tokens]]
token = "{AGENT}"
tenant = "acme"
subject = "agent"
roles = ["agent"]

[tools.write_file]
risk = "medium"
read_only = false
idempotent = true
roles = ["agent"]
fields."/path" = {{ kind = "path", root = "{data}", max_len = 256 }}
fields."/content" = {{ max_len = 1000 }}
"#,
            data = data.display()
        ),
    )
    .expect("policy");
    file
}

/// A `tools/call` of `write_file` with id `id`, `arguments` as raw JSON text.
fn write_call(id: u64, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"write_file","arguments":{arguments}}}}}"#
    )
}

/// Arguments that nest `depth` arrays deep in `content`.
fn nested(depth: usize) -> String {
    format!(
        r#"{{"path":"deep.txt","content":{}"x"{}}}"#,
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// The malformed calls every transport refuses: (id, line, JSON-RPC code, a word of the
/// message, the file it would have written).
fn malformed() -> Vec<(u64, String, i64, &'static str, &'static str)> {
    vec![
        (
            2,
            write_call(2, r#"{"path":"twice.txt","content":"a","content":"b"}"#),
            -32600,
            "repeats the key",
            "twice.txt",
        ),
        (
            3,
            write_call(3, &nested(200)),
            -32700,
            "nests deeper",
            "deep.txt",
        ),
        (
            4,
            write_call(
                4,
                &format!(
                    r#"{{"path":"many.txt","content":"x","pad":{{{}}}}}"#,
                    (0..70_000)
                        .map(|i| format!("\"k{i}\":0"))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            ),
            -32600,
            "limits",
            "many.txt",
        ),
    ]
}

/// Checks that the valid call (`ok.txt`) was forwarded and answered `ok`.
fn written_ok(answer: &Value, data: &Path) {
    let status = &answer["result"]["_meta"]["toolguard/outcome"]["status"];
    assert_eq!(status, "ok", "{answer}");
    let written = std::fs::read_to_string(data.join("ok.txt")).expect("written");
    assert_eq!(written, "fine");
}

/// One MCP session over a byte stream: lines out, answers in.
struct Session<R, W> {
    lines: tokio::io::Lines<BufReader<R>>,
    write: W,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Session<R, W> {
    async fn send(&mut self, line: &str) {
        self.write
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
        self.write.flush().await.expect("flush");
    }

    /// The answer with `id` (notifications before it skipped).
    async fn answer(&mut self, id: u64) -> Value {
        let wait = async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read")
                    .expect("the proxy answers");
                let message: Value = serde_json::from_str(&line).expect("JSON");
                if message["id"] == json!(id) {
                    return message;
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(20), wait)
            .await
            .unwrap_or_else(|_| panic!("no answer to request {id}"))
    }

    async fn initialize(&mut self) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "strict-test", "version": "1"}}})
            .to_string(),
        )
        .await;
        let init = self.answer(1).await;
        assert!(init.get("result").is_some(), "{init}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
    }

    /// Sends every malformed call and checks its refusal, then a valid call that writes.
    async fn refuses_malformed_and_forwards_the_rest(&mut self, data: &Path) {
        for (id, line, code, word, file) in malformed() {
            self.send(&line).await;
            let answer = self.answer(id).await;
            assert_eq!(answer["error"]["code"], code, "{answer}");
            let message = answer["error"]["message"].as_str().expect("a message");
            assert!(message.contains(word), "{message}");
            assert!(!data.join(file).exists(), "{file} reached the upstream");
        }
        self.send(&write_call(9, r#"{"path":"ok.txt","content":"fine"}"#))
            .await;
        let answer = self.answer(9).await;
        written_ok(&answer, data);
    }
}

fn proxy_over(dir: &Scratch, stdin: Stdio, stdout: Stdio) -> tokio::process::Child {
    proxy_command(&policy(dir))
        .arg("--")
        .arg("node")
        .arg(npm_server("server-filesystem"))
        .arg(dir.join("data"))
        .stdin(stdin)
        .stdout(stdout)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the proxy")
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn stdio_pipes_are_read_strictly() {
    let dir = Scratch::new("tg-strict-pipe");
    let mut proxy = proxy_over(&dir, Stdio::piped(), Stdio::piped());
    let mut session = Session {
        lines: BufReader::new(proxy.stdout.take().expect("stdout")).lines(),
        write: proxy.stdin.take().expect("stdin"),
    };
    session.initialize().await;
    session
        .refuses_malformed_and_forwards_the_rest(&dir.join("data"))
        .await;
    // The end of input ends the session, and the proxy exits.
    drop(session);
    let status = tokio::time::timeout(std::time::Duration::from_secs(20), proxy.wait())
        .await
        .expect("the proxy exits at the end of its input")
        .expect("status");
    assert!(status.success(), "{status}");
}

/// Node.js hosts (`child_process.spawn`) pass their children Unix sockets, not pipes.
#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn stdio_unix_sockets_are_read_strictly() {
    let dir = Scratch::new("tg-strict-socket");
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socket pair");
    let theirs_out = theirs.try_clone().expect("dup");
    let mut proxy = proxy_over(
        &dir,
        Stdio::from(OwnedFd::from(theirs)),
        Stdio::from(OwnedFd::from(theirs_out)),
    );
    ours.set_nonblocking(true).expect("non-blocking");
    let ours = tokio::net::UnixStream::from_std(ours).expect("socket");
    let (read, write) = ours.into_split();
    let mut session = Session {
        lines: BufReader::new(read).lines(),
        write,
    };
    session.initialize().await;
    session
        .refuses_malformed_and_forwards_the_rest(&dir.join("data"))
        .await;
    let _ = proxy.kill().await;
}

/// A POST whose head declares `length` bytes, sent without its body: status and body.
async fn declared_too_long(port: u16, session: &str, length: usize) -> (u16, String) {
    let head = mcp_post_head(port, Some(AGENT), Some(session), length);
    let (status, _, body) = http_exchange(port, head.as_bytes()).await;
    (status, body)
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn streamable_http_bodies_are_read_strictly() {
    let dir = Scratch::new("tg-strict-http");
    let data = dir.join("data");
    let port = free_port();
    let mut proxy = proxy_command(&policy(&dir))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--")
        .arg("node")
        .arg(npm_server("server-filesystem"))
        .arg(&data)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the proxy");
    wait_for_port(port, "the proxy").await;
    let (session, _) = http_session(port, AGENT).await;

    for (id, line, code, word, file) in malformed() {
        let (status, _, body) = mcp_post(port, Some(AGENT), Some(&session), &line).await;
        assert_eq!(status, 400, "{body}");
        let answer = http_message(&body);
        assert_eq!(answer["id"], json!(id), "{answer}");
        assert_eq!(answer["error"]["code"], code, "{answer}");
        let text = answer["error"]["message"].as_str().expect("a message");
        assert!(text.contains(word), "{text}");
        assert!(!data.join(file).exists(), "{file} reached the upstream");
    }
    // A batch (MCP has none since 2025-06-18), and a body over the size limit.
    let batch = format!(
        "[{}]",
        write_call(5, r#"{"path":"batch.txt","content":"x"}"#)
    );
    let (status, _, body) = mcp_post(port, Some(AGENT), Some(&session), &batch).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(http_message(&body)["error"]["code"], -32600, "{body}");
    assert!(!data.join("batch.txt").exists());
    // Refused on its declared length, before the body is read.
    let (status, body) = declared_too_long(port, &session, 5 << 20).await;
    assert_eq!(status, 413, "{body}");
    assert_eq!(http_message(&body)["error"]["code"], -32600, "{body}");

    let (status, _, body) = mcp_post(
        port,
        Some(AGENT),
        Some(&session),
        &write_call(9, r#"{"path":"ok.txt","content":"fine"}"#),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let answer = http_message(&body);
    written_ok(&answer, &data);
    let _ = proxy.kill().await;
}
