//! What a high-risk call costs the PostgreSQL server: 64 tasks dispatch calls of an idempotent
//! high-risk tool (fresh key each) on a `PgStore` with its audit trail written through the
//! store's pool, in a database of the test's own, and the server's counters of that database
//! (`pg_stat_database`) give the transactions and rows per call. Every call must end `ok` with
//! its outcome stored under its key, its operation record final and one audit entry, and the
//! store must not spend more than one transaction per write of a call (the writes of concurrent
//! calls share statements and commits).
//!
//! The figures are printed (`--nocapture`); they are exact counts, not timings, so they hold on a
//! loaded machine where throughput does not.

#![cfg(feature = "postgres")]

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use toolguard::audit::AuditQuery;
use toolguard::postgres::{PgConfig, PgStore};
use toolguard::store::{IdempotencyStore, OperationState, OperationStore, RecordState, ScopedKey};
use toolguard::{Dispatcher, Principal, Status, ToolCall, ToolContext, ToolError, tool};

/// Shared state of the tool.
#[derive(Default)]
struct Counter {
    n: AtomicU64,
}

/// Moves an amount; high risk, idempotent.
#[tool(risk = "high", idempotent)]
async fn move_amount(
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

const TASKS: u64 = 64;
const WARM_UP: u64 = 256;
const CALLS: u64 = 4_096;

/// The server's counters of one database.
#[derive(Debug, Clone, Copy)]
struct Counters {
    commits: i64,
    inserted: i64,
    updated: i64,
    deleted: i64,
}

async fn counters(admin: &tokio_postgres::Client, db: &str) -> Counters {
    let row = admin
        .query_one(
            "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted
             FROM pg_stat_database WHERE datname = $1",
            &[&db],
        )
        .await
        .expect("pg_stat_database");
    Counters {
        commits: row.get(0),
        inserted: row.get(1),
        updated: row.get(2),
        deleted: row.get(3),
    }
}

/// The counters once every session of the store has reported its own: a session reports what it
/// did at most once a second while busy, and within ten seconds once idle.
async fn settled(admin: &tokio_postgres::Client, db: &str) -> Counters {
    tokio::time::sleep(Duration::from_secs(11)).await;
    counters(admin, db).await
}

/// `url` with database `db` (URL form only).
fn with_database(url: &str, db: &str) -> Option<String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let rest = base
        .strip_prefix("postgres://")
        .or_else(|| base.strip_prefix("postgresql://"))?;
    let host = rest.split('/').next()?;
    let scheme = &base[..base.len() - rest.len()];
    Some(match query {
        Some(q) => format!("{scheme}{host}/{db}?{q}"),
        None => format!("{scheme}{host}/{db}"),
    })
}

fn key(n: u64) -> String {
    format!("rt-key-{n:08}")
}

/// Dispatches calls `from..to` from 64 tasks.
async fn storm(d: &Dispatcher<Counter>, from: u64, to: u64) {
    let next = Arc::new(AtomicU64::new(from));
    let who = Principal::new("acme", "alice", "rt");
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let (d, next, who) = (d.clone(), next.clone(), who.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= to {
                    break;
                }
                let args = json!({"from": "acc-1", "amount": 5, "idempotency_key": key(n)});
                let out = d
                    .dispatch(ToolCall::new(format!("c{n}"), "move_amount", args), &who)
                    .await;
                assert_eq!(out.status, Status::Ok, "call {n}: {out:?}");
                assert!(out.audit_seq.is_some(), "call {n} has its audit entry");
            }
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_risk_call_costs_few_transactions() {
    let test = "pg_roundtrips";
    let Some(url) = store_support::pg_url(test) else {
        return;
    };
    let db = store_support::unique(test);
    let Some(db_url) = with_database(&url, &db) else {
        eprintln!("SKIPPED: TOOLGUARD_PG_URL is not a postgres:// URL ({test})");
        return;
    };
    let (admin, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    admin
        .batch_execute(&format!("CREATE DATABASE \"{db}\""))
        .await
        .expect("create database");

    let config = PgConfig::new(db_url).pool_size(16);
    let store = Arc::new(PgStore::connect(&config).await.expect("connect postgres"));
    let audit = Arc::new(store.audit_sink());
    let d = Dispatcher::builder(Counter::default())
        .tool(MoveAmount)
        .store(store.clone())
        .audit(store_support::SharedAudit(audit.clone()))
        .build()
        .expect("dispatcher");

    storm(&d, 0, WARM_UP).await;
    let before = settled(&admin, &db).await;
    let started = Instant::now();
    storm(&d, WARM_UP, WARM_UP + CALLS).await;
    let elapsed = started.elapsed();
    let after = settled(&admin, &db).await;

    let per_call = |a: i64, b: i64| (a - b) as f64 / CALLS as f64;
    let commits = per_call(after.commits, before.commits);
    eprintln!(
        "postgres, {CALLS} high-risk calls from {TASKS} tasks: {:.0} calls/s; per call \
         {commits:.2} transactions, {:.2} rows inserted, {:.2} updated, {:.2} deleted",
        CALLS as f64 / elapsed.as_secs_f64(),
        per_call(after.inserted, before.inserted),
        per_call(after.updated, before.updated),
        per_call(after.deleted, before.deleted),
    );

    // Every call left its outcome under its key, its final operation record and its entry.
    let now = SystemTime::now();
    for n in (0..WARM_UP + CALLS).step_by(97) {
        let scoped = ScopedKey {
            tenant: "acme".into(),
            subject: "alice".into(),
            tool: "move_amount".into(),
            key: key(n).into(),
        };
        let record = IdempotencyStore::get(&*store, &scoped, now)
            .await
            .expect("get")
            .expect("record");
        let RecordState::Done { outcome } = record.state else {
            panic!("key {n} holds its outcome: {record:?}");
        };
        assert_eq!(outcome.status, Status::Ok);
        let id = outcome.operation_id.expect("operation id");
        let op = OperationStore::get(&*store, &id)
            .await
            .expect("get")
            .expect("operation record");
        assert_eq!(op.state, OperationState::Ok, "operation of key {n}");
    }
    let entries = audit.by_tool("move_amount", 10).await.expect("audit");
    assert_eq!(entries.len(), 10);
    assert_eq!(audit.len().await.expect("len"), WARM_UP + CALLS);
    // A call writes a reservation, two operation records, a completion and an audit entry;
    // concurrent calls share commits, so a call never costs a transaction per write.
    assert!(
        commits < 4.0,
        "{commits:.2} transactions per call: the writes of concurrent calls share no commits"
    );

    drop(d);
    drop(audit);
    drop(store);
    // The store's sessions close as its writer tasks end.
    tokio::time::sleep(Duration::from_millis(500)).await;
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"))
        .await
        .expect("drop database");
}
