//! The upstream's standard input and output as an MCP transport, read with the same limits as
//! what the gateway's clients send: a message line over
//! [`MAX_MESSAGE_BYTES`](crate::server::MAX_MESSAGE_BYTES), over
//! [`json::MESSAGE_LIMITS`] (keys, items, string length; measured on the bytes before anything
//! is built), nesting too deep, repeating a key or not parsing never becomes a message.
//!
//! What happens to a refused line:
//!
//! | the line | what the gateway does |
//! | --- | --- |
//! | an answer to one of the gateway's requests (an `id`, no `method`) | that request fails at once: the SDK receives an error response for its id naming the limit (`-32603`) |
//! | a request of the upstream (an `id` and a `method`) | the upstream is answered with a JSON-RPC error (`-32600`/`-32700`) |
//! | a notification, or a line whose `id` cannot be read | dropped, with a warning |
//!
//! The `result` of an answer to a forwarded `tools/call` is kept as JSON for the forwarder
//! ([`CallResults`]); the SDK gets the answer with an empty result in its place.
//!
//! The child is killed when the transport is dropped.

use std::io;
use std::process::Stdio;
use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, JsonRpcResponse, JsonRpcVersion2_0, RequestId, ServerResult};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Mutex;

use super::super::call_results::CallResults;
use super::super::relay::Relay;
use crate::server::MAX_MESSAGE_BYTES;
use crate::server::transport::{INVALID_REQUEST, PARSE_ERROR, error, read_line, write_line};
use toolguard_providers::json::{self, JsonError};

/// JSON-RPC: internal error (what a request whose answer was refused fails with).
const INTERNAL_ERROR: i64 = -32603;

/// A client transport over a child process's standard input and output.
pub(super) struct ChildStdio {
    reader: BufReader<ChildStdout>,
    writer: Arc<Mutex<ChildStdin>>,
    relay: Arc<Relay>,
    _child: Child,
}

impl std::fmt::Debug for ChildStdio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildStdio").finish_non_exhaustive()
    }
}

impl ChildStdio {
    /// Starts `cmd` with its standard input and output piped (its standard error is the
    /// gateway's); the results of forwarded calls are kept in `relay`'s.
    pub(super) fn spawn(mut cmd: Command, relay: Arc<Relay>) -> io::Result<ChildStdio> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(io::Error::other(
                "the child's standard input or output is missing",
            ));
        };
        Ok(ChildStdio {
            reader: BufReader::new(stdout),
            writer: Arc::new(Mutex::new(stdin)),
            relay,
            _child: child,
        })
    }
}

/// What to do with a line that is not a message the SDK may see.
enum Refused {
    /// Hand the SDK this error response instead (an answer to one of the gateway's requests).
    Fail(Value),
    /// Answer the upstream's request with this error.
    Reply(Value),
    /// Nothing to answer.
    Drop(String),
}

/// Checks one line of the upstream's output; the result of an answer `results` wants is kept
/// there.
fn check(line: &[u8], results: &CallResults) -> Result<RxJsonRpcMessage<RoleClient>, Refused> {
    let Ok(text) = std::str::from_utf8(line) else {
        let text = String::from_utf8_lossy(line);
        let id = json::jsonrpc_id(&text);
        return Err(refusal(
            &text,
            id,
            PARSE_ERROR,
            "the message is not UTF-8".into(),
        ));
    };
    let refused = |code: i64, reason: String| {
        let id = json::jsonrpc_id(text);
        refusal(text, id, code, reason)
    };
    let value = json::parse(text).map_err(|e| match e {
        JsonError::Exceeded(over) => {
            let (code, _) = over.describe(&json::MESSAGE_LIMITS);
            refused(
                INVALID_REQUEST,
                format!("the message exceeds the gateway's limits ({code})"),
            )
        }
        JsonError::DuplicateKey(_) => refused(INVALID_REQUEST, e.to_string()),
        e => refused(PARSE_ERROR, e.to_string()),
    })?;
    let mut value = value;
    if let Some(id) = keep_result(&mut value, results) {
        // The SDK only needs to complete the request: no result to read.
        return Ok(JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id,
            result: ServerResult::empty(()),
        }));
    }
    let id = value.get("id").cloned();
    serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(value).map_err(|e| {
        refusal(
            text,
            id,
            INVALID_REQUEST,
            format!("not a JSON-RPC message: {e}"),
        )
    })
}

/// Moves the `result` of `message` into `results` when `message` is a JSON-RPC 2.0 answer to
/// a request that wants it; the id of that request.
fn keep_result(message: &mut Value, results: &CallResults) -> Option<RequestId> {
    let object = message.as_object_mut()?;
    let answer = object.len() == 3
        && object.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && object.get("result").is_some_and(Value::is_object);
    if !answer {
        return None;
    }
    // Read as the SDK reads it; an id it would match only loosely (`"7"` for 7) is not found
    // and the answer takes the SDK's path.
    let id = RequestId::deserialize(object.get("id")?).ok()?;
    let result = object.get_mut("result")?;
    let taken = std::mem::take(result);
    match results.keep(&id, taken) {
        Ok(()) => Some(id),
        Err(back) => {
            *result = back;
            None
        }
    }
}

