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
//! The memory audit sink keeps every entry, so over a run of millions of calls the process grows
//! by about a kilobyte a call and part of each median is the kernel handing out fresh pages. The
//! `trail_emptied/*` rows run the same calls but empty the trail every 10 000 calls, outside the
//! timing: every entry is still sealed, linked and stored, as in a sink that writes its entries
//! out, and the memory is reused instead of grown.
//!
//! `cargo bench -p toolguard-rs --bench dispatch`

use std::future::Future;
use std::time::{Duration, Instant};

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

    let mut g = c.benchmark_group("trail_emptied");
    g.bench_function("low_risk", |b| {
        b.iter_custom(|iters| emptied(&rt, &fixture, iters, |_| (), |()| fixture.low()))
    });
    g.bench_function("high_risk", |b| {
        b.iter_custom(|iters| {
            let dispatch = |call| fixture.dispatcher.dispatch(call, &fixture.principal);
            emptied(&rt, &fixture, iters, |_| fixture.high_call(), dispatch)
        })
    });
    g.bench_function("replay", |b| {
        b.iter_custom(|iters| emptied(&rt, &fixture, iters, |_| (), |()| fixture.replay()))
    });
    g.finish();
}

/// Calls between two emptyings of the audit trail.
const EMPTY_EVERY: u64 = 10_000;
/// Untimed calls after an emptying.
const SETTLE_CALLS: u64 = 200;

/// The time `iters` calls take, each made of what `prepare` gives (before the timing), with the
/// audit trail emptied before every [`EMPTY_EVERY`] calls, outside the timing. Untimed calls
/// follow each emptying: after a mass free glibc's allocator sorts the freed blocks a slice at a
/// time over its next requests (up to a millisecond a call at first), work that belongs to the
/// emptying, not to the timed calls.
fn emptied<T, F: Future>(
    rt: &tokio::runtime::Runtime,
    fixture: &Fixture,
    iters: u64,
    prepare: impl Fn(u64) -> T,
    call: impl Fn(T) -> F,
) -> Duration {
    let mut timed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(EMPTY_EVERY);
        fixture.trail.with_storage(Vec::clear);
        rt.block_on(async {
            for _ in 0..SETTLE_CALLS {
                std::hint::black_box(fixture.low().await);
            }
        });
        let inputs: Vec<T> = (0..n).map(&prepare).collect();
        let started = Instant::now();
        rt.block_on(async {
            for input in inputs {
                std::hint::black_box(call(input).await);
            }
        });
        timed += started.elapsed();
        left -= n;
    }
    timed
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
