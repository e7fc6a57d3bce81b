//! What a transfer costs as the memory stores fill up: the time per call and the pages the
//! process takes from the kernel per call, for a transfer with a fresh key on stores that already
//! hold a given number of keys, beside the low-risk read (which keeps nothing) on the same
//! dispatcher.
//!
//! The `trail_emptied/high_risk` row of the `dispatch` bench runs on idempotency and operation
//! stores that keep every key of the run, so its figure depends on how many calls criterion
//! chose to make, and with it on how much fresh memory the process has asked the kernel for.
//! This bench fixes the number of keys held instead: for each count it builds a dispatcher,
//! fills its stores with that many transfers (the trail emptied every 10 000 calls, as in the
//! `trail_emptied` rows), then times batches of 10 000 transfers and 10 000 reads, each batch
//! after an emptying of the trail and untimed settling calls. It prints, per count, the median
//! over the batches of the microseconds per call and the minor page faults per call (read from
//! `/proc/self/stat`; a dash where there is no such file).
//!
//! ```sh
//! cargo bench -p toolguard-benches --bench store_growth
//! cargo bench -p toolguard-benches --bench store_growth -- --keys 0,500000,1000000 --batches 5
//! ```

use std::time::{Duration, Instant};

#[path = "support/calls.rs"]
mod calls;

use calls::{Fixture, runtime};

/// Calls per timed batch, and between two emptyings of the trail while filling.
const BATCH: u64 = 10_000;
/// Untimed calls after each emptying (see `emptied` in the `dispatch` bench).
const SETTLE_CALLS: u64 = 200;

/// Minor page faults of this process so far, where Linux tells them.
fn minor_faults() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces) start at the state, field 3;
    // minflt is field 10.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(7)?.parse().ok()
}

/// What one timed batch took: its time and page faults.
struct Batch {
    time: Duration,
    faults: Option<u64>,
}

/// Runs `BATCH` calls of `kind` after an emptying of the trail and the settling calls.
fn batch(rt: &tokio::runtime::Runtime, fixture: &Fixture, kind: Kind) -> Batch {
    fixture.trail.with_storage(Vec::clear);
    rt.block_on(async {
        for _ in 0..SETTLE_CALLS {
            std::hint::black_box(fixture.low().await);
        }
    });
    let calls: Vec<_> = match kind {
        Kind::Transfer => (0..BATCH).map(|_| Some(fixture.high_call())).collect(),
        Kind::Read => (0..BATCH).map(|_| None).collect(),
    };
    let faults = minor_faults();
    let started = Instant::now();
    rt.block_on(async {
        for call in calls {
            let outcome = match call {
                Some(call) => fixture.dispatcher.dispatch(call, &fixture.principal).await,
                None => fixture.low().await,
            };
            std::hint::black_box(outcome);
        }
    });
    let time = started.elapsed();
    Batch {
        time,
        faults: faults.zip(minor_faults()).map(|(a, b)| b - a),
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Transfer,
    Read,
}

/// The median time per call and the median faults per call over `batches`.
fn medians(batches: &[Batch]) -> (f64, Option<f64>) {
    let mut times: Vec<f64> = batches
        .iter()
        .map(|b| b.time.as_secs_f64() * 1e6 / BATCH as f64)
        .collect();
    times.sort_by(f64::total_cmp);
    let faults: Option<Vec<f64>> = batches
        .iter()
        .map(|b| b.faults.map(|f| f as f64 / BATCH as f64))
        .collect();
    let faults = faults.map(|mut f| {
        f.sort_by(f64::total_cmp);
        f[f.len() / 2]
    });
    (times[times.len() / 2], faults)
}

fn faults(f: Option<f64>) -> String {
    f.map_or_else(|| "—".to_owned(), |f| format!("{f:.3}"))
}

/// The value after `flag` on the command line, split at commas.
fn list(flag: &str) -> Option<Vec<u64>> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == flag)?;
    let value = args.get(at + 1)?;
    Some(
        value
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("{flag} takes numbers separated by commas"))
            })
            .collect(),
    )
}

fn main() {
    // Run as `cargo bench`, which passes `--bench`; anything else (`cargo test --benches`) only
    // checks that the bench builds.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let counts =
        list("--keys").unwrap_or_else(|| vec![0, 100_000, 300_000, 600_000, 900_000, 1_200_000]);
    let batches = list("--batches").map_or(5, |b| b[0].max(1));
    let rt = runtime();
    println!(
        "| keys held | transfer µs/call | page faults/call | read µs/call | page faults/call |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for keys in counts {
        let fixture = Fixture::new(&rt);
        let mut filled = 0;
        while filled < keys {
            let n = BATCH.min(keys - filled);
            fixture.trail.with_storage(Vec::clear);
            rt.block_on(async {
                for _ in 0..n {
                    std::hint::black_box(fixture.high().await);
                }
            });
            filled += n;
        }
        let mut transfers = Vec::new();
        let mut reads = Vec::new();
        for _ in 0..batches {
            transfers.push(batch(&rt, &fixture, Kind::Transfer));
            reads.push(batch(&rt, &fixture, Kind::Read));
        }
        let (transfer, transfer_faults) = medians(&transfers);
        let (read, read_faults) = medians(&reads);
        println!(
            "| {keys} | {transfer:.2} | {} | {read:.2} | {} |",
            faults(transfer_faults),
            faults(read_faults)
        );
    }
}
