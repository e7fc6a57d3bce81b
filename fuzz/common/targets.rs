//! The fuzz target bodies, shared by the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`, nightly)
//! and the bounded stable-toolchain harness (`tests/fuzz_targets.rs`). Each function takes
//! arbitrary bytes, must never panic, and asserts the invariants of its area.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;
use toolguard::providers::{anthropic, gemini, openai};
use toolguard::sanitize::{NoResolution, Sanitizer, UrlPolicy, Verdict, canon, path, url};
use toolguard::spec::{FieldKind, FieldSpec};
use toolguard::{Limits, RawArguments};

/// The field kinds the sanitizer target picks from (first input byte).
pub const KINDS: [FieldKind; 8] = [
    FieldKind::Text,
    FieldKind::Name,
    FieldKind::Identifier,
    FieldKind::Email,
    FieldKind::Url,
    FieldKind::Path,
    FieldKind::Money,
    FieldKind::Opaque,
];

/// A confinement root with a sub-directory and (on unix) a symlink out of it, made once.
pub fn fuzz_root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("toolguard-fuzz-{}", std::process::id()));
        let root = base.join("root");
        let _ = std::fs::create_dir_all(root.join("docs"));
        let _ = std::fs::create_dir_all(base.join("outside"));
        #[cfg(unix)]
        {
            let _ = std::os::unix::fs::symlink(base.join("outside"), root.join("escape"));
        }
        root
    })
}

/// Argument gate and strict parse: never panic; a document that passes the gate never hits
/// the JSON parser's recursion limit; text and value forms of a compact document agree on depth.
pub fn arguments(data: &[u8]) {
    let text = String::from_utf8_lossy(data).into_owned();
    let limits = Limits::default().max_bytes(1 << 16);
    let raw = RawArguments::Json(text.clone());
    let gated = raw.check_limits(&limits);
    let parsed = raw.parse();
    if gated.is_ok()
        && let Err(stop) = &parsed
    {
        let message = stop.message.as_deref().unwrap_or("");
        assert!(
            !message.contains("recursion limit"),
            "the gate let a document through that the parser cannot nest: {message}"
        );
    }
    if let Ok(value) = parsed {
        let value_gate = RawArguments::Value(value.clone()).check_limits(&limits);
        let compact = serde_json::to_string(&value).expect("a parsed value serializes");
        let text_gate = RawArguments::Json(compact).check_limits(&limits);
        let depth = |r: &Result<(), toolguard::outcome::Stop>| {
            r.as_ref().err().and_then(|s| s.reason.clone()).as_deref() == Some("too_deep")
        };
        assert_eq!(depth(&value_gate), depth(&text_gate), "depth differs");
    }
}

/// The sanitizer per kind (first byte picks the kind): never panics; a blocked outcome carries
/// no value; a clean value is the input (or, for `url`, its checked normalized form, which is
/// clean again); a stripped value only lost characters and is clean when judged again.
pub fn sanitize(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let kind = KINDS[pick as usize % KINDS.len()];
    let value = String::from_utf8_lossy(rest);
    let mut field = FieldSpec::new("value").with_kind(kind);
    field.root = Some(fuzz_root().to_string_lossy().into_owned());
    let sanitizer = Sanitizer::new();
    let out = sanitizer.sanitize_str("fuzz", &field, &value);
    let _ = canon::canonical(&value);
    match out.verdict {
        Verdict::Blocked => {
            assert!(out.value.is_none(), "a blocked outcome carries no value");
            assert!(out.reason.is_some(), "a blocked outcome names its reason");
        }
        Verdict::Clean => {
            let v = out.value.expect("a clean outcome carries the value");
            if kind != FieldKind::Url {
                assert_eq!(v, value, "a clean value is passed on unchanged");
            }
            if v != value {
                let again = sanitizer.sanitize_str("fuzz", &field, &v);
                assert_eq!(
                    again.verdict,
                    Verdict::Clean,
                    "normalized URL is clean: {v:?}"
                );
                assert_eq!(
                    again.value.as_deref(),
                    Some(v.as_str()),
                    "normalization is stable"
                );
            }
        }
        Verdict::Stripped => {
            let v = out.value.expect("a stripped outcome carries the value");
            assert!(
                is_subsequence(&v, &value),
                "stripping only removes characters"
            );
            assert!(
                v.chars().count() < value.chars().count(),
                "something was removed"
            );
            let again = sanitizer.sanitize_str("fuzz", &field, &v);
            assert_eq!(
                again.verdict,
                Verdict::Clean,
                "a stripped value is clean when judged again: {v:?} ({:?})",
                again.reason
            );
        }
        _ => panic!("a verdict this target does not know: {:?}", out.verdict),
    }
}

