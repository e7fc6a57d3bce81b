//! An upstream reached over MCP Streamable HTTP: rmcp's client on `reqwest` built without a TLS
//! stack, so only `http://` URLs are accepted (an `https://` URL is refused before anything is
//! sent; put the proxy on the upstream's host or network, or a TLS-terminating proxy in between).
//!
//! The bearer token sent to the upstream is read from the environment variable the policy file
//! names in `[proxy] upstream_token_env`; the file never holds the secret.
//!
//! What the upstream sends is read under the same size limit as a line of a stdio upstream
//! ([`MAX_MESSAGE_BYTES`](crate::server::MAX_MESSAGE_BYTES)): a JSON response body and each SSE
//! event (of a response stream or of the standalone stream) are counted as they arrive and
//! refused once they pass it, before anything is parsed; they are never held whole. A refused
//! answer fails the request it answers, with an error naming the limit; the session goes on.

use super::{UpstreamEvents, UpstreamTarget};
use crate::proxy::ProxyError;
use rmcp::RoleClient;
use rmcp::service::RunningService;
use toolguard_policy::{Policy, PolicyError};

/// The bearer token for `target`: the value of `[proxy] upstream_token_env`, which must be set
/// when named, and may only be named for a URL upstream.
pub(super) fn bearer_token(
    target: &UpstreamTarget,
    policy: &Policy,
) -> Result<Option<String>, ProxyError> {
    let Some(var) = &policy.proxy.upstream_token_env else {
        return Ok(None);
    };
    let error = |message: String| PolicyError {
        file: policy.file().to_path_buf(),
        line: policy.key_line("upstream_token_env"),
        message,
    };
    if let UpstreamTarget::Command(_) = target {
        return Err(error(format!(
            "`upstream_token_env = \"{var}\"` applies to an upstream reached with `--upstream-url`; the upstream here is the command {target}: remove the key"
        ))
        .into());
    }
    match std::env::var(var) {
        Ok(token) if !token.is_empty() && !token.chars().any(char::is_control) => Ok(Some(token)),
        Ok(_) => Err(error(format!(
            "the environment variable `{var}` (`upstream_token_env`) is empty or holds control characters: set it to the upstream's bearer token"
        ))
        .into()),
        Err(_) => Err(error(format!(
            "the environment variable `{var}` (`upstream_token_env`) is not set: export the upstream's bearer token in it"
        ))
        .into()),
    }
}

/// Checks that `url` is an `http://` URL with a host.
pub(super) fn check_url(url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL ({e})"))?;
    match parsed.scheme() {
        "http" if parsed.host_str().is_some_and(|h| !h.is_empty()) => Ok(()),
        "http" => Err("the URL names no host".to_owned()),
        "https" => Err(
            "`https://` upstreams are not supported: this build has no TLS stack; reach the upstream over `http://` on its host or private network, or through a TLS-terminating proxy"
                .to_owned(),
        ),
        other => Err(format!(
            "scheme `{other}:` is not supported: give the upstream's Streamable HTTP endpoint, e.g. `http://127.0.0.1:3001/mcp`"
        )),
    }
}

/// Initializes an MCP session with the Streamable HTTP endpoint `url`.
#[cfg(feature = "upstream-http")]
pub(super) async fn connect(
    url: &str,
    token: Option<String>,
    events: UpstreamEvents,
) -> Result<RunningService<RoleClient, UpstreamEvents>, String> {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    check_url(url)?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url)
        .max_json_response_size(crate::server::MAX_MESSAGE_BYTES)
        .max_sse_event_size(crate::server::MAX_MESSAGE_BYTES);
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    events
        .serve(StreamableHttpClientTransport::from_config(config))
        .await
        .map_err(|e| format!("did not initialize an MCP session: {e}"))
}

