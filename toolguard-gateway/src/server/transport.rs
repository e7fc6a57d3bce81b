//! The MCP server's transport: newline-delimited JSON-RPC over a byte stream (stdio), read
//! strictly before the SDK sees a message.
//!
//! Each line is checked as text, before it becomes a map:
//!
//! | input | reply (JSON-RPC error, with the request's `id` whenever it can be read, else `null`) |
//! | --- | --- |
//! | not UTF-8, not one JSON document, a lone surrogate escape, a number out of range, nesting over [`MAX_NESTING`] | `-32700` parse error |
//! | an object that repeats a key (at any depth) | `-32600` invalid request |
//! | a batch (an array: MCP has none since 2025-06-18), a line over [`MAX_MESSAGE_BYTES`], a message over [`json::MESSAGE_LIMITS`] (keys, items; checked on the bytes before it is built) | `-32600` invalid request |
//! | a request that is not JSON-RPC 2.0 or does not fit its method, an `id` that is `null` or not a string or an integer | `-32600` invalid request |
//! | any request but `initialize` and `ping` before `initialize` | `-32600` invalid request |
//!
//! The last row follows the MCP lifecycle (specification 2025-11-25): initialization is the
//! first interaction, and a client sends nothing but pings before the server has answered
//! `initialize`. A request sent earlier is refused whatever its `_meta` carries (the SDK would
//! otherwise run a request with inline protocol metadata and start a session without
//! `initialize`); notifications before `initialize` are dropped, since JSON-RPC never answers a
//! notification. An ill-formed notification is dropped for the same reason; a line whose `id`
//! cannot be read is answered with `id: null`, never with silence.

use std::io;
use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

use toolguard_providers::json::{self, JsonError, MAX_NESTING};

/// Longest accepted message line, in bytes.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;
/// JSON-RPC: invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: the JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;

/// How much of an over-long line is kept to find its `id`.
const ID_PREFIX_BYTES: usize = 4096;

/// The next line of `reader`, without its line end; `None` at the end of input or on a read
/// error. A line over `max` bytes is never held whole: it comes back as `Err(prefix)`, its first
/// bytes (where a JSON-RPC `id` usually is), the rest read and dropped.
pub(crate) async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    max: usize,
) -> Option<Result<Vec<u8>, Vec<u8>>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buffer = reader.fill_buf().await.ok()?;
        if buffer.is_empty() {
            if line.is_empty() {
                return None;
            }
            break;
        }
        let (chunk, used, end) = match buffer.iter().position(|b| *b == b'\n') {
            Some(i) => (&buffer[..i], i + 1, true),
            None => (buffer, buffer.len(), false),
        };
        let room = if too_long { ID_PREFIX_BYTES } else { max };
        let take = chunk.len().min(room.saturating_sub(line.len()));
        line.extend_from_slice(&chunk[..take]);
        if take < chunk.len() && !too_long {
            too_long = true;
            line.truncate(ID_PREFIX_BYTES);
        }
        reader.consume(used);
        if end {
            break;
        }
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Some(if too_long { Err(line) } else { Ok(line) })
}

/// A server transport over a reader and a writer (standard input and output for
/// [`McpServer::serve_stdio`](super::McpServer::serve_stdio)) that refuses malformed messages with
/// a JSON-RPC error (see the module documentation) before the SDK parses them.
pub struct GuardedTransport<R, W> {
    reader: BufReader<R>,
    writer: Arc<Mutex<W>>,
    initialized: bool,
}

impl<R, W> std::fmt::Debug for GuardedTransport<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedTransport")
            .field("initialized", &self.initialized)
            .finish_non_exhaustive()
    }
}

impl<R, W> GuardedTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// A transport reading messages from `read` and writing replies to `write`.
    pub fn new(read: R, write: W) -> Self {
        GuardedTransport {
            reader: BufReader::new(read),
            writer: Arc::new(Mutex::new(write)),
            initialized: false,
        }
    }

    /// The next line, without its line end; `None` at the end of input or on a read error.
    /// A line over [`MAX_MESSAGE_BYTES`] comes back as `Err(prefix)`.
    async fn next_line(&mut self) -> Option<Result<Vec<u8>, Vec<u8>>> {
        read_line(&mut self.reader, MAX_MESSAGE_BYTES).await
    }

    /// Checks one line: the message to hand to the SDK, or the error reply to send (`None`:
    /// drop the line without a reply).
    fn check(&mut self, line: &[u8]) -> Result<RxJsonRpcMessage<RoleServer>, Option<Value>> {
        let Strict { value, id, method } = read_strict(line, "server").map_err(Some)?;
        if !self.initialized {
            match (method.as_deref(), &id) {
                (Some("initialize" | "ping"), Some(_)) => {}
                (_, Some(_)) if method.is_some() => {
                    let message = "Invalid Request: the session is not initialized; \
                                   send initialize first";
                    return Err(Some(error(id, INVALID_REQUEST, message)));
                }
                // Notifications and responses before initialize: nothing to answer.
                _ => return Err(None),
            }
        }
        match serde_json::from_value::<RxJsonRpcMessage<RoleServer>>(value) {
            Ok(message) => {
                if method.as_deref() == Some("initialize") {
                    self.initialized = true;
                }
                Ok(message)
            }
            Err(e) if id.is_some() => {
                let message = format!("Invalid Request: {e}");
                Err(Some(error(id, INVALID_REQUEST, &message)))
            }
            Err(_) => Err(None),
        }
    }
}

