//! What the guard pipeline costs per call.
//!
//! - `direct`: the handler function called as plain Rust.
//! - `pipeline/low_risk`: the same tool through `Dispatcher::dispatch` (parse, registry, schema
//!   validation, sanitization, preflight, principal, authorization, policy, execution under a
//!   deadline on its own task, output validation, audit entry with hash chain, metrics).
//! - `pipeline/high_risk`: an idempotent high-risk tool with a fresh key each call (adds the
//!   request digest, idempotency reservation and completion, operation records, recheck).
//! - `pipeline/replay`: the same high-risk call replayed from the idempotency store.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolguard::{Dispatcher, MemoryAuditSink, Principal, ToolCall, ToolContext, ToolError, tool};

/// Shared state of the bench tools.
#[derive(Default)]
struct Counter {
    n: AtomicU64,
}

/// Adds `by` to a counter and returns the new value.
#[tool(risk = "low")]
async fn bump(
    ctx: &ToolContext<Counter>,
    /// Counter label.
    #[arg(kind = "identifier", max_len = 32)]
    label: String,
    /// Increment.
    #[arg(min = 1, max = 100)]
    by: u64,
) -> Result<u64, ToolError> {
    let _ = label;
    Ok(ctx.state().n.fetch_add(by, Ordering::Relaxed) + by)
}

/// Moves an amount; high risk, idempotent.
#[tool(risk = "high", idempotent)]
async fn move_amount(
    ctx: &ToolContext<Counter>,
    /// Source account.
    #[arg(kind = "identifier", max_len = 32)]
    from: String,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 1_000_000)]
    amount: u64,
) -> Result<u64, ToolError> {
    let _ = from;
    Ok(ctx.state().n.fetch_add(amount, Ordering::Relaxed) + amount)
}

fn dispatch(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let state = Arc::new(Counter::default());
    let d = Dispatcher::builder_arc(state.clone())
        .tool(Bump)
        .tool(MoveAmount)
        .audit(MemoryAuditSink::new())
        .build()
        .unwrap();
    let who = Principal::new("acme", "alice", "bench");
    let ctx = ToolContext::new(Arc::new(who.clone()), state.clone(), "call", None);
    let args = r#"{"label":"clicks","by":1}"#;

    let mut g = c.benchmark_group("dispatch");
    g.bench_function("direct", |b| {
        b.to_async(&rt)
            .iter(|| async { bump(&ctx, "clicks".to_owned(), 1).await.unwrap() })
    });
    g.bench_function("pipeline/low_risk", |b| {
        b.to_async(&rt)
            .iter(|| async { d.dispatch(ToolCall::new("c", "bump", args), &who).await })
    });
    let seq = AtomicU64::new(0);
    g.bench_function("pipeline/high_risk", |b| {
        b.to_async(&rt).iter(|| async {
            let n = seq.fetch_add(1, Ordering::Relaxed);
            let args = json!({"from": "acc-1", "amount": 5, "idempotency_key": format!("bench-key-{n:012}")});
            d.dispatch(ToolCall::new("c", "move_amount", args), &who).await
        })
    });
    let replay = r#"{"from":"acc-1","amount":5,"idempotency_key":"bench-replay-key"}"#;
    g.bench_function("pipeline/replay", |b| {
        b.to_async(&rt).iter(|| async {
            d.dispatch(ToolCall::new("c", "move_amount", replay), &who)
                .await
        })
    });
    g.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
