//! Throughput of the low-risk read with 64 concurrent tasks against one task, on a multi-thread
//! runtime with one worker per core: how far the pipeline scales across cores (shared locks on
//! the call path show up as a ratio well below the core count).
//!
//! ```sh
//! cargo bench -p toolguard-benches --bench scaling
//! ```
//!
//! Each task is one agent session with its own principal, as a server holds one per
//! authenticated session. Beside the pipeline the bench runs a reference workload that shares
//! nothing between tasks (parsing the same arguments, formatting and hashing them, about as long
//! as a call): its ratio is what the machine allows at that moment, since a shared virtual
//! machine's second core is not always a whole core. The four settings alternate round by round.
//!
//! Every round starts from an empty audit trail (emptied outside the timing), so that rounds
//! measure calls alike rather than the growth of one trail over all of them
//! (`TOOLGUARD_SCALING_KEEP_TRAIL=1` keeps it: 18 pipeline rounds then leave 460 800 entries,
//! and the fresh pages the trail faults in, some under the sink's lock, cost the 64-task rounds
//! more than the one-task rounds).
//!
//! Prints the best calls per second for 1 and 64 tasks over nine rounds of each setting, and for
//! the pipeline and the reference the median of the rounds' ratios with their range. Where the
//! kernel keeps per-thread CPU time (`/proc/self/task/*/schedstat`), it also prints how many
//! CPUs 64 tasks keep busy and how much more CPU time a call costs among 64 tasks than alone:
//! the ratio is about the first divided by the second, so the two tell whether waiting (a lock)
//! or contention (shared cache lines) holds it back.

use std::sync::Arc;
use std::time::Instant;

#[path = "support/calls.rs"]
mod calls;

use calls::Fixture;

/// Calls per round, split evenly between the tasks.
const CALLS: usize = 64 * 400;
/// Set (to anything) to keep the trail across rounds, as before rounds started empty: the
/// trail then grows to every call of the run, and the rounds measure its growth too.
const KEEP_TRAIL: &str = "TOOLGUARD_SCALING_KEEP_TRAIL";
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

/// CPU time all threads of the process have run, in nanoseconds (the first field of each
/// thread's `/proc/self/task/<tid>/schedstat`); `None` where the kernel does not keep it.
fn cpu_nanos() -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let stat = std::fs::read_to_string(task.ok()?.path().join("schedstat")).ok()?;
        total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// What one round measured.
struct Round {
    /// Calls per second.
    rate: f64,
    /// CPU time per call, in nanoseconds, over all threads.
    cpu_per_call: Option<f64>,
    /// CPUs busy on average during the round.
    busy: Option<f64>,
}

/// One round of `work` with `tasks` concurrent tasks.
fn round(rt: &tokio::runtime::Runtime, fixture: &Arc<Fixture>, work: Work, tasks: usize) -> Round {
    let per_task = CALLS / tasks;
    // Every round starts from an empty trail, its storage freed outside the timing (unless
    // asked to keep it).
    if std::env::var_os(KEEP_TRAIL).is_none() {
        drop(fixture.trail.with_storage(std::mem::take));
    }
    let cpu_before = cpu_nanos();
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
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_nanos()
        .zip(cpu_before)
        .map(|(after, before)| after.saturating_sub(before) as f64);
    let calls = (per_task * tasks) as f64;
    Round {
        rate: calls / wall,
        cpu_per_call: cpu.map(|ns| ns / calls),
        busy: cpu.map(|ns| ns / 1e9 / wall),
    }
}

/// One setting over the rounds: throughput, the ratio of each round, and where the CPU went.
#[derive(Default)]
struct Series {
    ones: Vec<f64>,
    manys: Vec<f64>,
    ratios: Vec<f64>,
    /// CPU time per call with 64 tasks over that with one, per round.
    cpu_costs: Vec<f64>,
    /// CPUs busy with 64 tasks, per round.
    busy: Vec<f64>,
}

/// The median of `v` (sorted in place); 0 when empty.
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or_default()
}

impl Series {
    fn push(&mut self, one: Round, many: Round) {
        self.ones.push(one.rate);
        self.manys.push(many.rate);
        self.ratios.push(many.rate / one.rate);
        if let (Some(a), Some(b)) = (one.cpu_per_call, many.cpu_per_call) {
            self.cpu_costs.push(b / a);
        }
        self.busy.extend(many.busy);
    }

    fn print(&mut self, name: &str, target: &str) {
        let best = |v: &[f64]| v.iter().copied().fold(0.0_f64, f64::max);
        let ratio = median(&mut self.ratios);
        println!("{name}");
        println!("   1 task :  {:>10.0} calls/s (best)", best(&self.ones));
        println!("  64 tasks:  {:>10.0} calls/s (best)", best(&self.manys));
        println!(
            "  scaling :  {ratio:.2}x median of the rounds [{:.2}x .. {:.2}x]{target}",
            self.ratios[0],
            self.ratios[self.ratios.len() - 1]
        );
        // The ratio is the CPUs kept busy over the extra CPU a call costs when tasks run side
        // by side (shared cache lines, lock hand-overs): these two tell which one holds it back.
        if !self.busy.is_empty() && !self.cpu_costs.is_empty() {
            println!(
                "  64 tasks keep {:.2} CPUs busy; a call costs {:.2}x the CPU time it costs alone \
                 (medians)",
                median(&mut self.busy),
                median(&mut self.cpu_costs)
            );
        }
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