/// Without the `mcp-proxy-upstream-http` feature: a clear error.
#[cfg(not(feature = "upstream-http"))]
pub(super) async fn connect(
    url: &str,
    _token: Option<String>,
    _events: UpstreamEvents,
) -> Result<RunningService<RoleClient, UpstreamEvents>, String> {
    check_url(url)?;
    Err("an upstream over Streamable HTTP needs the `mcp-proxy-upstream-http` feature (the `toolguard` command: cargo install toolguard-cli --features upstream-http)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn only_plain_http_urls_with_a_host_are_accepted() {
        assert!(check_url("http://127.0.0.1:3001/mcp").is_ok());
        let https = check_url("https://mcp.example.com/mcp").unwrap_err();
        assert!(https.contains("no TLS stack"), "{https}");
        let ws = check_url("ws://127.0.0.1/mcp").unwrap_err();
        assert!(ws.contains("scheme `ws:`"), "{ws}");
        assert!(check_url("127.0.0.1:3001").is_err());
        assert!(check_url("not a url").unwrap_err().starts_with("not a URL"));
    }
}

/// A hostile upstream over a real connection on 127.0.0.1: answers over the size limit, as a
/// JSON body and as an SSE event, fail the call they answer at once; the session goes on.
#[cfg(all(test, feature = "upstream-http"))]
mod limits {
    use std::time::{Duration, Instant};

    use rmcp::model::{CallToolRequestParams, ClientRequest, Request};
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    use tokio::net::{TcpListener, TcpStream};

    use super::super::{Upstream, UpstreamTarget, relay_free};
    use crate::server::MAX_MESSAGE_BYTES;
    use toolguard_policy::Policy;

    /// One request: method, path and JSON body (empty for a body-less request).
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

    /// The answer to `request`: status, content type and body.
    fn answer(request: &Value) -> (&'static str, &'static str, String) {
        let id = request["id"].clone();
        let result = |result: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        let text = |text: String| result(json!({"content": [{"type": "text", "text": text}]}));
        let over = "x".repeat(MAX_MESSAGE_BYTES + 1024);
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
                    "inputSchema": {"type": "object"}
                }]}));
                ("200 OK", "application/json", tools.to_string())
            }
            "tools/call" => match request["params"]["arguments"]["kind"].as_str() {
                Some("json") => ("200 OK", "application/json", text(over).to_string()),
                Some("sse") => {
                    let event = format!("id: 1\ndata: {}\n\n", text(over));
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

    /// Serves one connection: one request, answered, then closed.
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
        // The client may hang up once it has read enough.
        let _ = stream.write_all(body.as_bytes()).await;
        let _ = stream.shutdown().await;
    }

    fn call(kind: &str) -> ClientRequest {
        let mut arguments = serde_json::Map::new();
        arguments.insert("kind".to_owned(), json!(kind));
        let params = CallToolRequestParams::new("answer").with_arguments(arguments);
        ClientRequest::CallToolRequest(Request::new(params))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_over_the_size_limit_fail_their_call_at_once() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("listen");
        let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream));
            }
        });
        let policy = Policy::parse("(test)", "[proxy]\nupstream_timeout_secs = 120\n".into())
            .expect("policy");
        let upstream = Upstream::open(&UpstreamTarget::Url(url), &policy)
            .await
            .expect("the upstream initializes");
        let timeout = Duration::from_secs(120);
        for kind in ["json", "sse"] {
            let started = Instant::now();
            // (Not `expect_err`: an answer let through would be printed whole.)
            let Err(error) = relay_free(upstream.peer(), call(kind), timeout).await else {
                panic!("{kind}: an answer over the limit must be refused");
            };
            // Refused by the limit itself, not by the deadline (120 s).
            assert!(started.elapsed() < Duration::from_secs(60), "{kind}");
            if kind == "json" {
                assert!(
                    error.message.contains("exceeded the maximum size"),
                    "{error:?}"
                );
            }
        }
        let fine = relay_free(upstream.peer(), call("fine"), timeout).await;
        assert!(fine.is_ok(), "the session goes on: {fine:?}");
        upstream.close().await;
    }
}
