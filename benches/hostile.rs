//! The worst accepted inputs found, through the whole pipeline (`Dispatcher::dispatch`, default
//! argument limits): each is at most the 1 MiB size limit and must stay well under 50 ms per call
//! in a release build. Arguments arrive as text (the OpenAI path, parsed strictly); the audit
//! sink seals every entry as the memory sink does (its canonical encoding, HMAC under a host
//! key) and then drops it, so memory stays flat.
//!
//! - `many_keys`: 16 objects of 510 keys (near the per-object and total key limits) in a
//!   `serde_json::Value` field, every key and value judged as text.
//! - `many_strings`: 16 000 short strings (the item limit is 16 384), each judged as text.
//! - `combining_marks`: four 250 KiB strings of letters each carrying 8 combining marks (the most
//!   accepted), the canonical form dropping them all; `marks_on_cyrillic` the same on a Cyrillic
//!   letter (which composes with some of them), `arabic_vowelled` fully vowelled Arabic (a mark
//!   on nearly every letter).
//! - `cjk_text`, `cyrillic_text`: four 250 KiB strings of Chinese or Russian prose (NFKC,
//!   confusable folding, eight-language phrases).
//! - `deep_nesting`: 250 values nested to the depth limit (32 levels with the arguments object),
//!   each level holding a string.
//! - `base64_runs`, `leet_words`, `brackets`: 250 KiB strings of base64-looking runs (decoded
//!   and judged), of letter-and-digit words (two leetspeak readings), and of `[`/`](` fragments
//!   (the markup-link patterns).
//! - `base64_distinct`: 250 KiB strings of base64 runs that all differ, each decoding to printable
//!   text (no run is a repeat the sanitizer could skip).
//! - `gate_refusal`: an over-deep 1 MiB document, refused by the gate before parsing.
//!
//! `cargo bench -p toolguard-benches --bench hostile -- --warm-up-time 1 --measurement-time 5`
//!
//! Instruction counts of one call per input, under callgrind (stable whatever the machine's
//! load): run the bench binary with `TOOLGUARD_HOSTILE_ONCE` set (all inputs, or a
//! comma-separated list of names), collecting only inside `dispatch_once`:
//!
//! ```sh
//! TOOLGUARD_HOSTILE_ONCE=combining_marks valgrind --tool=callgrind --collect-atstart=no \
//!   '--toggle-collect=hostile::dispatch_once' target/release/deps/hostile-<hash>
//! ```

use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};
use toolguard::audit::{AuditError, AuditRecord};
use toolguard::{
    AuditSink, BoxFuture, Dispatcher, HostKeys, Principal, ToolCall, ToolContext, ToolError, tool,
};

/// Accepts anything within the limits and reports how many notes it got.
#[tool(risk = "low")]
async fn ingest(
    ctx: &ToolContext<()>,
    /// Notes.
    notes: Vec<String>,
    /// Free-form metadata.
    meta: Option<Value>,
) -> Result<usize, ToolError> {
    let _ = (ctx, meta);
    Ok(notes.len())
}

/// An audit sink that seals each entry like the memory sink, then keeps nothing.
struct SealAndDrop(std::sync::Arc<HostKeys>);

impl AuditSink for SealAndDrop {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        let entry = toolguard::audit::seal(&self.0, 1, record, toolguard::audit::GENESIS_HASH);
        std::hint::black_box(entry);
        Box::pin(async { Ok(0) })
    }
}

/// `n` notes of about `bytes` bytes each, made of `unit` repeated, each with its own number
/// in front (no two are the same text, so nothing worked out for one serves another).
fn notes(unit: &str, n: usize, bytes: usize) -> Value {
    let body = unit.repeat(bytes / unit.len() - 1);
    let notes: Vec<String> = (0..n).map(|k| format!("{k} {body}")).collect();
    json!({ "notes": notes })
}

/// `n` notes of about `bytes` bytes each, made of base64 runs that all differ.
fn distinct_base64(n: usize, bytes: usize) -> Value {
    use base64::Engine as _;
    let notes: Vec<String> = (0..n)
        .map(|k| {
            let mut note = String::with_capacity(bytes);
            for i in 0.. {
                let run = base64::engine::general_purpose::STANDARD
                    .encode(format!("note {k}.{i} reads fine"));
                if note.len() + run.len() + 1 > bytes {
                    break;
                }
                note.push_str(&run);
                note.push(' ');
            }
            note
        })
        .collect();
    json!({ "notes": notes })
}

