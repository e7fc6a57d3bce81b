//! `crash_harness`: several dispatcher processes (`crash_node`) share one PostgreSQL schema, or
//! one Redis prefix plus PostgreSQL for approvals, operations and the audit trail, or one SQLite
//! file (every store and the trail; the processes of one host); clients send
//! transfers with idempotency keys and retry each key on any process until it gets a terminal
//! answer; the controller SIGKILLs random processes at random moments and restarts them, some
//! armed to abort at a named crash point. After each round it checks, from the stores and the
//! side-effect log, that no key executed twice, no session or subject limit was exceeded, every
//! execution has one terminal audit entry (or was reported `outcome_unknown` and reconciled),
//! the audit chain verifies, and every approval was settled once.
//!
//! ```text
//! cargo run -p toolguard-tests --release --bin crash_harness -- --backend postgres --rounds 200
//! ```
//! Options: `--backend postgres|redis|sqlite`, `--rounds N` (10), `--nodes K` (3), `--clients M` (16),
//! `--round-ms T` (load per round, 2000), `--drain-ms T` (how long after the load a key may
//! take to reach a terminal answer, 10000: a lease left by a killed process, the tool's 1 s
//! deadline + 5 s, must expire and the operation be reconciled), `--keys N` (most keys per
//! client and round, 1000), `--seed S`, `--kill-ms LO-HI` (gap between SIGKILLs, 300-900),
//! `--arm PCT` (percent of restarts armed with a crash point, 50), `--sever-ms LO-HI` (gap
//! between cuts of every process's store connections by the servers, off unless given: their
//! PostgreSQL sessions terminated, their Redis connections closed; not with `sqlite`),
//! `--stall-ms LO-HI` (gap between stalls of the stores, off unless given: every write held for
//! 1 to 3 s, around the processes' 2 s store deadline, so that writes land after their callers
//! stopped waiting), `--stall-len-ms LO-HI` (how long each stall holds, 1000-3000), `--keep`
//! (keep the schema, the Redis keys and the run directory, which holds the SQLite file).
//! `TOOLGUARD_PG_URL` and, for Redis, `TOOLGUARD_REDIS_URL` name the services; the `sqlite`
//! backend needs neither. Violations are printed as they are found, the
//! totals after each round, and the
//! last line printed is a JSON summary; the exit code is 1 when an invariant was violated.

mod admin;
mod checks;
mod clients;
mod cluster;
#[path = "../protocol.rs"]
#[allow(dead_code)]
mod protocol;
mod rng;
mod run;
mod sever;
mod stall;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a Tokio runtime");
    match runtime.block_on(run::main(std::env::args().skip(1).collect())) {
        Ok(summary) => {
            println!("{}", serde_json::to_string(&summary).unwrap_or_default());
            if summary.violations.values().any(|n| *n > 0) {
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("crash_harness: {e}");
            std::process::exit(2);
        }
    }
}
