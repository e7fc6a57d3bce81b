//! Hot keys stay live: 10,000 concurrent calls with one idempotency key, on every idempotency
//! store (memory, SQLite, PostgreSQL with a pool of 16, Redis), spread over two replicas sharing
//! the store, end with exactly one execution; every other call is replayed or answered
//! `in_progress`, none `unavailable`. Calls that ask to wait all get the one outcome, replayed.
//!
//! Run with `--nocapture` to see the counts per backend.

mod store_support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolguard::store::IdempotencyStore;
use toolguard::{Dispatcher, MemoryAuditSink, MemoryStore, Status, ToolCall, ToolOutcome};
use toolguard_tests::*;

/// Calls in one storm.
const CALLS: usize = 10_000;

/// How the calls of a storm ended.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    executions: usize,
    executed_ok: usize,
    replayed: usize,
    in_progress: usize,
    unavailable: usize,
    other: Vec<String>,
}

fn count(outs: &[ToolOutcome], runs: usize) -> Counts {
    let mut c = Counts {
        executions: runs,
        ..Counts::default()
    };
    for out in outs {
        match out.status {
            Status::Ok if out.replayed => c.replayed += 1,
            Status::Ok => c.executed_ok += 1,
            Status::InProgress => c.in_progress += 1,
            Status::Unavailable => c.unavailable += 1,
            _ => c.other.push(format!("{} {:?}", out.status, out.reason)),
        }
    }
    c
}

/// `CALLS` concurrent calls of `slow_payout` with one key, alternating between two replicas
/// (dispatchers sharing the store); `wait` makes every call wait for the one in flight.
async fn storm(backend: &str, store: Arc<dyn IdempotencyStore>, wait: Option<Duration>) -> Counts {
    let ledger = Arc::new(Ledger::seeded());
    let replica = || {
        let d = Dispatcher::builder_arc(ledger.clone())
            .tool(SlowPayout)
            .audit(MemoryAuditSink::new())
            .idempotency_store(store.clone())
            // The storm is about who runs, not about how fast a loaded machine answers: with
            // 10,000 tasks on two cores beside the other tests, a store call can wait longer
            // than the 2 s default to be polled at all, and would then be `unavailable`.
            .store_deadline(Duration::from_secs(20))
            .build()
            .expect("dispatcher");
        Arc::new(d)
    };
    let replicas = [replica(), replica()];
    let key = format!("hot-{backend}-{}", wait.is_some());
    let args = json!({"cents": 5, "delay_ms": 20, "idempotency_key": key});
    let mut tasks = Vec::with_capacity(CALLS);
    for i in 0..CALLS {
        let d = replicas[i % 2].clone();
        let mut call = ToolCall::new(format!("c{i}"), "slow_payout", args.clone());
        if let Some(w) = wait {
            call = call.wait_in_progress(w);
        }
        tasks.push(tokio::spawn(
            async move { d.dispatch(call, &alice()).await },
        ));
    }
    let mut outs = Vec::with_capacity(CALLS);
    for t in tasks {
        outs.push(t.await.expect("no call panics"));
    }
    let counts = count(&outs, ledger.runs());
    println!(
        "{backend:>8} wait={:<5} executions={} ok={} replayed={} in_progress={} unavailable={} other={}",
        wait.is_some(),
        counts.executions,
        counts.executed_ok,
        counts.replayed,
        counts.in_progress,
        counts.unavailable,
        counts.other.len(),
    );
    counts
}

/// The storm without waiting: one execution, the rest `in_progress` or replayed.
async fn one_execution_the_rest_answered(backend: &str, store: Arc<dyn IdempotencyStore>) {
    let c = storm(backend, store, None).await;
    assert_eq!(c.executions, 1, "{backend}: {c:?}");
    assert_eq!(c.executed_ok, 1, "{backend}: {c:?}");
    assert_eq!(c.unavailable, 0, "{backend}: {c:?}");
    assert!(c.other.is_empty(), "{backend}: {c:?}");
    assert_eq!(c.replayed + c.in_progress, CALLS - 1, "{backend}: {c:?}");
}

/// The storm with every call waiting: one execution, every other call its replay.
async fn one_execution_the_rest_replayed(backend: &str, store: Arc<dyn IdempotencyStore>) {
    let c = storm(backend, store, Some(Duration::from_secs(30))).await;
    assert_eq!(c.executions, 1, "{backend}: {c:?}");
    assert_eq!(c.executed_ok, 1, "{backend}: {c:?}");
    assert_eq!(c.replayed, CALLS - 1, "{backend}: {c:?}");
    assert_eq!(
        (c.in_progress, c.unavailable, c.other.len()),
        (0, 0, 0),
        "{backend}: {c:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_hot_key_stays_live() {
    one_execution_the_rest_answered("memory", Arc::new(MemoryStore::new())).await;
    one_execution_the_rest_replayed("memory", Arc::new(MemoryStore::new())).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_hot_key_stays_live() {
    use toolguard::sqlite::SqliteStore;
    let path = store_support::sqlite_path("hot_key");
    let store = Arc::new(SqliteStore::open(&path).expect("open sqlite"));
    one_execution_the_rest_answered("sqlite", store.clone()).await;
    one_execution_the_rest_replayed("sqlite", store).await;
    store_support::remove_sqlite(&path);
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
async fn postgres_hot_key_stays_live() {
    use toolguard::postgres::{PgConfig, PgStore};
    let Some(url) = store_support::pg_url("hot_key") else {
        return;
    };
    let config = PgConfig::new(url)
        .schema(store_support::unique("hot_key"))
        .pool_size(16);
    let store = Arc::new(PgStore::connect(&config).await.expect("connect postgres"));
    one_execution_the_rest_answered("postgres", store.clone()).await;
    one_execution_the_rest_replayed("postgres", store.clone()).await;
    store.drop_schema().await.expect("drop schema");
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn redis_hot_key_stays_live() {
    use toolguard::redis::RedisStore;
    let Some(url) = store_support::redis_url("hot_key") else {
        return;
    };
    let store = Arc::new(
        RedisStore::connect(&url, store_support::unique("hot_key"))
            .await
            .expect("connect redis"),
    );
    one_execution_the_rest_answered("redis", store.clone()).await;
    one_execution_the_rest_replayed("redis", store.clone()).await;
    store.clear().await.expect("clear");
}
