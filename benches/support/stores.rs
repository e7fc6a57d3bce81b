//! The store benches' workload: an idempotent high-risk tool called with a fresh key per call
//! from concurrent tasks, and the dispatchers that run it with every store (and, for SQLite and
//! PostgreSQL, the audit trail) on one backend. Used by `stores` (criterion throughput) and
//! `replicas` (calls/s and per-call latency, in one process and in several).

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use toolguard::audit::MemoryAuditSink;
use toolguard::postgres::{PgConfig, PgStore};
use toolguard::redis::{RedisConfig, RedisStore};
use toolguard::sqlite::SqliteBuilderExt as _;
use toolguard::store::MemoryStore;
use toolguard::{
    Dispatcher, DispatcherBuilder, Principal, Status, ToolCall, ToolContext, ToolError, tool,
};

/// Shared state of the bench tool.
#[derive(Default)]
pub struct Counter {
    n: AtomicU64,
}

/// Moves an amount; high risk, idempotent.
#[tool(risk = "high", idempotent)]
pub async fn move_amount(
    ctx: &ToolContext<Counter>,
    /// Source account.
    #[arg(kind = "identifier", max_len = 32)]
    from: String,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 1_000_000)]
    amount: u64,
) -> Result<u64, ToolError> {
    let _ = from;
    Ok(ctx.state().n.fetch_add(amount, Ordering::Relaxed) + amount)
}

/// Concurrent tasks of a storm.
pub const TASKS: u64 = 64;

/// The runtime the store benches dispatch on: two worker threads, as the machine has two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A name no earlier run used: `tg_bench_<what>_<8 hex digits>`.
pub fn unique(what: &str) -> String {
    format!(
        "tg_bench_{what}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

/// A fresh SQLite file in the temporary directory.
pub fn temp_db(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{}.db", unique(what)))
}

/// Removes a SQLite file and its log files.
pub fn remove_db(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

fn service_url(var: &str) -> Option<String> {
    let url = std::env::var(var).ok().filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("SKIPPED: {var} not set");
    }
    url
}

/// `TOOLGUARD_PG_URL`, or `None` (and a note that PostgreSQL is skipped).
pub fn pg_url() -> Option<String> {
    service_url("TOOLGUARD_PG_URL")
}

/// `TOOLGUARD_REDIS_URL`, or `None` (and a note that Redis is skipped).
pub fn redis_url() -> Option<String> {
    service_url("TOOLGUARD_REDIS_URL")
}

/// A builder with the bench tool.
pub fn builder() -> DispatcherBuilder<Counter> {
    Dispatcher::builder(Counter::default()).tool(MoveAmount)
}

/// Memory stores and a memory audit sink.
pub fn memory() -> Dispatcher<Counter> {
    builder()
        .store(Arc::new(MemoryStore::new()))
        .audit(MemoryAuditSink::new())
        .build()
        .expect("dispatcher")
}

/// Every store and the trail in the SQLite file `path` (`.sqlite()`: fully synced, the trail in
/// the store's commits).
pub fn sqlite(path: &std::path::Path) -> Dispatcher<Counter> {
    builder()
        .sqlite(path)
        .expect("sqlite")
        .unanchored_audit("measures the store, comparable with earlier runs")
        .build()
        .expect("dispatcher")
}

/// Connects a PostgreSQL store to `schema` (created and migrated if missing).
pub async fn pg_store(url: &str, schema: &str) -> Arc<PgStore> {
    let config = PgConfig::new(url).schema(schema).pool_size(16);
    Arc::new(PgStore::connect(&config).await.expect("pg store"))
}

/// Every store on `store`, the trail through its pool (`PgStore::audit_sink`). Call inside the
/// runtime that will dispatch: the writers start on it.
pub fn postgres(store: &Arc<PgStore>) -> Dispatcher<Counter> {
    builder()
        .store(store.clone())
        .audit(store.audit_sink())
        .unanchored_audit("measures the store, comparable with earlier runs")
        .build()
        .expect("dispatcher")
}

/// Idempotency and session ledger on Redis (keys under `prefix`, commands over `connections`
/// connections), approvals, operation records and the trail in memory.
pub async fn redis(
    url: &str,
    prefix: String,
    connections: usize,
) -> (Dispatcher<Counter>, Arc<RedisStore>) {
    let config = RedisConfig::new(url, prefix).connections(connections);
    let redis = Arc::new(RedisStore::connect_with(&config).await.expect("redis"));
    let d = builder()
        .store(Arc::new(MemoryStore::new()))
        .idempotency_store(redis.clone())
        .session_ledger(redis.clone())
        .audit(MemoryAuditSink::new())
        .build()
        .expect("dispatcher");
    (d, redis)
}

/// Dispatches the high-risk call with key number `n`; panics unless it ends `ok`.
pub async fn call(d: &Dispatcher<Counter>, who: &Principal, n: u64) {
    let args =
        json!({"from": "acc-1", "amount": 5, "idempotency_key": format!("bench-key-{n:012}")});
    let out = d
        .dispatch(ToolCall::new("c", "move_amount", args), who)
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
}

/// The caller of every bench call.
pub fn principal() -> Principal {
    Principal::new("acme", "alice", "bench")
}

/// Runs `total` high-risk calls from [`TASKS`] tasks (key numbers from `seq`) and returns the
/// elapsed time.
pub async fn storm(d: &Dispatcher<Counter>, seq: &Arc<AtomicU64>, total: u64) -> Duration {
    let who = principal();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (d, seq, who) = (d.clone(), seq.clone(), who.clone());
        let per_task = total.div_ceil(TASKS);
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_task {
                call(&d, &who, seq.fetch_add(1, Ordering::Relaxed)).await;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    started.elapsed()
}

/// What a timed storm did: its calls, how long it took, each call's duration.
#[derive(Debug, Default)]
pub struct Timed {
    /// Calls completed.
    pub calls: u64,
    /// From the start until the last task finished.
    pub elapsed: Duration,
    /// Each call's duration, in microseconds (unsorted).
    pub latencies_us: Vec<u32>,
}

/// Calls from `tasks` tasks (key numbers from `seq`) until `length` has passed (each task then
/// finishes its call in flight), timing each call.
pub async fn timed_storm(
    d: &Dispatcher<Counter>,
    seq: &Arc<AtomicU64>,
    tasks: u64,
    length: Duration,
) -> Timed {
    let who = principal();
    let started = Instant::now();
    let until = started + length;
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let (d, seq, who) = (d.clone(), seq.clone(), who.clone());
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(4_096);
            loop {
                let t0 = Instant::now();
                if t0 >= until {
                    break latencies;
                }
                call(&d, &who, seq.fetch_add(1, Ordering::Relaxed)).await;
                let us = t0.elapsed().as_micros();
                latencies.push(u32::try_from(us).unwrap_or(u32::MAX));
            }
        }));
    }
    let mut timed = Timed::default();
    for h in handles {
        timed
            .latencies_us
            .extend(h.await.expect("a bench task panicked"));
    }
    timed.elapsed = started.elapsed();
    timed.calls = timed.latencies_us.len() as u64;
    timed
}
