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
//! out, and the memory is reused instead of grown. The transfer's memory idempotency and
//! operation stores still keep every key of the run there; `fresh_stores/high_risk` runs the
//! transfer on a fixture built anew every 10 000 calls (outside the timing), so that its stores
//! and trail hold at most that many calls' records, as a store that expires them would.
//!
//! The `floor/*` rows measure, for each of the three calls, only the work the framework's
//! contract fixes, however the rest of the pipeline is written: the typed parse of the call's
//! arguments (the JSON text parsed, then decoded into the tool's argument struct), their check
//! against the tool's input schema, the request digest (SHA-256 over the canonical request) and
//! sealing the call's own audit entry as the trail holds it (its canonical JSON under
//! HMAC-SHA256, the chain format every sink and verifier reads). A call cannot cost less than
//! its floor on the same machine; the gap between the two is what the pipeline itself adds.
//!
//! `cargo bench -p toolguard-benches --bench dispatch`

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::Value;
use toolguard::audit::AuditEntry;
use toolguard::{HostKeys, ToolOutcome};

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

    let mut g = c.benchmark_group("fresh_stores");
    g.bench_function("high_risk", |b| {
        b.iter_custom(|iters| fresh_transfers(&rt, iters))
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

/// The time `iters` transfers take on a fixture built anew (outside the timing) before every
/// [`EMPTY_EVERY`] of them: the trail and the memory stores then hold at most that many calls'
/// records, where the `trail_emptied` transfers run on idempotency and operation stores that
/// keep every key of the run.
fn fresh_transfers(rt: &tokio::runtime::Runtime, iters: u64) -> Duration {
    let mut timed = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(EMPTY_EVERY);
        let fixture = Fixture::new(rt);
        rt.block_on(async {
            for _ in 0..SETTLE_CALLS {
                black_box(fixture.high().await);
            }
        });
        let calls: Vec<_> = (0..n).map(|_| fixture.high_call()).collect();
        let started = Instant::now();
        rt.block_on(async {
            for call in calls {
                black_box(fixture.dispatcher.dispatch(call, &fixture.principal).await);
            }
        });
        timed += started.elapsed();
        left -= n;
    }
    timed
}

/// The contract's fixed work per call: typed parse, schema check, request digest, seal of the
/// call's audit entry. The low-risk read's parts are also measured apart
/// (`floor/low_risk:<part>`).
fn floor(c: &mut Criterion) {
    let rt = runtime();
    let fixture = Fixture::new(&rt);
    let keys = Arc::new(HostKeys::ephemeral());
    let high_args = calls::high_args(u64::MAX);
    let high_call = toolguard::ToolCall::new("call-high", "transfer", high_args.as_str());
    let high = rt.block_on(fixture.dispatcher.dispatch(high_call, &fixture.principal));
    let low = Floor::new(
        &fixture,
        calls::LOW_ARGS,
        "get_balance",
        typed::<calls::GetBalanceArgs>,
        rt.block_on(fixture.low()),
    );
    let transfer = typed::<calls::TransferArgs>;
    let rows = [
        (
            "high_risk",
            Floor::new(&fixture, &high_args, "transfer", transfer, high),
        ),
        (
            "replay",
            Floor::new(
                &fixture,
                calls::REPLAY_ARGS,
                "transfer",
                transfer,
                rt.block_on(fixture.replay()),
            ),
        ),
    ];
    let mut g = c.benchmark_group("floor");
    g.bench_function("low_risk", |b| b.iter(|| low.all(&keys)));
    for (row, work) in &rows {
        g.bench_function(*row, |b| b.iter(|| work.all(&keys)));
    }
    let args = low.parse();
    g.bench_function("low_risk:parse", |b| b.iter(|| low.parse()));
    g.bench_function("low_risk:schema", |b| b.iter(|| low.check(&args)));
    g.bench_function("low_risk:digest", |b| b.iter(|| low.digest(&args)));
    g.bench_function("low_risk:seal", |b| b.iter(|| low.seal(&keys)));
    g.finish();
}

/// One call's fixed work: its raw arguments, its tool, the tool's argument struct and input
/// schema, and the audit entry the trail holds for it.
struct Floor<'a> {
    raw: &'a str,
    tool: &'a str,
    decode: fn(&Value) -> bool,
    schema: jsonschema::Validator,
    entry: AuditEntry,
}

/// Decodes `args` into the tool's argument struct `T` (whether it decoded).
fn typed<T: serde::de::DeserializeOwned>(args: &Value) -> bool {
    black_box(T::deserialize(args)).is_ok()
}

impl<'a> Floor<'a> {
    fn new(
        fixture: &Fixture,
        raw: &'a str,
        tool: &'a str,
        decode: fn(&Value) -> bool,
        outcome: ToolOutcome,
    ) -> Self {
        assert_eq!(outcome.status, toolguard::Status::Ok, "{outcome:?}");
        let entry = outcome
            .audit_seq
            .and_then(|seq| fixture.trail.get(seq))
            .expect("the call's audit entry");
        let spec = fixture.dispatcher.spec(tool).expect("the tool");
        let schema = jsonschema::validator_for(&spec.input_schema).expect("the input schema");
        Floor {
            raw,
            tool,
            decode,
            schema,
            entry,
        }
    }

    /// The arguments parsed and decoded into the tool's struct, without the idempotency key
    /// (the request digest leaves it out).
    fn parse(&self) -> Value {
        let mut args: Value = serde_json::from_str(black_box(self.raw)).expect("the arguments");
        assert!((self.decode)(&args), "the arguments decode");
        if let Some(map) = args.as_object_mut() {
            map.remove("idempotency_key");
        }
        args
    }

    /// The arguments checked against the tool's input schema.
    fn check(&self, args: &Value) -> bool {
        self.schema.is_valid(black_box(args))
    }

    fn digest(&self, args: &Value) -> String {
        toolguard::digest::request_digest(self.tool, 1, black_box(args), "acme", "alice")
    }

    fn seal(&self, keys: &Arc<HostKeys>) -> AuditEntry {
        let entry = &self.entry;
        toolguard::audit::seal(keys, entry.seq, entry.record.clone(), &entry.prev_hash)
    }

    fn all(&self, keys: &Arc<HostKeys>) -> (bool, String, AuditEntry) {
        let args = self.parse();
        (self.check(&args), self.digest(&args), self.seal(keys))
    }
}

criterion_group!(benches, dispatch, floor);
criterion_main!(benches);
