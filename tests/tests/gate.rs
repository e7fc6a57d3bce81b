//! The argument gate through `dispatch`: arguments sent as text (OpenAI) and already parsed
//! (Anthropic `tool_use.input`, Gemini `functionCall.args`, `RawArguments::Value`) meet the same
//! limits before parsing; over a limit the call ends `malformed` with a reason code, the handler
//! never runs, and exactly one audit entry is written at the parse stage.

use std::sync::Arc;

use serde_json::{Value, json};
use toolguard::Limits;
use toolguard::audit::Stage;
use toolguard::providers::{anthropic, gemini, openai};
use toolguard::{Dispatcher, MemoryAuditSink, RawArguments, Status, ToolCall};
use toolguard_tests::*;

struct Harness {
    dispatcher: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
}

fn harness(limits: Option<Limits>) -> Harness {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let mut builder = Dispatcher::builder_arc(ledger.clone())
        .tool(EchoNote)
        .audit(audit.clone());
    if let Some(limits) = limits {
        builder = builder.argument_limits(limits);
    }
    Harness {
        dispatcher: builder.build().expect("dispatcher builds"),
        ledger,
        audit,
    }
}

impl Harness {
    async fn run(&self, call: ToolCall) -> (Status, Option<String>) {
        let before = self.audit.len();
        let out = self.dispatcher.dispatch(call, &alice()).await;
        let entries = self.audit.entries();
        assert_eq!(entries.len(), before + 1, "one audit entry per call");
        let last = &entries[before].record;
        assert_eq!(last.status, Some(out.status));
        if out.status == Status::Malformed {
            assert_eq!(last.stage, Stage::Parse);
            assert_eq!(last.reason, out.reason);
            assert!(
                last.arguments.is_none(),
                "no arguments recorded for a gated call"
            );
        }
        (out.status, out.reason.map(String::from))
    }
}

/// The same arguments in the four shapes adapters deliver.
fn shapes(args: &Value) -> Vec<(&'static str, ToolCall)> {
    let text = serde_json::to_string(args).unwrap();
    let openai_response = json!({"id": "chatcmpl-1", "choices": [{"index": 0, "message": {
        "role": "assistant", "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "echo_note", "arguments": text}}]}}]});
    let anthropic_response = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "echo_note", "input": args}]});
    let gemini_response = json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "echo_note", "args": args}}]}}]});
    let one = |calls: Vec<ToolCall>| calls.into_iter().next().expect("one call");
    vec![
        (
            "openai",
            one(openai::parse_chat_completion(&openai_response).unwrap()),
        ),
        (
            "anthropic",
            one(anthropic::parse_message(&anthropic_response).unwrap()),
        ),
        (
            "gemini",
            one(gemini::parse_generate_content(&gemini_response).unwrap()),
        ),
        (
            "value",
            ToolCall::new("c-1", "echo_note", RawArguments::Value(args.clone())),
        ),
    ]
}

fn nested(depth: usize) -> Value {
    let mut v = json!("x");
    for _ in 0..depth {
        v = Value::Array(vec![v]);
    }
    v
}

