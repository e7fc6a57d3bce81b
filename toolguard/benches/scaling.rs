//! Throughput of the low-risk read with 64 concurrent tasks against one task, on a multi-thread
//! runtime with one worker per core: how far the pipeline scales across cores (shared locks on
//! the call path show up as a ratio well below the core count).
//!
//! ```sh
//! cargo bench -p toolguard-rs --bench scaling
//! ```
//!
//! Prints calls per second for 1 and 64 tasks (the best of five rounds each) and their ratio.

use std::sync::Arc;
use std::time::Instant;

#[path = "support/calls.rs"]
mod calls;

use calls::Fixture;

/// Calls per round, split evenly between the tasks.
const CALLS: usize = 64 * 400;
/// Rounds per setting; the best is reported (the machine is shared).
const ROUNDS: usize = 5;

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
    let best = |tasks| {
        (0..ROUNDS)
            .map(|_| round(&rt, &fixture, tasks))
            .fold(0.0_f64, f64::max)
    };
    let one = best(1);
    let many = best(64);
    println!("low-risk read, {workers} worker threads, {CALLS} calls a round, best of {ROUNDS}");
    println!("   1 task : {one:>10.0} calls/s");
    println!("  64 tasks: {many:>10.0} calls/s");
    println!("  scaling : {:.2}x (target >= 1.9x on 2 cores)", many / one);
}