fn is_subsequence(small: &str, big: &str) -> bool {
    let mut it = big.chars();
    small.chars().all(|c| it.any(|b| b == c))
}

/// URL checks: never panic; an accepted URL's normalized serialization is accepted again with
/// the same host, and the `Url` kind accepts it.
pub fn url(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let policy = UrlPolicy::default();
    if let Ok(checked) = url::check_url(&raw, &policy, &NoResolution) {
        let again = url::check_url(&checked.url, &policy, &NoResolution)
            .unwrap_or_else(|e| panic!("normalized {:?} refused: {e}", checked.url));
        assert_eq!(again.host, checked.host);
        assert_eq!(again.url, checked.url, "normalization is stable");
        let kind = toolguard::kinds::Url::new(checked.url.clone());
        assert!(kind.is_ok(), "the Url kind refuses {:?}", checked.url);
    }
}

/// Path confinement: never panics; a confined path is below the root.
pub fn path(data: &[u8]) {
    let raw = String::from_utf8_lossy(data);
    let _ = path::check_lexical(&raw);
    let root = fuzz_root();
    if let Ok(p) = path::confine(&raw, root)
        && let (Ok(real_root), Ok(real)) = (root.canonicalize(), p.canonicalize())
    {
        assert!(real.starts_with(&real_root), "{raw:?} escaped to {real:?}");
    }
}

/// Every provider response parser and stream accumulator: never panic. The input is one JSON
/// document for the parsers, and stream events: the elements of that document when it is an
/// array, else its lines.
pub fn providers(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let whole = toolguard::call::strict_json(&text);
    if let Some(v) = &whole {
        let _ = openai::parse_chat_completion(v);
        let _ = openai::parse_chat_choice(v, 1);
        let _ = openai::parse_response(v);
        let _ = anthropic::parse_message(v);
        let _ = gemini::parse_generate_content(v);
    }
    let events: Vec<Value> = match whole {
        Some(Value::Array(items)) => items,
        _ => text
            .lines()
            .filter_map(toolguard::call::strict_json)
            .collect(),
    };
    let mut chat = openai::ChatStream::new();
    let mut responses = openai::ResponsesStream::new();
    let mut messages = anthropic::MessageStream::new();
    let mut gem = gemini::GenerateContentStream::new();
    for e in &events {
        let _ = chat.push(e);
        let _ = responses.push(e);
        let _ = messages.push(e);
        let _ = gem.push(e);
    }
    let _ = chat.finish();
    let _ = responses.finish();
    let _ = messages.finish();
}

/// The tool the MCP message path serves: takes a note, answers its length.
#[cfg(feature = "mcp")]
#[toolguard::tool(risk = "low")]
async fn note(
    ctx: &toolguard::ToolContext<()>,
    /// The note.
    text: String,
) -> Result<usize, toolguard::ToolError> {
    let _ = ctx;
    Ok(text.len())
}

/// The id of the sentinel ping sent after the fuzzed message.
#[cfg(feature = "mcp")]
const SENTINEL: &str = "toolguard-fuzz-sentinel";

