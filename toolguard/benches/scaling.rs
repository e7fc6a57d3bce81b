//! Throughput of the low-risk read with 64 concurrent tasks against one task, on a multi-thread
//! runtime with one worker per core: how far the pipeline scales across cores (shared locks on
//! the call path show up as a ratio well below the core count).
//!
//! ```sh
//! cargo bench -p toolguard-rs --bench scaling
//! ```
//!
//! Each task is one agent session with its own principal, as a server holds one per
//! authenticated session. Beside the pipeline the bench runs a reference workload that shares
//! nothing between tasks (parsing the same arguments, formatting and hashing them, about as long
//! as a call): its ratio is what the machine allows at that moment, since a shared virtual
//! machine's second core is not always a whole core. The four settings alternate round by round.
//!
//! Prints the best calls per second for 1 and 64 tasks over nine rounds of each setting, and for
//! the pipeline and the reference the median of the rounds' ratios with their range.

use std::sync::Arc;
use std::time::Instant;

#[path = "support/calls.rs"]
mod calls;

use calls::Fixture;

/// Calls per round, split evenly between the tasks.
const CALLS: usize = 64 * 400;
/// Rounds of each setting; the median ratio is reported (the machine is shared).
const ROUNDS: usize = 9;

/// What a round's tasks run.
#[derive(Clone, Copy)]
enum Work {
    /// The low-risk read through the pipeline.
    Pipeline,
    /// The reference workload, which shares nothing.
    Reference,
}

/// The principal of agent session `n` (the tenant is the same for all).
fn agent_session(n: usize) -> toolguard::Principal {
    toolguard::Principal::new("acme", format!("agent-{n}"), format!("session-{n}"))
}

/// One unit of the reference workload: the read's arguments parsed, formatted and hashed
/// (SHA-256 over about 500 bytes), all in memory of its own.
fn reference_call(n: u64) -> usize {
    let mut len = 0;
    for k in 0..3 {
        let args: serde_json::Value =
            serde_json::from_str(calls::LOW_ARGS).expect("the read's arguments parse");
        let text = format!("{args}{n}{k}").repeat(16);
        len += toolguard::digest::sha256_hex(text.as_bytes()).len();
    }
    len
}

/// Calls per second of one round of `work` with `tasks` concurrent tasks.
fn round(rt: &tokio::runtime::Runtime, fixture: &Arc<Fixture>, work: Work, tasks: usize) -> f64 {
    let per_task = CALLS / tasks;
    let started = Instant::now();
    rt.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|session| {
                let fixture = fixture.clone();
                tokio::spawn(async move {
                    let principal = agent_session(session);
                    for n in 0..per_task {
                        match work {
                            Work::Pipeline => {
                                let outcome = fixture.low_as(&principal).await;
                                assert_eq!(outcome.status, toolguard::Status::Ok);
                            }
                            Work::Reference => {
                                std::hint::black_box(reference_call(n as u64));
                            }
                        }
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

/// Throughput of one setting over the rounds, and the ratio of each round.
#[derive(Default)]
struct Series {
    ones: Vec<f64>,
    manys: Vec<f64>,
    ratios: Vec<f64>,
}

impl Series {
    fn push(&mut self, one: f64, many: f64) {
        self.ones.push(one);
        self.manys.push(many);
        self.ratios.push(many / one);
    }

    fn print(&mut self, name: &str, target: &str) {
        self.ratios.sort_by(f64::total_cmp);
        let best = |v: &[f64]| v.iter().copied().fold(0.0_f64, f64::max);
        println!("{name}");
        println!("   1 task :  {:>10.0} calls/s (best)", best(&self.ones));
        println!("  64 tasks:  {:>10.0} calls/s (best)", best(&self.manys));
        println!(
            "  scaling :  {:.2}x median of the rounds [{:.2}x .. {:.2}x]{target}",
            self.ratios[ROUNDS / 2],
            self.ratios[0],
            self.ratios[ROUNDS - 1]
        );
    }
}

fn main() {
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let fixture = Arc::new(Fixture::new(&rt));
    // The settings alternate round by round, so that a slow spell of a shared machine hits all
    // alike; each round of a setting gives one ratio.
    let mut pipeline = Series::default();
    let mut reference = Series::default();
    for _ in 0..ROUNDS {
        let one = round(&rt, &fixture, Work::Pipeline, 1);
        let many = round(&rt, &fixture, Work::Pipeline, 64);
        pipeline.push(one, many);
        let one = round(&rt, &fixture, Work::Reference, 1);
        let many = round(&rt, &fixture, Work::Reference, 64);
        reference.push(one, many);
    }
    println!("{workers} worker threads, {CALLS} calls a round, {ROUNDS} rounds of each setting");
    pipeline.print(
        "low-risk read (one agent session a task)",
        " (target >= 1.9x on 2 cores)",
    );
    reference.print("reference workload (shares nothing)", "");
}
