//! Cost before work: how long refusing oversized input takes, on each way it arrives (target:
//! under 20 ms each, in a release build).
//!
//! - `value_*`: arguments the host hands over already parsed (`RawArguments::Value`): the gate
//!   walks the value with early exit (`check_value`), so a 50 MB string is refused by its
//!   length and a million keys by the member count. `gate` measures the check alone;
//!   `dispatch` the whole call, which also frees the host's value.
//! - `text_*`: argument text (`RawArguments::Json`, OpenAI's form), measured on its bytes.
//! - `anthropic_*`, `gemini_*`: a provider response holding such a call, read by the adapter
//!   with the message limits applied on the bytes before anything is built.
//!
//! `cargo bench -p toolguard-benches --bench oversize -- --warm-up-time 1 --measurement-time 3`

use criterion::{BatchSize, Criterion, criterion_group};
use serde_json::{Map, Value, json};
use toolguard::providers::{anthropic, gemini};
use toolguard::{
    Dispatcher, Limits, Principal, RawArguments, Status, ToolCall, ToolContext, ToolError, tool,
};

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

fn inputs() -> [(&'static str, Value); 2] {
    let keys: Map<String, Value> = (0..1_000_000)
        .map(|i| (format!("k{i}"), Value::from(0)))
        .collect();
    [
        ("50mb_string", json!({ "meta": "x".repeat(50 << 20) })),
        ("million_keys", json!({ "meta": Value::Object(keys) })),
    ]
}

fn anthropic_response(input: &Value) -> String {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "ingest", "input": input}],
    })
    .to_string()
}

fn gemini_response(input: &Value) -> String {
    json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "ingest", "args": input}}
        ]}, "finishReason": "STOP"}],
    })
    .to_string()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = Dispatcher::builder(()).tool(Ingest).build().unwrap();
    let who = Principal::new("acme", "alice", "bench");
    let limits = Limits::default();
    let mut group = c.benchmark_group("oversize");
    group.sample_size(10);
    for (name, value) in inputs() {
        let raw = RawArguments::Value(value.clone());
        assert!(raw.check_limits(&limits).is_err(), "{name}");
        group.bench_function(format!("value_{name}/gate"), |b| {
            b.iter(|| raw.check_limits(&limits).is_err())
        });
        group.bench_function(format!("value_{name}/dispatch"), |b| {
            b.iter_batched(
                || ToolCall::new("c", "ingest", RawArguments::Value(value.clone())),
                |call| {
                    let out = rt.block_on(d.dispatch(call, &who));
                    assert_eq!(out.status, Status::Malformed);
                },
                BatchSize::PerIteration,
            )
        });
        let text = value.to_string();
        group.bench_function(format!("text_{name}/dispatch"), |b| {
            b.iter_batched(
                || ToolCall::new("c", "ingest", RawArguments::Json(text.clone())),
                |call| {
                    let out = rt.block_on(d.dispatch(call, &who));
                    assert_eq!(out.status, Status::Malformed);
                },
                BatchSize::PerIteration,
            )
        });
        let response = anthropic_response(&value);
        assert!(anthropic::parse_message_text(&response).is_err());
        group.bench_function(format!("anthropic_{name}/parse"), |b| {
            b.iter(|| anthropic::parse_message_text(&response).is_err())
        });
        let response = gemini_response(&value);
        assert!(gemini::parse_generate_content_text(&response).is_err());
        group.bench_function(format!("gemini_{name}/parse"), |b| {
            b.iter(|| gemini::parse_generate_content_text(&response).is_err())
        });
    }
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