/// The MCP message path: the first line of the input is sent as one raw JSON-RPC message to
/// an initialized server (`McpServer::serve_io` over an in-memory pipe), then a ping. The
/// server never panics or hangs, keeps the session (the ping is answered), and answers the
/// message with its own id whenever that id can be read, unless the message is a response
/// (an object with `result` or `error` and no `method`), which JSON-RPC never answers. When
/// the client ends its input the session ends cleanly. One case takes at most 10 s.
#[cfg(feature = "mcp")]
pub fn mcp(data: &[u8]) {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    });
    let line = data.split(|b| *b == b'\n').next().unwrap_or_default();
    runtime.block_on(mcp_session(line));
}

/// The id a reply to `line` must carry, if one is owed (see [`mcp`]).
#[cfg(feature = "mcp")]
fn owed_reply(line: &[u8]) -> Option<Value> {
    let text = String::from_utf8_lossy(line);
    let text = text.strip_suffix('\r').unwrap_or(&text);
    let id = toolguard::providers::json::jsonrpc_id(text)?;
    let response = toolguard::providers::json::parse(text)
        .ok()
        .and_then(|v| v.as_object().cloned())
        .is_some_and(|o| {
            !o.contains_key("method") && (o.contains_key("result") || o.contains_key("error"))
        });
    (!response).then_some(id)
}

/// How long one MCP case may take, from starting the server to its end of session.
#[cfg(feature = "mcp")]
const MCP_CASE_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// One MCP case within [`MCP_CASE_LIMIT`]: a hang fails with the line that caused it.
#[cfg(feature = "mcp")]
async fn mcp_session(line: &[u8]) {
    if tokio::time::timeout(MCP_CASE_LIMIT, mcp_exchange(line))
        .await
        .is_err()
    {
        panic!(
            "the MCP session did not finish within {MCP_CASE_LIMIT:?} for the line {:?}",
            String::from_utf8_lossy(line)
        );
    }
}

/// Starts a server, initializes it, sends `line` and the sentinel ping, reads the replies owed,
/// then ends the input and waits for the session to end cleanly.
#[cfg(feature = "mcp")]
async fn mcp_exchange(line: &[u8]) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let dispatcher = toolguard::Dispatcher::builder(())
        .tool(Note)
        .audit(toolguard::MemoryAuditSink::new())
        .build()
        .expect("dispatcher");
    let who = toolguard::Principal::new("acme", "alice", "fuzz");
    let server = toolguard::mcp::McpServer::new(dispatcher, who).expect("export");
    let (server_end, client_end) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_end);
        server.serve_io(read, write).await
    });
    let (read, mut write) = tokio::io::split(client_end);
    let mut read = tokio::io::BufReader::new(read);
    let mut send = async |bytes: &[u8]| {
        write.write_all(bytes).await.expect("write");
        write.write_all(b"\n").await.expect("write");
    };
    send(br#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"fuzz","version":"1"}}}"#).await;
    let mut reply = String::new();
    read.read_line(&mut reply).await.expect("initialize reply");
    send(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).await;
    send(line).await;
    let ping = format!(r#"{{"jsonrpc":"2.0","id":"{SENTINEL}","method":"ping"}}"#);
    send(ping.as_bytes()).await;
    let mut owed = owed_reply(line);
    let mut pinged = false;
    while !pinged || owed.is_some() {
        let mut reply = String::new();
        let n = read.read_line(&mut reply).await.expect("read a reply");
        assert!(
            n > 0,
            "the session ended (owed id {owed:?}, ping answered: {pinged})"
        );
        let reply: Value = serde_json::from_str(&reply)
            .unwrap_or_else(|e| panic!("the reply is not JSON ({e}): {reply:?}"));
        let id = reply.get("id").cloned().unwrap_or(Value::Null);
        if owed.as_ref() == Some(&id) {
            owed = None;
        } else if id == SENTINEL {
            pinged = true;
        }
    }
    // Dropping the write half alone ends nothing: the read half still holds the pipe. Shutting
    // it down is what the server reads as the end of input.
    write.shutdown().await.expect("end the input");
    let ended = serving.await.expect("the server task does not panic");
    ended.expect("the session ends cleanly at the end of input");
}

/// The schema the policy target's upstream offers a tool when the input carries none: the
/// standard fields, and a described property for each top-level field the tool's entry names
/// (an integer for a `money` field, else a string; an array of them where the entry bounds its
/// items), so that the declaration checks run.
#[cfg(feature = "policy")]
fn offered_schema(entry: Option<&toolguard::policy::ToolEntry>) -> Value {
    let mut properties = serde_json::json!({
        "message": {"type": "string", "maxLength": 1000, "description": "the message"},
        "amount": {"type": "integer", "minimum": 0, "description": "minor units"},
        "currency": {"type": "string", "enum": ["USD", "EUR"], "description": "the currency"},
        "items": {"type": "array", "maxItems": 8, "description": "the items",
                  "items": {"type": "string", "maxLength": 64}},
        "note": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}],
                 "description": "a note"}
    });
    for (pointer, field) in entry.iter().flat_map(|e| &e.fields) {
        let Some(name) = pointer.strip_prefix('/').filter(|n| !n.contains('/')) else {
            continue;
        };
        let money = field.kind == Some(toolguard::spec::FieldKind::Money);
        let value = match money {
            true => serde_json::json!({"type": "integer"}),
            false => serde_json::json!({"type": "string", "maxLength": 200}),
        };
        properties[name] = match field.max_items {
            Some(_) => serde_json::json!({"type": "array", "items": value, "description": name}),
            None => {
                let mut value = value;
                value["description"] = Value::from(name);
                value
            }
        };
    }
    serde_json::json!({"type": "object", "properties": properties, "required": ["message"]})
}