/// The refusal of a line with `id` (if one was read) for `reason`: an answer (a `result` or
/// `error` member read) fails the request it answers, anything else with an id is answered.
fn refusal(text: &str, id: Option<Value>, code: i64, reason: String) -> Refused {
    let Some(id) = id.filter(|id| id.is_string() || id.is_i64() || id.is_u64()) else {
        return Refused::Drop(reason);
    };
    // A request of the upstream has a `method`; an answer a `result` or an `error`.
    if json::jsonrpc_has_method(text) != Some(false) {
        Refused::Reply(error(Some(id), code, &format!("Invalid Request: {reason}")))
    } else {
        let message = format!("the upstream's answer was refused: {reason}");
        Refused::Fail(error(Some(id), INTERNAL_ERROR, &message))
    }
}

impl Transport<RoleClient> for ChildStdio {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        let writer = self.writer.clone();
        async move { write_line(&writer, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let refused = match read_line(&mut self.reader, MAX_MESSAGE_BYTES).await? {
                Ok(line) if line.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(line) => match check(&line, &self.relay.results) {
                    Ok(message) => return Some(message),
                    Err(refused) => refused,
                },
                Err(prefix) => {
                    let text = String::from_utf8_lossy(&prefix);
                    let reason = format!("the message exceeds {MAX_MESSAGE_BYTES} bytes");
                    refusal(&text, json::jsonrpc_id(&text), INVALID_REQUEST, reason)
                }
            };
            match refused {
                Refused::Fail(answer) => match serde_json::from_value(answer) {
                    Ok(message) => return Some(message),
                    Err(e) => tracing::warn!(error = %e, "could not fail an upstream request"),
                },
                Refused::Reply(reply) => {
                    if let Err(e) = write_line(&self.writer, &reply).await {
                        tracing::warn!(error = %e, "could not answer the upstream");
                        return None;
                    }
                }
                Refused::Drop(reason) => {
                    tracing::warn!(%reason, "dropped an upstream message that has no id");
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.writer.lock().await.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_over_the_limits_never_reach_the_sdk() {
        let none = CallResults::default();
        let ok = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
        assert!(check(ok, &none).is_ok());
        // An answer with a repeated key fails the request it answers.
        let dup = br#"{"jsonrpc":"2.0","id":7,"result":{"a":1,"a":2}}"#;
        let Err(Refused::Fail(answer)) = check(dup, &none) else {
            panic!("a duplicate key in an answer must fail its request");
        };
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], INTERNAL_ERROR);
        // An answer with too many keys, named by its limit.
        let keys: Vec<String> = (0..70_000).map(|i| format!("\"k{i}\":0")).collect();
        let wide = format!(
            r#"{{"jsonrpc":"2.0","id":"x","result":{{{}}}}}"#,
            keys.join(",")
        );
        let Err(Refused::Fail(answer)) = check(wide.as_bytes(), &none) else {
            panic!("too many keys must fail the request");
        };
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("too_many_keys")
        );
        // A request of the upstream that does not fit is answered; a notification is dropped.
        let request =
            br#"{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"a":1,"a":1}}"#;
        assert!(matches!(check(request, &none), Err(Refused::Reply(_))));
        let note = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"a":1,"a":1}}"#;
        assert!(matches!(check(note, &none), Err(Refused::Drop(_))));
        assert!(matches!(check(b"\xff\xfe", &none), Err(Refused::Drop(_))));
    }

    #[test]
    fn a_wanted_result_is_kept_as_sent_and_the_sdk_gets_an_empty_one() {
        let results = CallResults::default();
        let line = br#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"image","data":"AA==","mimeType":"image/png","x-extra":1}],"structuredContent":{"n":1.50},"_meta":{"k":"v"}}}"#;
        // Nobody waits for it: the SDK reads the whole answer.
        let Ok(JsonRpcMessage::Response(r)) = check(line, &results) else {
            panic!("an answer");
        };
        assert!(matches!(r.result, ServerResult::CallToolResult(_)));
        let wanted = results.want(RequestId::Number(4));
        let Ok(JsonRpcMessage::Response(r)) = check(line, &results) else {
            panic!("an answer");
        };
        assert_eq!(r.id, RequestId::Number(4));
        assert_eq!(
            serde_json::to_value(&r.result).unwrap(),
            serde_json::json!({})
        );
        let kept = wanted.take().expect("the result was kept");
        let sent: Value = serde_json::from_slice::<Value>(line).unwrap()["result"].clone();
        assert_eq!(kept, sent, "kept exactly as the upstream sent it");
        // Another id, an error answer and a request with the same id are not kept.
        let other = br#"{"jsonrpc":"2.0","id":5,"result":{"content":[]}}"#;
        assert!(check(other, &results).is_ok());
        let error = br#"{"jsonrpc":"2.0","id":4,"error":{"code":-1,"message":"no"}}"#;
        assert!(matches!(
            check(error, &results),
            Ok(JsonRpcMessage::Error(_))
        ));
        let request = br#"{"jsonrpc":"2.0","id":4,"method":"ping","result":{}}"#;
        let _ = check(request, &results);
        let other_version = br#"{"jsonrpc":"1.0","id":4,"result":{"content":[]}}"#;
        let _ = check(other_version, &results);
        assert_eq!(wanted.take(), None);
    }
}
