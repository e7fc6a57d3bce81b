//! Calls/s and per-call latency of the high-risk dispatch of `stores` (an idempotent high-risk
//! tool, a fresh key per call, every store on the backend), on each backend and then on
//! PostgreSQL from several processes at once (needs features `sqlite`, `redis` and `postgres`;
//! the service backends are measured when `TOOLGUARD_PG_URL` / `TOOLGUARD_REDIS_URL` are set).
//!
//! - **Backends**: memory, SQLite (`.sqlite()`), PostgreSQL (trail through
//!   `PgStore::audit_sink`), Redis (idempotency and ledger; approvals, operation records and the
//!   trail in memory) over one connection and over the store's default number of connections
//!   (`TOOLGUARD_REPLICAS_REDIS_CONNECTIONS=n`: over `n` alone).
//!   64 tasks call for a fixed time, a warm-up round and then `TOOLGUARD_REPLICAS_ROUNDS` rounds
//!   (3) of `TOOLGUARD_REPLICAS_SECONDS` seconds (3) each.
//! - **Replicas**: 1, 2 and 4 processes (this binary, started again in child mode) on one
//!   PostgreSQL schema, with 64 tasks in all and then with 64 tasks each. The children connect,
//!   then wait for the parent's `go` line on stdin, so every round starts in all of them at once;
//!   each answers with its calls, its elapsed time and every call's latency, and the parent sums
//!   the calls, divides by the slowest child's time and merges the latencies.
//!
//! Every run has a fresh schema (or key prefix, or file) and removes it afterwards. A row gives
//! the median round's calls/s and the p50 and p99 of every measured call of its rounds. Names
//! after `--` run only those parts: `memory`, `sqlite`, `postgres`, `redis`, `replicas` (the
//! PostgreSQL processes).
//!
//! After each PostgreSQL row the bench says how many WAL segments the server's `pg_wal` gained
//! meanwhile (`pg_ls_waldir()`, which needs a superuser or `pg_monitor`; nothing is said when it
//! cannot be read). A server that has not yet grown its `pg_wal` to the size its checkpoints
//! recycle creates each new segment (16 MiB by default) by writing and syncing zeros while the
//! committers wait: that row's p99 then measures the server's warm-up, not the dispatcher
//! (BENCHMARKS.md, the twenty-second machine's replicas runs).
//!
//! Run: `TOOLGUARD_PG_URL=postgres://postgres@127.0.0.1:5432/test
//! TOOLGUARD_REDIS_URL=redis://127.0.0.1:6379 cargo bench -p toolguard-benches --all-features --bench replicas`

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

#[path = "support/stores.rs"]
mod support;

use toolguard::redis::DEFAULT_CONNECTIONS;

use support::{TASKS, Timed, pg_url, redis_url, remove_db, runtime, temp_db, timed_storm, unique};

/// Set in a child process: its index among the replicas.
const CHILD: &str = "TOOLGUARD_REPLICAS_CHILD";
/// The child's database URL, schema and tasks.
const CHILD_URL: &str = "TOOLGUARD_REPLICAS_URL";
const CHILD_SCHEMA: &str = "TOOLGUARD_REPLICAS_SCHEMA";
const CHILD_TASKS: &str = "TOOLGUARD_REPLICAS_TASKS";
/// Length of the warm-up round.
const WARM_UP: Duration = Duration::from_secs(1);
/// Key numbers of child `i` start at `(i + 1) * KEY_SPACE`, so no two processes share a key.
const KEY_SPACE: u64 = 100_000_000_000;

/// Rounds, their length, and the parts to run.
#[derive(Debug, Clone)]
struct Plan {
    rounds: usize,
    length: Duration,
    /// Names given on the command line (`memory`, `sqlite`, `postgres`, `redis`, `replicas`):
    /// only those parts run; none given, all do.
    only: Vec<String>,
}

impl Plan {
    fn from_env() -> Self {
        let read = |var: &str, default: u64| {
            std::env::var(var)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|&v| v > 0)
                .unwrap_or(default)
        };
        Plan {
            rounds: usize::try_from(read("TOOLGUARD_REPLICAS_ROUNDS", 3)).unwrap_or(3),
            length: Duration::from_secs(read("TOOLGUARD_REPLICAS_SECONDS", 3)),
            only: std::env::args()
                .skip(1)
                .filter(|a| !a.starts_with('-'))
                .collect(),
        }
    }

    /// Whether the part `name` runs.
    fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }
}

fn main() {
    match std::env::var(CHILD) {
        Ok(index) => child(index.parse().expect("child index")),
        Err(_) => parent(&Plan::from_env()),
    }
}

/// A round's calls/s and its calls' latencies.
struct Round {
    calls_per_s: f64,
    latencies_us: Vec<u32>,
}

impl Round {
    /// Merges what the processes of one round measured.
    fn merge(parts: Vec<Timed>) -> Self {
        let calls: u64 = parts.iter().map(|t| t.calls).sum();
        let slowest = parts.iter().map(|t| t.elapsed).max().unwrap_or_default();
        let latencies_us = parts.into_iter().flat_map(|t| t.latencies_us).collect();
        Round {
            calls_per_s: calls as f64 / slowest.as_secs_f64().max(1e-9),
            latencies_us,
        }
    }
}