#[tokio::test]
async fn every_adapter_shape_meets_the_same_limits() {
    let limits = Limits::default()
        .max_bytes(4096)
        .max_depth(8)
        .max_object_keys(16)
        .max_total_keys(40)
        .max_items(64)
        .max_string_bytes(300);
    let h = harness(Some(limits));
    let wide: serde_json::Map<String, Value> =
        (0..17).map(|i| (format!("k{i}"), json!(i))).collect();
    let many: serde_json::Map<String, Value> = (0..5)
        .map(|i| {
            let inner: serde_json::Map<String, Value> =
                (0..10).map(|j| (format!("k{j}"), json!(j))).collect();
            (format!("o{i}"), Value::Object(inner))
        })
        .collect();
    let cases = [
        (json!({"note": "x".repeat(5000)}), "too_large"),
        (json!({"note": "x".repeat(301)}), "string_too_long"),
        (json!({"note": "hi", "x": nested(8)}), "too_deep"),
        (
            json!({"note": "hi", "x": Value::Object(wide)}),
            "too_many_keys",
        ),
        (
            json!({"note": "hi", "x": Value::Object(many)}),
            "too_many_keys_total",
        ),
        (json!({"note": "hi", "y".repeat(301): 1}), "string_too_long"),
        (json!({"note": "hi", "x": vec![0; 70]}), "too_many_items"),
        (
            json!({"note": "hi", "x": vec![[[0]]; 40]}),
            "too_many_items",
        ),
    ];
    for (args, want) in cases {
        for (shape, call) in shapes(&args) {
            let (status, reason) = h.run(call).await;
            assert_eq!(status, Status::Malformed, "{shape} {want}");
            assert_eq!(reason.as_deref(), Some(want), "{shape}");
        }
    }
    assert_eq!(h.ledger.runs(), 0, "no gated call reaches the handler");
    // Just under every limit: the call goes on to the later stages (here: schema validation
    // refuses the unknown field, so nothing runs either, but not because of the gate).
    for (shape, call) in shapes(&json!({"note": "hi", "x": nested(6)})) {
        let (status, _) = h.run(call).await;
        assert_eq!(status, Status::InvalidArguments, "{shape}");
    }
    for (shape, call) in shapes(&json!({"note": "x".repeat(200)})) {
        let (status, _) = h.run(call).await;
        assert_eq!(status, Status::Ok, "{shape}");
    }
    assert_eq!(h.ledger.runs(), 4);
}

#[tokio::test]
async fn default_limits_refuse_a_megabyte_value_and_deep_nesting() {
    let h = harness(None);
    let big = json!({"note": "a".repeat(200), "pad": "b".repeat(1 << 20)});
    for (shape, call) in shapes(&big) {
        let (status, reason) = h.run(call).await;
        assert_eq!(status, Status::Malformed, "{shape}");
        assert_eq!(reason.as_deref(), Some("too_large"), "{shape}");
    }
    for (shape, call) in shapes(&json!({"note": "hi", "x": nested(40)})) {
        let (_, reason) = h.run(call).await;
        assert_eq!(reason.as_deref(), Some("too_deep"), "{shape}");
    }
    // Deeper than serde_json's own recursion limit, as text: still the gate's reason code.
    let text = format!(
        r#"{{"note": "hi", "x": {}1{}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let (_, reason) = h
        .run(ToolCall::new(
            "c-deep",
            "echo_note",
            RawArguments::Json(text),
        ))
        .await;
    assert_eq!(reason.as_deref(), Some("too_deep"));
    assert_eq!(h.ledger.runs(), 0);
}

#[tokio::test]
async fn a_larger_configured_size_is_honoured_for_text() {
    let h = harness(Some(Limits::default().max_bytes(3 << 20)));
    // 1.5 MiB of arguments as text passes the gate; the schema (max_len 200) then refuses it.
    let text = serde_json::to_string(&json!({"note": "n".repeat(3 << 19)})).unwrap();
    let (status, reason) = h
        .run(ToolCall::new(
            "c-big",
            "echo_note",
            RawArguments::Json(text),
        ))
        .await;
    assert_eq!(status, Status::Malformed, "string limit still applies");
    assert_eq!(reason.as_deref(), Some("string_too_long"));
    let h = harness(Some(
        Limits::default()
            .max_bytes(3 << 20)
            .max_string_bytes(2 << 20),
    ));
    let text = serde_json::to_string(&json!({"note": "n".repeat(3 << 19)})).unwrap();
    let (status, _) = h
        .run(ToolCall::new(
            "c-big",
            "echo_note",
            RawArguments::Json(text),
        ))
        .await;
    assert_eq!(status, Status::InvalidArguments);
}
