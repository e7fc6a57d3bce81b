//! What the provenance flow check costs per call.
//!
//! - `provenance/clean`: a state-changing low-risk call in a session with no source (the
//!   session's sources are read from the store, none applies).
//! - `provenance/tainted`: the same call in a session with three sources (read, judged by the
//!   flow policy, their ids written to the audit entry; the default policy lets a low-risk state
//!   change run, so both calls execute and differ only by the flow check).
//! - `provenance/action`: `FlowPolicy::action` alone.
//! - `provenance/origins_10_args_256_sources`: the origin of each argument of a call with ten
//!   string arguments (an IBAN, addresses, a URL, a phone number, ids, a path, a name, two texts)
//!   in a session holding 256 sources of about 20 values each and 8 trusted turns: canonical
//!   forms, keyed hashes (SipHash-2-4-128) and look-ups, against the session's value index.
//! - `provenance/value_index_256_sources`: building that index from the loaded sources (once
//!   per judged call in a tainted session, after the store read).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolguard::provenance::{FlowPolicy, Source, ValueIndex, ValueKey, origins};
use toolguard::sanitize::Sanitizer;
use toolguard::spec::{FieldKind, FieldSpec, ToolSpec};
use toolguard::{Dispatcher, MemoryAuditSink, Principal, ToolCall, ToolContext, ToolError, tool};

/// Shared state of the bench tool.
#[derive(Default)]
struct Counter {
    n: AtomicU64,
}

/// Adds `by` to a counter (a low-risk state change).
#[tool(risk = "low")]
async fn bump(
    ctx: &ToolContext<Counter>,
    /// Increment.
    #[arg(min = 1, max = 100)]
    by: u64,
) -> Result<u64, ToolError> {
    Ok(ctx.state().n.fetch_add(by, Ordering::Relaxed) + by)
}

fn provenance(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let d = Dispatcher::builder_arc(Arc::new(Counter::default()))
        .tool(Bump)
        .audit(MemoryAuditSink::new())
        .build()
        .unwrap();
    let clean = Principal::new("acme", "alice", "clean");
    let tainted = Principal::new("acme", "alice", "tainted");
    rt.block_on(async {
        for label in ["e-mail from billing", "web page", "uploaded document"] {
            d.add_source(&tainted, label).await.unwrap();
        }
    });
    let call = ToolCall::new("c", "bump", json!({"by": 1}));
    let mut group = c.benchmark_group("provenance");
    for (name, who) in [("clean", &clean), ("tainted", &tainted)] {
        group.bench_function(name, |b| {
            b.iter(|| rt.block_on(d.dispatch(call.clone(), who)));
        });
    }
    let spec = d.spec("bump").unwrap().clone();
    let policy = FlowPolicy::default();
    let sanitizer = Sanitizer::new();
    group.bench_function("action", |b| {
        b.iter(|| policy.action(std::hint::black_box(&spec), &sanitizer));
    });
    group.finish();
}

/// One untrusted source's text: an e-mail with about 20 values that can steer an action.
fn source_text(i: usize) -> String {
    format!(
        "From: sender{i}@mail{i}.example. Invoice INV-{i}-2024 of ${i},250.00 is due; pay to \
         GB{i:02}BUKB2020155555{i:04} or call +44 20 7946 {i:04}. See \
         https://portal{i}.example/pay/{i}?ref=R{i} and /docs/invoice_{i}.pdf, ask @billing{i} \
         in #accounts{i}, quote ACC-{i}-77 and order_{i}_x. Thanks, team {i}."
    )
}

/// A tool with ten string arguments of every role.
fn ten_string_spec() -> ToolSpec {
    let mut spec = ToolSpec::new("wire", "d", json!({}), json!({}));
    let field = |name: &str, kind| FieldSpec::new(name).with_kind(kind);
    spec.fields = vec![
        field("to_iban", FieldKind::Identifier),
        field("notify", FieldKind::Email),
        field("cc", FieldKind::Email),
        field("callback", FieldKind::Url),
        field("phone", FieldKind::Text),
        field("invoice", FieldKind::Identifier),
        field("attachment", FieldKind::Path),
        field("payee", FieldKind::Name),
        field("memo", FieldKind::Text),
        field("note", FieldKind::Text),
    ];
    spec.fields[0].role = Some(toolguard::Role::Destination);
    spec
}

fn origins_bench(c: &mut Criterion) {
    let key = ValueKey::from_host_keys(&toolguard::HostKeys::new("k1", [7u8; 32]).unwrap());
    let sources: Vec<Source> = (0..256)
        .map(|i| Source::host(format!("mail {i}"), i as u64).with_text(&key, &source_text(i)))
        .collect();
    let values: usize = sources.iter().map(|s| s.values.len()).sum();
    let trusted: Vec<Source> = (0..8)
        .map(|i| {
            Source::trusted("user input", i).with_text(
                &key,
                &format!(
                    "send 120.50 to DE89 3704 0044 0532 0130 0{i} and tell ann{i}@example.com"
                ),
            )
        })
        .collect();
    let index = ValueIndex::new(&sources, &trusted);
    let spec = ten_string_spec();
    let args = json!({
        "to_iban": "GB17BUKB20201555550017",
        "notify": "ann3@example.com",
        "cc": "sender200@mail200.example",
        "callback": "https://portal42.example/pay/42?ref=R42",
        "phone": "+44 20 7946 0099",
        "invoice": "INV-77-2024",
        "attachment": "/docs/report.pdf",
        "payee": "Ann Example",
        "memo": "March rent, as agreed",
        "note": "Thanks! Details at https://portal9.example/status",
    });
    let got = origins(&spec, &args, &index, &key);
    assert_eq!(got.len(), 10);
    assert!(
        got.iter().filter(|o| o.origin.is_untrusted()).count() >= 5,
        "{got:?}"
    );
    eprintln!(
        "provenance: 256 sources hold {values} values ({} per source)",
        values / 256
    );
    let mut group = c.benchmark_group("provenance");
    group.bench_function("origins_10_args_256_sources", |b| {
        b.iter(|| origins(&spec, std::hint::black_box(&args), &index, &key));
    });
    group.bench_function("value_index_256_sources", |b| {
        b.iter(|| ValueIndex::new(std::hint::black_box(&sources), &trusted));
    });
    // Reading one untrusted e-mail's values as it becomes a source: prose around the values,
    // about 2 KB.
    let mail = (0..6)
        .map(|i| {
            format!(
                "Dear customer, we looked at your account at the branch and it is all in order. \
                 {} Kind regards, the team. ",
                source_text(i)
            )
        })
        .collect::<String>();
    group.bench_function("source_text_2kb", |b| {
        b.iter(|| Source::host("mail", 0).with_text(&key, std::hint::black_box(&mail)));
    });
    group.finish();
}

criterion_group!(benches, provenance, origins_bench);
criterion_main!(benches);
