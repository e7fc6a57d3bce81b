//! Throughput of the low-risk read with 64 concurrent tasks against one task, on a multi-thread
//! runtime with one worker per core: how far the pipeline scales across cores (shared locks on
//! the call path show up as a ratio well below the core count).
//!
//! ```sh
//! cargo bench -p toolguard-rs --bench scaling
//! ```
//!
//! Prints the best calls per second for 1 and 64 tasks over nine alternating pairs of rounds, and
//! the median of the pairs' ratios with their range.

use std::sync::Arc;
use std::time::Instant;

#[path = "support/calls.rs"]
mod calls;

use calls::Fixture;

/// Calls per round, split evenly between the tasks.
const CALLS: usize = 64 * 400;
/// Alternating pairs of rounds (one task, then 64); the median ratio is reported (the machine
/// is shared).
const ROUNDS: usize = 9;

/// Calls per second of one round with `tasks` concurrent tasks.
fn round(rt: &tokio::runtime::Runtime, fixture: &Arc<Fixture>, tasks: usize) -> f64 {
    let per_task = CALLS / tasks;
    let started = Instant::now();
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let fixture = fixture.clone();
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        let outcome = fixture.low().await;
                        assert_eq!(outcome.status, toolguard::Status::Ok);
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.await.expect("a bench task");
        }
    });
    (per_task * tasks) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let fixture = Arc::new(Fixture::new(&rt));
    // The two settings alternate round by round, so that a slow spell of a shared machine hits
    // both alike; each pair gives one ratio, and the median ratio is reported beside the best
    // throughput of each setting.
    let mut ones = Vec::with_capacity(ROUNDS);
    let mut manys = Vec::with_capacity(ROUNDS);
    let mut ratios = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let one = round(&rt, &fixture, 1);
        let many = round(&rt, &fixture, 64);
        ones.push(one);
        manys.push(many);
        ratios.push(many / one);
    }
    ratios.sort_by(f64::total_cmp);
    let best = |v: &[f64]| v.iter().copied().fold(0.0_f64, f64::max);
    println!(
        "low-risk read, {workers} worker threads, {CALLS} calls a round, {ROUNDS} alternating pairs"
    );
    println!("   1 task : {:>10.0} calls/s (best)", best(&ones));
    println!("  64 tasks: {:>10.0} calls/s (best)", best(&manys));
    println!(
        "  scaling : {:.2}x median of the pairs [{:.2}x .. {:.2}x] (target >= 1.9x on 2 cores)",
        ratios[ROUNDS / 2],
        ratios[0],
        ratios[ROUNDS - 1]
    );
}
