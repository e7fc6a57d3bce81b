//! Cost before work on every adapter: a 50 MB string and a million keys are refused with a
//! stable status whichever way they arrive — as a value the host hands over
//! (`RawArguments::Value`, walked with early exit), as argument text (`RawArguments::Json`,
//! measured on its bytes), or inside a provider response the adapters read with the limits
//! applied before anything is built. The MCP server's transport is tested in `provider_mcp.rs`;
//! the refusal times are measured by `cargo bench -p toolguard-benches --bench oversize`.

use serde_json::{Map, Value, json};
use toolguard::providers::{AdapterError, anthropic, gemini, openai};
use toolguard::sanitize::json::JsonError;
use toolguard::sanitize::limits::Exceeded;
use toolguard::{Dispatcher, MemoryAuditSink, RawArguments, Status, ToolCall, ToolContext};
use toolguard::{ToolError, tool};
use toolguard_tests::alice;

/// Takes any metadata.
#[tool]
async fn ingest(
    _ctx: &ToolContext<()>,
    /// Free-form metadata.
    meta: Option<Value>,
) -> Result<u8, ToolError> {
    let _ = meta;
    Ok(0)
}

fn huge_string() -> String {
    "x".repeat(50 << 20)
}

fn million_keys() -> Map<String, Value> {
    (0..1_000_000)
        .map(|i| (format!("k{i}"), Value::from(0)))
        .collect()
}

#[tokio::test]
async fn oversized_arguments_are_malformed_as_values_and_as_text() {
    let audit = std::sync::Arc::new(MemoryAuditSink::new());
    let d = Dispatcher::builder(())
        .tool(Ingest)
        .audit(audit.clone())
        .build()
        .unwrap();
    let string = json!({ "meta": huge_string() });
    let keys = json!({ "meta": Value::Object(million_keys()) });
    let cases = [
        ("value string", RawArguments::Value(string.clone())),
        ("value keys", RawArguments::Value(keys.clone())),
        ("text string", RawArguments::Json(string.to_string())),
        ("text keys", RawArguments::Json(keys.to_string())),
    ];
    for (name, args) in cases {
        let out = d
            .dispatch(ToolCall::new(name, "ingest", args), &alice())
            .await;
        assert_eq!(out.status, Status::Malformed, "{name}: {out:?}");
        assert_eq!(out.reason.as_deref(), Some("too_large"), "{name}");
    }
    // One terminal entry each, none carrying the payload.
    let entries = audit.entries();
    assert_eq!(entries.len(), 4);
    assert!(entries.iter().all(|e| e.record.arguments.is_none()));
}

/// A response of each provider whose tool call input is `input`.
fn responses(input: &Value) -> [(&'static str, String); 3] {
    let anthropic = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "ingest", "input": input}],
    });
    let gemini = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "ingest", "args": input}}
        ]}, "finishReason": "STOP"}],
    });
    let openai = json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant",
            "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "ingest", "arguments": input.to_string()}}],
        }}],
    });
    [
        ("anthropic", anthropic.to_string()),
        ("gemini", gemini.to_string()),
        ("openai", openai.to_string()),
    ]
}

fn parse(provider: &str, text: &str) -> Result<Vec<ToolCall>, AdapterError> {
    match provider {
        "anthropic" => anthropic::parse_message_text(text),
        "gemini" => gemini::parse_generate_content_text(text),
        _ => openai::parse_chat_completion_text(text),
    }
}

#[test]
fn provider_responses_are_refused_before_they_are_built() {
    let string = json!({ "meta": huge_string() });
    let keys = json!({ "meta": Value::Object(million_keys()) });
    for (input, over) in [(string, Exceeded::Bytes), (keys, Exceeded::ObjectKeys)] {
        for (provider, text) in responses(&input) {
            if provider == "openai" && over == Exceeded::ObjectKeys {
                // OpenAI sends the arguments as a string: the keys are text inside it, measured
                // on its bytes at the gate before they are parsed.
                let calls = parse(provider, &text).expect("a 12 MB string is within the message");
                let stop = calls[0]
                    .arguments
                    .check_limits(&toolguard::Limits::default())
                    .expect_err("over the argument limits");
                assert_eq!(stop.reason.as_deref(), Some("too_large"));
                continue;
            }
            match parse(provider, &text) {
                // The message reader stops at the first key limit it meets: the response's
                // own keys before `meta` count towards the total, which can come first.
                Err(AdapterError::Json(JsonError::Exceeded(found)))
                    if over == Exceeded::ObjectKeys =>
                {
                    assert!(
                        matches!(found, Exceeded::ObjectKeys | Exceeded::TotalKeys),
                        "{provider}: {found:?}"
                    )
                }
                Err(AdapterError::Json(JsonError::Exceeded(found))) => {
                    assert_eq!(found, over, "{provider}")
                }
                other => panic!("{provider}: {:?}", other.map(|c| c.len())),
            }
        }
    }
    // Within the limits, the same shapes are read.
    for (provider, text) in responses(&json!({"meta": {"a": "b"}})) {
        assert_eq!(parse(provider, &text).unwrap().len(), 1, "{provider}");
    }
}