/// The `p` quantile (nearest rank) of sorted `v`, in milliseconds.
fn quantile_ms(v: &[u32], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = (p * v.len() as f64).ceil() as usize;
    f64::from(v[rank.clamp(1, v.len()) - 1]) / 1_000.0
}

/// Prints one round and, after the last, the row: median calls/s and the merged percentiles.
fn report(what: &str, rounds: Vec<Round>) {
    let mut rates: Vec<f64> = rounds.iter().map(|r| r.calls_per_s).collect();
    let mut all: Vec<u32> = Vec::new();
    for (i, mut r) in rounds.into_iter().enumerate() {
        r.latencies_us.sort_unstable();
        eprintln!(
            "  {what} round {}: {:.0} calls/s, {} calls, p50 {:.3} ms, p99 {:.3} ms",
            i + 1,
            r.calls_per_s,
            r.latencies_us.len(),
            quantile_ms(&r.latencies_us, 0.5),
            quantile_ms(&r.latencies_us, 0.99),
        );
        all.extend(r.latencies_us);
    }
    all.sort_unstable();
    rates.sort_by(f64::total_cmp);
    let median = rates.get(rates.len() / 2).copied().unwrap_or(f64::NAN);
    let (low, high) = (rates.first(), rates.last());
    println!(
        "| {what} | {:.1} k [{:.1} k, {:.1} k] | {:.3} ms | {:.3} ms |",
        median / 1_000.0,
        low.copied().unwrap_or(f64::NAN) / 1_000.0,
        high.copied().unwrap_or(f64::NAN) / 1_000.0,
        quantile_ms(&all, 0.5),
        quantile_ms(&all, 0.99),
    );
}

fn parent(plan: &Plan) {
    eprintln!(
        "replicas: a warm-up round of {:?}, then {} rounds of {:?}",
        WARM_UP, plan.rounds, plan.length
    );
    println!(
        "| backend, {TASKS} tasks in one process | calls/s, median [low, high] of rounds | p50 | p99 |"
    );
    println!("| --- | --- | --- | --- |");
    backends(plan);
    if let Some(url) = pg_url().filter(|_| plan.runs("replicas")) {
        println!();
        println!(
            "| PostgreSQL, processes × tasks each | calls/s, median [low, high] of rounds | p50 | p99 |"
        );
        println!("| --- | --- | --- | --- |");
        for (processes, tasks) in [(1, 64), (2, 32), (4, 16), (2, 64), (4, 64)] {
            replicas(&url, plan, processes, tasks);
        }
    }
}

/// The in-process rows: the dispatcher on each backend, 64 tasks.
fn backends(plan: &Plan) {
    let rt = runtime();
    let run = |what: &str, d: &toolguard::Dispatcher<support::Counter>| {
        let seq = Arc::new(AtomicU64::new(0));
        rt.block_on(async {
            let warm = timed_storm(d, &seq, TASKS, WARM_UP).await;
            eprintln!("  {what} warm-up: {} calls", warm.calls);
            let mut rounds = Vec::new();
            for _ in 0..plan.rounds {
                let timed = timed_storm(d, &seq, TASKS, plan.length).await;
                rounds.push(Round::merge(vec![timed]));
            }
            report(what, rounds);
        });
    };
    if plan.runs("memory") {
        run("memory", &support::memory());
    }

    if plan.runs("sqlite") {
        let path = temp_db("replicas");
        let sqlite = support::sqlite(&path);
        run("SQLite, `.sqlite()`", &sqlite);
        drop(sqlite);
        remove_db(&path);
    }

    if let Some(url) = pg_url().filter(|_| plan.runs("postgres")) {
        let store = rt.block_on(support::pg_store(&url, &unique("replicas")));
        let pg = rt.block_on(async { support::postgres(&store) });
        let before = rt.block_on(wal_segments(&url));
        run("PostgreSQL, `store.audit_sink()`", &pg);
        note_wal_growth(before, rt.block_on(wal_segments(&url)));
        drop(pg);
        rt.block_on(store.drop_schema()).expect("drop schema");
    }

    if let Some(url) = redis_url().filter(|_| plan.runs("redis")) {
        // `TOOLGUARD_REPLICAS_REDIS_CONNECTIONS=n` measures `n` connections alone (for runs
        // that alternate the counts in separate processes).
        let counts = match std::env::var("TOOLGUARD_REPLICAS_REDIS_CONNECTIONS") {
            Ok(n) => vec![n.parse().expect("a number of connections")],
            Err(_) => vec![1, DEFAULT_CONNECTIONS],
        };
        for connections in counts {
            let (d, redis) = rt.block_on(support::redis(&url, unique("replicas"), connections));
            let noun = if connections == 1 {
                "connection"
            } else {
                "connections"
            };
            let what =
                format!("Redis, {connections} {noun} (+ memory approvals, operations, audit)");
            run(&what, &d);
            drop(d);
            let _ = rt.block_on(redis.clear());
        }
    }
}

