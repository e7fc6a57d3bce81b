//! What the guard pipeline costs per call (criterion medians). The calls are those of
//! `benches/support/calls.rs`, which the instruction-count (`instructions`) and allocation
//! (`allocations`) benches measure too.
//!
//! - `direct`: the read's handler called as plain Rust.
//! - `pipeline/low_risk`: a low-risk read with one identifier argument through
//!   `Dispatcher::dispatch` (gate, parse, registry, schema validation, sanitization, intent,
//!   principal, authorization, policy, execution under a deadline, output validation, audit
//!   entry with its hash chain, metrics).
//! - `pipeline/high_risk`: an idempotent high-risk transfer with a fresh key each call (adds the
//!   idempotency reservation and completion, the operation record, the recheck).
//! - `pipeline/replay`: the same transfer replayed from the idempotency store.
//!
//! `cargo bench -p toolguard-rs --bench dispatch`

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

#[path = "support/calls.rs"]
mod calls;

use calls::{Fixture, runtime};

fn dispatch(c: &mut Criterion) {
    let rt = runtime();
    let fixture = Fixture::new(&rt);
    let mut g = c.benchmark_group("dispatch");
    g.bench_function("direct", |b| b.to_async(&rt).iter(|| fixture.direct()));
    g.bench_function("pipeline/low_risk", |b| {
        b.to_async(&rt).iter(|| fixture.low())
    });
    g.bench_function("pipeline/high_risk", |b| {
        b.to_async(&rt).iter_batched(
            || fixture.high_call(),
            |call| fixture.dispatcher.dispatch(call, &fixture.principal),
            BatchSize::SmallInput,
        )
    });
    g.bench_function("pipeline/replay", |b| {
        b.to_async(&rt).iter(|| fixture.replay())
    });
    g.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
