//! The reviewer endpoint: a small HTTP/1.1 JSON API on a loopback address through which people
//! decide the approvals the proxy's calls wait for. Every request carries
//! `Authorization: Bearer <token>`, a token of the policy file's `[[tokens]]`; the token's
//! principal is the viewer or approver (it must hold an approver role, and can never approve its
//! own request). Decisions run the dispatcher's approval workflow of the policy in force.
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /policy` | `{"revision": N}` |
//! | `GET /approvals` | pending requests of the caller's tenant: `[{"id", "tool", "preview", "requester", "cause", "cause_message", "amount", "expires_at_ms", "eligible_roles", "policy_revision"}]` |
//! | `POST /approvals/{id}/approve` | the call's outcome after the decision (`ok` once executed) |
//! | `POST /approvals/{id}/reject` with `{"reason": "..."}` | the outcome (`approval_rejected`) |
//! | `GET /upstream-requests` | the upstream's sampling and elicitation requests held by `action = "approval"`: `[{"id", "kind", "request"}]` |
//! | `POST /upstream-requests/{id}/approve` or `/reject` | `{"decided": true}` (the request is passed on to the client, or refused) |
//!
//! Errors: `401` without a known token, `403` when its principal holds no approver role, `404` for an unknown path or request, `400` for a bad
//! request, `413` for a request over 16 KiB; bodies are `{"error": "..."}`.
//!
//! ```text
//! curl -s -H "Authorization: Bearer $TOKEN" http://127.0.0.1:7411/approvals
//! curl -s -X POST -H "Authorization: Bearer $TOKEN" http://127.0.0.1:7411/approvals/$ID/approve
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Guard;
use toolguard_pipeline::call::Principal;

/// Largest request (head and body) accepted.
const MAX_REQUEST: usize = 16 * 1024;
/// Time a client has to send its request.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections until the listener fails.
pub async fn serve(listener: TcpListener, guard: Arc<Guard>) {
    while let Ok((stream, _)) = listener.accept().await {
        let guard = guard.clone();
        tokio::spawn(async move {
            let _ = connection(stream, guard).await;
        });
    }
}

struct Request {
    method: String,
    path: String,
    token: Option<String>,
    body: Vec<u8>,
}

async fn connection(mut stream: TcpStream, guard: Arc<Guard>) -> std::io::Result<()> {
    let (status, body) = match tokio::time::timeout(READ_TIMEOUT, read_request(&mut stream)).await {
        Ok(Ok(request)) => route(&guard, request).await,
        Ok(Err(status)) => (status, json!({"error": "bad request"})),
        Err(_) => (408, json!({"error": "request timeout"})),
    };
    let body = body.to_string();
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// Reads one request; `Err(status)` when it is malformed or too large.
async fn read_request(stream: &mut TcpStream) -> Result<Request, u16> {
    let mut buf = Vec::with_capacity(1024);
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_REQUEST {
            return Err(413);
        }
        let mut chunk = [0u8; 2048];
        let n = stream.read(&mut chunk).await.map_err(|_| 400u16)?;
        if n == 0 {
            return Err(400);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| 400u16)?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or("").split(' ');
    let (method, path) = (
        first.next().unwrap_or("").to_owned(),
        first.next().unwrap_or("").to_owned(),
    );
    let mut length = 0usize;
    let mut token = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(400);
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().map_err(|_| 400u16)?,
            "authorization" => token = value.strip_prefix("Bearer ").map(str::to_owned),
            _ => {}
        }
    }
    if head_end + 4 + length > MAX_REQUEST {
        return Err(413);
    }
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut chunk = [0u8; 2048];
        let n = stream.read(&mut chunk).await.map_err(|_| 400u16)?;
        if n == 0 {
            return Err(400);
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Ok(Request {
        method,
        path,
        token,
        body,
    })
}

async fn route(guard: &Guard, request: Request) -> (u16, Value) {
    let current = guard.current();
    let session = "reviewer";
    let Some(viewer) = request
        .token
        .as_deref()
        .and_then(|t| current.policy.token_principal(t, session))
    else {
        return (
            401,
            json!({"error": "send `Authorization: Bearer <token>` with a token of the policy file's [[tokens]]"}),
        );
    };
    let segments: Vec<&str> = request.path.trim_matches('/').split('/').collect();
    let reviewer = current
        .policy
        .approver_roles()
        .iter()
        .any(|r| viewer.has_role(r));
    match (request.method.as_str(), segments.as_slice()) {
        ("GET", ["policy"]) => (200, json!({"revision": current.policy.revision()})),
        (_, ["approvals" | "upstream-requests", ..]) if !reviewer => (
            403,
            json!({"error": "the token's principal holds no approver role"}),
        ),
        ("GET", ["approvals"]) => pending(&current.dispatcher, &viewer).await,
        ("POST", ["approvals", id, verb @ ("approve" | "reject")]) => {
            let approvals = current.dispatcher.approvals();
            let outcome = if *verb == "approve" {
                approvals.approve(&viewer, id).await
            } else {
                let reason = serde_json::from_slice::<Value>(&request.body)
                    .ok()
                    .and_then(|v| v.get("reason").and_then(Value::as_str).map(str::to_owned))
                    .unwrap_or_else(|| "rejected by reviewer".to_owned());
                approvals.reject(&viewer, id, &reason).await
            };
            (200, serde_json::to_value(&outcome).unwrap_or(Value::Null))
        }
        ("GET", ["upstream-requests"]) => (200, guard.upstream().relay().held()),
        ("POST", ["upstream-requests", id, verb @ ("approve" | "reject")]) => {
            if guard.upstream().relay().decide(id, *verb == "approve") {
                (200, json!({"decided": true}))
            } else {
                (404, json!({"error": "no such upstream request is waiting"}))
            }
        }
        _ => (
            404,
            json!({"error": "unknown path: GET /policy, GET /approvals, POST /approvals/{id}/approve|reject, GET /upstream-requests, POST /upstream-requests/{id}/approve|reject"}),
        ),
    }
}

async fn pending(
    dispatcher: &toolguard_pipeline::Dispatcher<()>,
    viewer: &Principal,
) -> (u16, Value) {
    match dispatcher.approvals().pending(viewer).await {
        Ok(list) => (
            200,
            Value::Array(
                list.iter()
                    .map(|r| {
                        json!({
                            "id": r.id,
                            "tool": r.tool,
                            "preview": r.preview,
                            "requester": r.requester.subject,
                            "cause": r.cause,
                            "cause_message": r.cause_message,
                            "amount": r.amount,
                            "expires_at_ms": r.expires_at_ms,
                            "eligible_roles": r.eligible_roles,
                            "policy_revision": r.policy_revision,
                        })
                    })
                    .collect(),
            ),
        ),
        Err(e) => (
            503,
            json!({"error": format!("approval store unavailable: {e}")}),
        ),
    }
}
