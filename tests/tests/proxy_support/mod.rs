//! Shared setup of the `toolguard mcp-proxy` tests: the `toolguard` binary, the reference MCP
//! servers from npm (installed by `.ci/run` under `TOOLGUARD_NPM_PREFIX`), scratch directories,
//! free ports, the reviewer endpoint, and `tools/call` helpers for rmcp's client.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult, RequestMetaObject};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// The `toolguard` binary of the `toolguard-cli` package, (re)built with the features the
/// README's test command uses (an example target brings in the dev-dependencies, so the features
/// match `cargo test` and nothing is rebuilt after it).
pub fn proxy_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile dir");
    let mut build = std::process::Command::new(env!("CARGO"));
    build
        .args(["build", "--quiet", "--workspace", "--all-features"])
        .args(["--bin", "toolguard", "--example", "mcp_server"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    assert!(
        build.status().expect("cargo runs").success(),
        "building toolguard failed"
    );
    profile_dir.join(format!("toolguard{}", std::env::consts::EXE_SUFFIX))
}

/// The entry point of the reference server `@modelcontextprotocol/<package>` under
/// `TOOLGUARD_NPM_PREFIX`.
pub fn npm_server(package: &str) -> PathBuf {
    let prefix = std::env::var("TOOLGUARD_NPM_PREFIX")
        .expect("TOOLGUARD_NPM_PREFIX names the npm prefix `.ci/run` installs the servers into");
    let entry = Path::new(&prefix)
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        entry.exists(),
        "{} is missing: run `.ci/run` (it installs the reference servers)",
        entry.display()
    );
    entry
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Waits until something listens on `port` (at most 30 s).
pub async fn wait_for_port(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A scratch directory under the system's temporary directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A new empty directory named after `prefix`.
    pub fn new(prefix: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    /// A path inside.
    pub fn join(&self, path: impl AsRef<Path>) -> PathBuf {
        self.0.join(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Host keys of the proxies the tests start, in the environment variable the proxy reads when
/// the policy file names none (a fixed test key: never a real one).
pub const TEST_HOST_KEYS: &str =
    "test-k1:0101010101010101010101010101010101010101010101010101010101010101";

/// The `mcp-proxy` command line up to `--` (the upstream follows), with the test host keys in
/// `TOOLGUARD_HOST_KEYS`.
pub fn proxy_command(policy: &Path) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(proxy_binary());
    cmd.arg("mcp-proxy").arg("--policy").arg(policy);
    cmd.env("TOOLGUARD_HOST_KEYS", TEST_HOST_KEYS);
    cmd
}

/// Starts `cmd` (a `toolguard mcp-proxy` on stdio) and initializes rmcp's client `handler` with
/// it.
pub async fn connect<H: rmcp::ClientHandler>(
    cmd: tokio::process::Command,
    handler: H,
) -> RunningService<RoleClient, H> {
    let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("spawn the proxy");
    handler
        .serve(transport)
        .await
        .expect("MCP initialization through the proxy")
}

/// One HTTP/1.1 exchange on a new connection to 127.0.0.1:`port`: `request` (head and body)
/// sent as it is, then everything the server answers until it closes: status, head (lowercase)
/// and body.
pub async fn http_exchange(port: u16, request: &[u8]) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect");
    stream.write_all(request).await.expect("write the request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.expect("read");
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, head.to_ascii_lowercase(), body.to_owned())
}

/// The head of a POST to the proxy's MCP endpoint on `port` declaring `length` bytes of body,
/// with the bearer `token` and the MCP `session` (and its protocol version) when given.
pub fn mcp_post_head(
    port: u16,
    token: Option<&str>,
    session: Option<&str>,
    length: usize,
) -> String {
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {length}\r\n"
    );
    if let Some(t) = token {
        head.push_str(&format!("authorization: Bearer {t}\r\n"));
    }
    if let Some(s) = session {
        head.push_str(&format!(
            "mcp-session-id: {s}\r\nmcp-protocol-version: 2025-06-18\r\n"
        ));
    }
    head.push_str("\r\n");
    head
}

/// One POST of `body` to the proxy's MCP endpoint ([`mcp_post_head`]): status, head and body.
pub async fn mcp_post(
    port: u16,
    token: Option<&str>,
    session: Option<&str>,
    body: &str,
) -> (u16, String, String) {
    let request = mcp_post_head(port, token, session, body.len()) + body;
    http_exchange(port, request.as_bytes()).await
}

/// The JSON-RPC message of an HTTP response body (JSON, or the `data:` of an SSE event;
/// chunked framing is skipped by looking for the JSON object).
pub fn http_message(body: &str) -> Value {
    let start = body.find('{').expect("a JSON object in the body");
    let end = body.rfind('}').expect("end of the JSON object");
    serde_json::from_str(&body[start..=end]).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Opens an MCP session with the proxy served over Streamable HTTP on `port` as the holder of
/// `token` (`initialize`, then `notifications/initialized`): the session id and the
/// `initialize` result.
pub async fn http_session(port: u16, token: &str) -> (String, Value) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}}});
    let (status, head, body) = mcp_post(port, Some(token), None, &init.to_string()).await;
    assert_eq!(status, 200, "{head}\n{body}");
    let session = head
        .lines()
        .find_map(|l| l.strip_prefix("mcp-session-id: "))
        .expect("a session id")
        .trim()
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) =
        mcp_post(port, Some(token), Some(&session), &initialized.to_string()).await;
    assert!(status == 202 || status == 200, "{status}");
    (session, http_message(&body)["result"].clone())
}