/// A message read strictly ([`read_strict`]).
pub(crate) struct Strict {
    /// The whole message.
    pub(crate) value: Value,
    /// Its `id` (a string or an integer), if it has one.
    pub(crate) id: Option<Value>,
    /// Its `method`, if it has one.
    pub(crate) method: Option<String>,
}

/// Reads one JSON-RPC message strictly, as text before it becomes a map (see the module
/// documentation): UTF-8, one JSON document within [`json::MESSAGE_LIMITS`] and
/// [`MAX_NESTING`], no repeated key, one object (no batch), an `id` that is a string or an
/// integer. What fails gets the JSON-RPC error reply to send, with the message's `id` whenever
/// it can be read (`null` otherwise). `who` names the reader in the message about limits
/// ("server", "gateway").
pub(crate) fn read_strict(line: &[u8], who: &str) -> Result<Strict, Value> {
    let Ok(text) = std::str::from_utf8(line) else {
        let id = json::jsonrpc_id(&String::from_utf8_lossy(line));
        return Err(error(
            id,
            PARSE_ERROR,
            "Parse error: the message is not UTF-8",
        ));
    };
    let value = match json::parse(text) {
        Ok(value) => value,
        Err(e @ JsonError::DuplicateKey(_)) => {
            let message = format!("Invalid Request: {e}");
            return Err(error(json::jsonrpc_id(text), INVALID_REQUEST, &message));
        }
        Err(JsonError::Exceeded(over)) => {
            let (code, _) = over.describe(&json::MESSAGE_LIMITS);
            let message = format!(
                "Invalid Request: the message exceeds the {who}'s limits ({code}); send less data"
            );
            return Err(error(json::jsonrpc_id(text), INVALID_REQUEST, &message));
        }
        Err(JsonError::TooDeep) => {
            let message =
                format!("Parse error: the message nests deeper than {MAX_NESTING} levels");
            return Err(error(json::jsonrpc_id(text), PARSE_ERROR, &message));
        }
        Err(e) => {
            let message = match e {
                JsonError::Syntax(reason) => format!("Parse error: {reason}"),
                e => format!("Parse error: {e}"),
            };
            return Err(error(json::jsonrpc_id(text), PARSE_ERROR, &message));
        }
    };
    let Some(object) = value.as_object() else {
        let message = "Invalid Request: send one JSON-RPC object per message (no batches)";
        return Err(error(None, INVALID_REQUEST, message));
    };
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
        .cloned();
    if id.is_none() && object.contains_key("id") {
        // An id that is null or not a string or an integer: an invalid request (MCP ids
        // are never null), answered with id null as JSON-RPC prescribes.
        let message = "Invalid Request: id must be a string or an integer";
        return Err(error(None, INVALID_REQUEST, message));
    }
    let method = object
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Strict { value, id, method })
}

/// A JSON-RPC error response.
pub(crate) fn error(id: Option<Value>, code: i64, message: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id.unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    })
}

pub(crate) async fn write_line<W: AsyncWrite + Unpin, T: serde::Serialize>(
    writer: &Mutex<W>,
    message: &T,
) -> io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(io::Error::other)?;
    line.push(b'\n');
    let mut writer = writer.lock().await;
    writer.write_all(&line).await?;
    writer.flush().await
}

impl<R, W> Transport<RoleServer> for GuardedTransport<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let writer = self.writer.clone();
        async move { write_line(&writer, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let reply = match self.next_line().await? {
                Ok(line) if line.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(line) => match self.check(&line) {
                    Ok(message) => return Some(message),
                    Err(reply) => reply,
                },
                Err(prefix) => {
                    let id = json::jsonrpc_id(&String::from_utf8_lossy(&prefix));
                    let message =
                        format!("Invalid Request: the message exceeds {MAX_MESSAGE_BYTES} bytes");
                    Some(error(id, INVALID_REQUEST, &message))
                }
            };
            if let Some(reply) = reply {
                let writer = self.writer.clone();
                if let Err(e) = write_line(&writer, &reply).await {
                    tracing::warn!(error = %e, "could not send an MCP error reply");
                    return None;
                }
            } else {
                tracing::debug!("dropped an MCP message that has no id to answer");
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.writer.lock().await.shutdown().await
    }
}