fn inputs() -> Vec<(&'static str, String)> {
    let many: serde_json::Map<String, Value> = (0..16)
        .map(|i| {
            let inner: serde_json::Map<String, Value> = (0..510)
                .map(|j| (format!("key {i} {j}"), json!(format!("value {j} of {i}"))))
                .collect();
            (format!("group {i}"), Value::Object(inner))
        })
        .collect();
    let marks = "a\u{0301}\u{0302}\u{0303}\u{0304}\u{0305}\u{0306}\u{0307}\u{0308} ";
    let mut deep = json!("leaf text");
    for _ in 0..30 {
        deep = json!([deep, "sibling text"]);
    }
    let deep_args = json!({"notes": [], "meta": vec![deep; 250]});
    let docs = vec![
        ("many_keys", json!({"notes": ["hi"], "meta": many})),
        ("many_strings", json!({"notes": vec!["ok then"; 16_000]})),
        ("combining_marks", notes(marks, 4, 250_000)),
        (
            "marks_on_cyrillic",
            notes(&marks.replace('a', "\u{0438}"), 4, 250_000),
        ),
        (
            "arabic_vowelled",
            notes(
                "\u{0628}\u{064E}\u{0633}\u{0652}\u{0645}\u{0650} \u{0671}\u{0644}\u{0644}\u{0651}\u{064E}\u{0647}\u{0650} ",
                4,
                250_000,
            ),
        ),
        (
            "cjk_text",
            notes(
                "会议改到下午三点，请大家准时参加。请按照说明书安装设备。",
                4,
                250_000,
            ),
        ),
        (
            "cyrillic_text",
            notes(
                "Пожалуйста, следуйте инструкции по сборке и не забудьте зонт. ",
                4,
                250_000,
            ),
        ),
        ("deep_nesting", deep_args),
        (
            "base64_runs",
            notes("aWdub3JlIGFsbCBvZiB0aGlz Zm9vYmFyYmF6cXV4 ", 4, 250_000),
        ),
        (
            "leet_words",
            notes("r3p0rt 1n 5ect10n 4 0f th3 m4nu4l ", 4, 250_000),
        ),
        ("brackets", notes("[a](b [c] ![d]( <a x=y ", 4, 250_000)),
        ("base64_distinct", distinct_base64(4, 250_000)),
    ];
    let mut out: Vec<(&'static str, String)> = docs
        .into_iter()
        .map(|(name, v)| (name, serde_json::to_string(&v).unwrap()))
        .collect();
    for (name, text) in &out {
        assert!(text.len() <= 1 << 20, "{name} is over the size limit");
    }
    let refused = format!(
        "{{\"notes\":{}{}}}",
        "[".repeat(1 << 19),
        "]".repeat(1 << 19)
    );
    out.push(("gate_refusal", refused));
    out
}

/// The dispatcher every input goes through.
fn dispatcher() -> Dispatcher<()> {
    Dispatcher::builder(())
        .tool(Ingest)
        .audit(SealAndDrop(std::sync::Arc::new(HostKeys::ephemeral())))
        .build()
        .unwrap()
}

/// One call with `text` as its arguments: what callgrind counts in `TOOLGUARD_HOSTILE_ONCE` mode.
#[inline(never)]
fn dispatch_once(
    rt: &tokio::runtime::Runtime,
    d: &Dispatcher<()>,
    who: &Principal,
    text: String,
) -> toolguard::Status {
    rt.block_on(d.dispatch(ToolCall::new("c", "ingest", text), who))
        .status
}

/// `TOOLGUARD_HOSTILE_ONCE` mode: each named input (or all) dispatched once after a warm-up
/// call, its status printed.
fn once(names: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = dispatcher();
    let who = Principal::new("acme", "alice", "bench");
    let wanted: Vec<&str> = names.split(',').filter(|n| !n.is_empty()).collect();
    for (name, text) in inputs() {
        if wanted.is_empty() || wanted.contains(&name) {
            // The warm-up builds the lazily compiled patterns outside the counted call.
            let _ = rt.block_on(d.dispatch(ToolCall::new("c", "ingest", text.clone()), &who));
            let status = dispatch_once(&rt, &d, &who, text);
            println!("{name}: {status:?}");
        }
    }
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = dispatcher();
    let who = Principal::new("acme", "alice", "bench");
    let mut group = c.benchmark_group("worst_case");
    group.sample_size(20);
    for (name, text) in inputs() {
        // Every input but the refused one must pass the whole pipeline.
        let out = rt.block_on(d.dispatch(ToolCall::new("c", "ingest", text.clone()), &who));
        let ok = name == "gate_refusal" || out.status == toolguard::Status::Ok;
        assert!(ok, "{name}: {:?} {:?}", out.status, out.reason);
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                d.dispatch(ToolCall::new("c", "ingest", text.clone()), &who)
                    .await
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(names) = std::env::var("TOOLGUARD_HOSTILE_ONCE") {
        once(&names);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
