//! What the provenance flow check costs per call.
//!
//! - `provenance/clean`: a state-changing low-risk call in a session with no source (the
//!   session's sources are read from the store, none applies).
//! - `provenance/tainted`: the same call in a session with three sources (read, judged by the
//!   flow policy, their ids written to the audit entry; the default policy lets a low-risk state
//!   change run, so both calls execute and differ only by the flow check).
//! - `provenance/action`: `FlowPolicy::action` alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolguard::provenance::FlowPolicy;
use toolguard::sanitize::Sanitizer;
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

criterion_group!(benches, provenance);
criterion_main!(benches);
