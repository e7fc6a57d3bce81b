//! Instruction counts of one guarded call under callgrind (gungraun), with the budgets of each
//! call as hard limits: a count over its budget is reported as a regression
//! (`Instructions: N ... exceeds limit`, exit status 3).
//!
//! Needs valgrind and the runner of the same version as the `gungraun` crate:
//!
//! ```sh
//! cargo install gungraun-runner --version 0.20.0 --locked
//! cargo bench -p toolguard-benches --bench instructions
//! ```
//!
//! Callgrind runs the software SHA-256 path (it hides SHA-NI), so the counts include it.

use std::hint::black_box;

use gungraun::{
    Callgrind, EventKind, LibraryBenchmarkConfig, library_benchmark, library_benchmark_group, main,
};
use serde_json::Value;
use toolguard::ToolOutcome;
use toolguard::sanitize::Sanitizer;
use toolguard::spec::ToolSpec;

#[path = "support/calls.rs"]
mod calls;
#[path = "support/transfer_fields.rs"]
mod transfer_fields;

use calls::{BUDGETS, Fixture, runtime};

/// Instruction budget of the sanitizer with five clean ASCII fields.
const SANITIZE_BUDGET: u64 = 10_000;

/// Everything a measured call needs, built (and warmed) outside the measurement.
type Setup = (
    tokio::runtime::Runtime,
    Fixture,
    Option<toolguard::ToolCall>,
);

fn setup() -> Setup {
    let rt = runtime();
    let fixture = Fixture::new(&rt);
    let call = Some(fixture.high_call());
    (rt, fixture, call)
}

fn limit(call: &str) -> LibraryBenchmarkConfig {
    let budget = BUDGETS
        .iter()
        .find(|(name, _, _)| *name == call)
        .map_or(SANITIZE_BUDGET, |(_, instructions, _)| *instructions);
    let mut config = LibraryBenchmarkConfig::default();
    config.tool(Callgrind::default().hard_limits([(EventKind::Ir, budget)]));
    config
}

// The low-risk read.
#[library_benchmark(config = limit("low"))]
#[bench::call(setup = setup)]
fn low((rt, fixture, _): Setup) -> (tokio::runtime::Runtime, Fixture, ToolOutcome) {
    let outcome = rt.block_on(fixture.low());
    (rt, fixture, black_box(outcome))
}

// A high-risk transfer with a fresh key (the arguments are made in the setup).
#[library_benchmark(config = limit("high"))]
#[bench::call(setup = setup)]
fn high((rt, fixture, call): Setup) -> (tokio::runtime::Runtime, Fixture, ToolOutcome) {
    let call = call.unwrap_or_else(|| fixture.high_call());
    let outcome = rt.block_on(fixture.dispatcher.dispatch(call, &fixture.principal));
    (rt, fixture, black_box(outcome))
}

// The transfer replayed from its stored outcome.
#[library_benchmark(config = limit("replay"))]
#[bench::call(setup = setup)]
fn replay((rt, fixture, _): Setup) -> (tokio::runtime::Runtime, Fixture, ToolOutcome) {
    let outcome = rt.block_on(fixture.replay());
    (rt, fixture, black_box(outcome))
}

/// The transfer's five fields, as `benches/sanitize.rs` sanitizes them.
fn sanitize_setup() -> (Sanitizer, ToolSpec, Value) {
    let (sanitizer, spec) = (transfer_fields::sanitizer(), transfer_fields::spec());
    let args = transfer_fields::args(transfer_fields::ASCII_MEMO);
    // Warm the lazily compiled tables.
    let mut warm = args.clone();
    sanitizer.sanitize(&spec, &mut warm);
    (sanitizer, spec, args)
}

// The sanitizer on five clean ASCII fields.
#[library_benchmark(config = limit("sanitize"))]
#[bench::ascii_clean(setup = sanitize_setup)]
fn sanitize_five(
    (sanitizer, spec, mut args): (Sanitizer, ToolSpec, Value),
) -> (Sanitizer, ToolSpec, Value) {
    black_box(sanitizer.sanitize(&spec, &mut args));
    // Everything is returned, so that dropping the fixture is not measured.
    (sanitizer, spec, args)
}

library_benchmark_group!(
    name = calls_group,
    benchmarks = [low, high, replay, sanitize_five]
);

main!(library_benchmark_groups = calls_group);