/// A policy file, then (after a NUL byte) the input schema of the tools the upstream offers
/// (any JSON; without one, [`offered_schema`]):
/// reading, checking, reviewing and declaring never panic, whatever the file or the schema; a
/// refusal names the file and a line inside it (or none) and says what is wrong; an accepted
/// file yields the authorizer, risk policy and sanitizer of the tools it declares, and each
/// declared tool's schema is an object schema.
#[cfg(feature = "policy")]
pub fn policy(data: &[u8]) {
    use toolguard::policy::{Offered, Policy};
    let split = data.iter().position(|b| *b == 0).unwrap_or(data.len());
    let (file, rest) = data.split_at(split);
    let text = String::from_utf8_lossy(file).into_owned();
    let lines = text.split('\n').count();
    let refused = |e: toolguard::policy::PolicyError| {
        assert!(!e.message.trim().is_empty(), "a refusal says what is wrong");
        if let Some(line) = e.line {
            assert!(
                (1..=lines).contains(&line),
                "line {line} is outside the file's {lines} lines: {e}"
            );
        }
        assert!(e.to_string().starts_with("fuzz.toml"), "{e}");
    };
    let policy = match Policy::parse("fuzz.toml", text) {
        Ok(policy) => policy,
        Err(e) => return refused(e),
    };
    let given = serde_json::from_slice::<Value>(rest.get(1..).unwrap_or_default()).ok();
    let schema = |entry| given.clone().unwrap_or_else(|| offered_schema(entry));
    let mut offered: Vec<Offered> = policy
        .tool_names()
        .map(|name| Offered {
            name: name.to_owned(),
            description: "a tool".to_owned(),
            input_schema: schema(policy.entry(name)),
        })
        .collect();
    offered.push(Offered {
        name: "unnamed".to_owned(),
        description: "a tool the file does not name".to_owned(),
        input_schema: schema(None),
    });
    let review = policy.review_offered(&offered);
    let _ = review.refuses();
    let _ = policy.approver_roles();
    let _ = policy.local_principal("fuzz");
    let _ = policy.token_principal("0123456789abcdef0123", "fuzz");
    let _ = policy.key_line("tools");
    let specs = match policy.declare_offered(&offered) {
        Ok(specs) => specs,
        Err(e) => return refused(e),
    };
    let _ = policy.authorizer();
    let _ = policy.risk_policy(&specs);
    let _ = policy.sanitizer(&specs);
    for spec in &specs {
        assert!(
            spec.input_schema.is_object(),
            "{}: a declared tool's schema is an object",
            spec.name
        );
    }
}
