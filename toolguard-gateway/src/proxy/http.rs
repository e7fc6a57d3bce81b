//! The proxy served over MCP Streamable HTTP on a loopback address (rmcp's
//! `StreamableHttpService` on hyper, HTTP/1.1). Every request needs `Authorization: Bearer
//! <token>`; a request without a valid token is answered `401` before MCP sees it, and each
//! `tools/call` runs as the principal of its own request's token ([`super::TokenVerifier`], by
//! default the policy file's `[[tokens]]`). `Host` must be a loopback name (DNS rebinding).
//! A POST's body is read strictly before the SDK parses it, as a line over stdio is (at most
//! [`MAX_MESSAGE_BYTES`], the gateway's limits, no repeated key): what fails is answered `400`
//! (`413` over the size) with the JSON-RPC error.
//!
//! ```text
//! toolguard mcp-proxy --policy fs.toml --listen 127.0.0.1:8931 -- npx -y @modelcontextprotocol/server-filesystem /srv/data
//! ```
//! MCP endpoint: `http://127.0.0.1:8931/mcp`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, LengthLimitError, Limited, combinators::BoxBody};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio::net::TcpListener;
use tower_service::Service;

use super::{Guard, GuardedServer, ProxyError};
use crate::server::MAX_MESSAGE_BYTES;
use crate::server::transport::{INVALID_REQUEST, error, read_strict};
use toolguard_pipeline::call::Principal;

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// The session header of Streamable HTTP; it scopes per-session limits of a caller.
const SESSION_HEADER: &str = "mcp-session-id";

type Body = BoxBody<Bytes, Infallible>;

impl Guard {
    /// The principal of an HTTP request's bearer token, its MCP session as the session id.
    pub fn http_principal(&self, parts: &http::request::Parts) -> Option<Principal> {
        let token = bearer(&parts.headers)?;
        let session = parts
            .headers
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("http");
        self.token_principal(token, session)
    }

    /// Serves MCP over Streamable HTTP on `listener` (a loopback address) until it fails, with
    /// the reviewer endpoint and reloads beside it.
    pub async fn serve_http(self: Arc<Self>, listener: TcpListener) -> Result<(), ProxyError> {
        let local = listener
            .local_addr()
            .map_err(|e| ProxyError::Reviewer(e.to_string()))?;
        if !local.ip().is_loopback() {
            return Err(ProxyError::Upstream(format!(
                "--listen {local}: serve on a loopback address only"
            )));
        }
        self.clone().spawn_side_tasks().await?;
        let factory = self.clone();
        let mut config = StreamableHttpServerConfig::default();
        config.json_response = true;
        let mcp = StreamableHttpService::new(
            move || Ok(GuardedServer::new(factory.clone())),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        loop {
            let (stream, _) = listener
                .accept()
                .await
                .map_err(|e| ProxyError::Reviewer(format!("accept: {e}")))?;
            let guard = self.clone();
            let mcp = mcp.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let guard = guard.clone();
                    let mcp = mcp.clone();
                    async move { Ok::<_, Infallible>(handle(&guard, mcp, req).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    }
}

/// Refuses requests off the MCP path or without a valid token; passes the rest to rmcp.
async fn handle(
    guard: &Guard,
    mut mcp: StreamableHttpService<GuardedServer, LocalSessionManager>,
    req: Request<Incoming>,
) -> Response<Body> {
    if req.uri().path() != MCP_PATH {
        return plain(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp");
    }
    let (parts, body) = req.into_parts();
    if guard.http_principal(&parts).is_none() {
        return plain(
            StatusCode::UNAUTHORIZED,
            "send `Authorization: Bearer <token>` with a valid token",
        );
    }
    if parts.method != http::Method::POST {
        return match mcp.call(Request::from_parts(parts, body)).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
    }
    let body = match strict_body(&parts.headers, body).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    match mcp.call(Request::from_parts(parts, Full::new(body))).await {
        Ok(response) => response,
        Err(never) => match never {},
    }
}

/// The body of a POST, read as the stdio transport reads a line ([`read_strict`]): at most
/// [`MAX_MESSAGE_BYTES`] (a longer declared length is refused before the body is read), one
/// JSON-RPC message within the gateway's limits, no repeated key. What fails is answered `400`
/// (`413` over the size) with the JSON-RPC error, and never reaches the SDK.
async fn strict_body(headers: &http::HeaderMap, body: Incoming) -> Result<Bytes, Response<Body>> {
    let too_long = || {
        let message = format!("Invalid Request: the message exceeds {MAX_MESSAGE_BYTES} bytes");
        let reply = error(None, INVALID_REQUEST, &message);
        json_reply(StatusCode::PAYLOAD_TOO_LARGE, &reply)
    };
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_MESSAGE_BYTES as u64) {
        return Err(too_long());
    }
    let bytes = match Limited::new(body, MAX_MESSAGE_BYTES).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) if e.is::<LengthLimitError>() => return Err(too_long()),
        Err(_) => {
            return Err(plain(
                StatusCode::BAD_REQUEST,
                "the request body was cut off",
            ));
        }
    };
    match read_strict(&bytes, "gateway") {
        Ok(_) => Ok(bytes),
        Err(reply) => Err(json_reply(StatusCode::BAD_REQUEST, &reply)),
    }
}

fn json_reply(status: StatusCode, reply: &serde_json::Value) -> Response<Body> {
    let text = reply.to_string();
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
}