/// One request to the reviewer endpoint on `port`: status and JSON body (`Value::Null` when the
/// body is not JSON).
pub async fn reviewer(
    port: u16,
    token: Option<&str>,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, Value) {
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: localhost\r\n{auth}content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = http_exchange(port, request.as_bytes()).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// `tools/call` parameters, with the host's idempotency key in `_meta` when given.
pub fn call(name: &str, args: Value, key: Option<&str>) -> CallToolRequestParams {
    let map: Map<String, Value> = args.as_object().cloned().expect("object arguments");
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(map);
    if let Some(key) = key {
        let mut meta = RequestMetaObject::default();
        meta.0
            .0
            .insert("toolguard/idempotencyKey".to_owned(), json!(key));
        params.meta = Some(meta);
    }
    params
}

/// The outcome of a result as JSON: `{"status": "ok", "data": ...}` for a forwarded result
/// (its outcome in `_meta["toolguard/outcome"]`; `data` its `structuredContent`, else its
/// content), the pipeline's explanation (the first text block) for a refusal.
pub fn payload(result: &CallToolResult) -> Value {
    let value = serde_json::to_value(result).expect("serializable");
    payload_of(&value)
}

/// [`payload`] of a result in JSON.
pub fn payload_of(result: &Value) -> Value {
    let outcome = &result["_meta"]["toolguard/outcome"];
    if outcome["status"] == "ok" {
        let data = match result.get("structuredContent") {
            Some(s) => s.clone(),
            None => json!({"content": result["content"]}),
        };
        return json!({"status": "ok", "data": data, "replayed": outcome["replayed"]});
    }
    let text = result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text block: {result}"));
    serde_json::from_str(text).expect("JSON text")
}

/// Calls a tool through the proxy and returns the model-facing JSON.
pub async fn send<H: rmcp::ClientHandler>(
    client: &RunningService<RoleClient, H>,
    params: CallToolRequestParams,
) -> Value {
    payload(&client.call_tool(params).await.expect("tools/call answers"))
}

/// The reference "everything" server in its Streamable HTTP mode on a free port, with a count of
/// the MCP requests it received (it logs one line per POST on standard output).
pub struct Everything {
    /// Its MCP endpoint.
    pub url: String,
    posts: Arc<AtomicUsize>,
    _child: tokio::process::Child,
}

impl Everything {
    /// Starts the server and waits until it listens.
    pub async fn start() -> Everything {
        let port = free_port();
        let mut child = tokio::process::Command::new("node")
            .arg(npm_server("server-everything"))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start the everything server");
        let posts = Arc::new(AtomicUsize::new(0));
        let stdout = child.stdout.take().expect("stdout");
        let counter = posts.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if line.contains("Received MCP POST request") {
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        wait_for_port(port, "the everything server").await;
        Everything {
            url: format!("http://127.0.0.1:{port}/mcp"),
            posts,
            _child: child,
        }
    }

    /// Stops the server (it is also stopped when dropped).
    pub async fn stop(&mut self) {
        let _ = self._child.kill().await;
    }

    /// MCP requests (POSTs) the server has received so far.
    pub fn posts(&self) -> usize {
        self.posts.load(Ordering::SeqCst)
    }

    /// Waits until the server has received `n` POSTs, then a moment longer, and returns the
    /// count (which a request that should not have reached it would push past `n`).
    pub async fn settle_at(&self, n: usize) -> usize {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.posts() < n && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.posts()
    }
}

/// A client that counts `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub struct ListChanges(Arc<AtomicUsize>);

impl rmcp::ClientHandler for ListChanges {
    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl ListChanges {
    /// Notifications received so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }

    /// Waits (at most 20 s) until `n` notifications arrived.
    pub async fn reach(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.count() < n {
            assert!(
                Instant::now() < deadline,
                "no notifications/tools/list_changed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An MCP host for tests: answers sampling and elicitation requests (counting them) and records
/// progress and log notifications.
#[derive(Clone, Default)]
pub struct Host {
    /// `sampling/createMessage` requests answered.
    pub sampled: Arc<AtomicUsize>,
    /// `elicitation/create` requests answered.
    pub elicited: Arc<AtomicUsize>,
    /// Progress notifications: (token, progress).
    pub progress: Arc<std::sync::Mutex<Vec<(Value, f64)>>>,
    /// Log messages' data.
    pub logs: Arc<std::sync::Mutex<Vec<Value>>>,
}

#[allow(deprecated)]
impl rmcp::ClientHandler for Host {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let capabilities = serde_json::from_value(
            json!({"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": true}}),
        )
        .expect("capabilities");
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("toolguard-test-host", "1.0.0"),
        )
    }

    async fn create_message(
        &self,
        _params: rmcp::model::CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::CreateMessageResult, rmcp::ErrorData> {
        self.sampled.fetch_add(1, Ordering::SeqCst);
        Ok(serde_json::from_value(json!({
            "role": "assistant",
            "content": {"type": "text", "text": "sampled by the test host"},
            "model": "test-model",
            "stopReason": "endTurn"
        }))
        .expect("a sampling result"))
    }

    async fn create_elicitation(
        &self,
        _params: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        self.elicited.fetch_add(1, Ordering::SeqCst);
        Ok(serde_json::from_value(json!({
            "action": "accept",
            "content": {"username": "ada", "email": "ada@example.com"}
        }))
        .expect("an elicitation result"))
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        let token = serde_json::to_value(&params.progress_token).unwrap_or(Value::Null);
        self.progress
            .lock()
            .expect("lock")
            .push((token, params.progress));
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.logs.lock().expect("lock").push(params.data);
    }
}

/// A result as JSON without the gateway's `_meta["toolguard/outcome"]` (what the upstream sent).
pub fn upstream_part(result: &CallToolResult) -> Value {
    let mut value = serde_json::to_value(result).expect("serializable");
    if let Some(meta) = value.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove("toolguard/outcome");
        if meta.is_empty() {
            value.as_object_mut().expect("object").remove("_meta");
        }
    }
    value
}