/// A child process and its pipes.
struct Replica {
    process: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Replica {
    fn start(index: usize, url: &str, schema: &str, tasks: u64) -> Self {
        let exe = std::env::current_exe().expect("the bench's own binary");
        let mut process = Command::new(exe)
            .env(CHILD, index.to_string())
            .env(CHILD_URL, url)
            .env(CHILD_SCHEMA, schema)
            .env(CHILD_TASKS, tasks.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("a replica starts");
        let stdin = process.stdin.take().expect("piped stdin");
        let stdout = BufReader::new(process.stdout.take().expect("piped stdout"));
        let mut replica = Replica {
            process,
            stdin,
            stdout,
        };
        assert_eq!(replica.line(), "ready", "replica {index} did not start");
        replica
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .expect("a replica's answer");
        line.trim_end().to_owned()
    }

    fn go(&mut self, length: Duration) {
        writeln!(self.stdin, "go {}", length.as_millis()).expect("a replica's stdin");
        self.stdin.flush().expect("a replica's stdin");
    }

    /// The round's answer: `calls elapsed_us latency_us...`.
    fn result(&mut self) -> Timed {
        let line = self.line();
        let mut fields = line.split(' ').map(|f| f.parse::<u64>().expect("a number"));
        let calls = fields.next().expect("calls");
        let elapsed = Duration::from_micros(fields.next().expect("elapsed"));
        let latencies_us: Vec<u32> = fields
            .map(|us| u32::try_from(us).unwrap_or(u32::MAX))
            .collect();
        assert_eq!(latencies_us.len() as u64, calls, "a replica's latencies");
        Timed {
            calls,
            elapsed,
            latencies_us,
        }
    }
}

/// `processes` replicas of `tasks` tasks each on a fresh schema; one row.
fn replicas(url: &str, plan: &Plan, processes: usize, tasks: u64) {
    let rt = runtime();
    let schema = unique("replicas");
    // Created (and migrated) once here, so that the children only connect.
    let store = rt.block_on(support::pg_store(url, &schema));
    let mut children: Vec<Replica> = (0..processes)
        .map(|i| Replica::start(i, url, &schema, tasks))
        .collect();
    let mut rounds = Vec::new();
    let before = rt.block_on(wal_segments(url));
    for round in 0..=plan.rounds {
        let length = if round == 0 { WARM_UP } else { plan.length };
        for c in &mut children {
            c.go(length);
        }
        let parts: Vec<Timed> = children.iter_mut().map(Replica::result).collect();
        if round > 0 {
            rounds.push(Round::merge(parts));
        }
    }
    for mut c in children {
        drop(c.stdin);
        let status = c.process.wait().expect("a replica exits");
        assert!(status.success(), "a replica failed: {status}");
    }
    report(&format!("{processes} × {tasks}"), rounds);
    note_wal_growth(before, rt.block_on(wal_segments(url)));
    rt.block_on(store.drop_schema()).expect("drop schema");
}

/// The number of WAL segment files in the server's `pg_wal`, or `None` when it cannot be read
/// (no connection, or a role without `pg_monitor`).
async fn wal_segments(url: &str) -> Option<i64> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .ok()?;
    let driver = tokio::spawn(connection);
    let row = client
        .query_one(
            "SELECT count(*) FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'",
            &[],
        )
        .await
        .ok();
    drop(client);
    let _ = driver.await;
    row.and_then(|r| r.try_get(0).ok())
}

/// Says (on stderr, beside the rounds) how many WAL segments the server's `pg_wal` gained
/// during a row (segments it created, less any a checkpoint removed meanwhile).
fn note_wal_growth(before: Option<i64>, after: Option<i64>) {
    if let (Some(before), Some(after)) = (before, after)
        && after > before
    {
        eprintln!(
            "  pg_wal gained {} WAL segments during this row ({before} -> {after}): commits wait \
             while the server creates one (its zeros written and synced, unless \
             wal_init_zero is off), so this row's p99 includes the server's warm-up",
            after - before
        );
    }
}

/// Child mode: connects to the parent's schema, says `ready`, then runs a round per `go` line.
fn child(index: u64) {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is set"));
    let (url, schema) = (var(CHILD_URL), var(CHILD_SCHEMA));
    let tasks: u64 = var(CHILD_TASKS).parse().expect("tasks");
    let rt = runtime();
    let store = rt.block_on(support::pg_store(&url, &schema));
    let d = rt.block_on(async { support::postgres(&store) });
    let seq = Arc::new(AtomicU64::new((index + 1) * KEY_SPACE));
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready").expect("stdout");
    out.flush().expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let Some(ms) = line.strip_prefix("go ") else {
            continue;
        };
        let length = Duration::from_millis(ms.parse().expect("a round's length"));
        let timed = rt.block_on(timed_storm(&d, &seq, tasks, length));
        let mut text = format!("{} {}", timed.calls, timed.elapsed.as_micros());
        for us in &timed.latencies_us {
            let _ = write!(text, " {us}");
        }
        writeln!(out, "{text}").expect("stdout");
        out.flush().expect("stdout");
    }
}
