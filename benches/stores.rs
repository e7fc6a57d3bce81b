//! Throughput of the store backends (needs features `sqlite`, `redis` and `postgres`; the service
//! backends are measured when `TOOLGUARD_PG_URL` / `TOOLGUARD_REDIS_URL` are set, and skipped
//! otherwise).
//!
//! - `dispatch_high_risk/<backend>`: an idempotent high-risk tool with a fresh key per call,
//!   64 concurrent tasks, every store (and, for SQLite and PostgreSQL, the audit trail) on the
//!   backend. Throughput in calls/s. SQLite and PostgreSQL run twice: with the trail written
//!   through the store (`.sqlite()`, `PgStore::audit_sink`: a call waits for the disk twice)
//!   and with a sink of its own (`*_separate_audit`: every write waits for the disk).
//! - `audit_append/<backend>`: appends from 256 concurrent tasks through group commit; each
//!   append resolves once its batch committed. Throughput in entries/s.
//! - `audit_query/<backend>/{actor,tool,time}`: the three queries (limit 50) over a trail of
//!   100,000 entries.
//!
//! Run: `TOOLGUARD_PG_URL=postgres://postgres@127.0.0.1:5432/test
//! TOOLGUARD_REDIS_URL=redis://127.0.0.1:6379 cargo bench -p toolguard-benches --features stores --bench stores`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use toolguard::Status;
use toolguard::audit::{AuditEvent, AuditQuery, AuditRecord, AuditSink};
use toolguard::postgres::PgAuditSink;
use toolguard::postgres::{PgConfig, PgStore};
use toolguard::sqlite::SqliteAuditSink;
use toolguard::sqlite::{Durability, SqliteStore};

#[path = "support/stores.rs"]
mod support;

use support::{
    TASKS, builder as base, pg_url, redis_url, remove_db, runtime, storm, temp_db, unique,
};

const QUERY_ENTRIES: u64 = 100_000;

fn dispatch_high_risk(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("dispatch_high_risk");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .throughput(Throughput::Elements(TASKS * 8));
    let seq = Arc::new(AtomicU64::new(0));
    let memory = support::memory();
    g.bench_function("memory", |b| {
        b.to_async(&rt)
            .iter_custom(|iters| storm(&memory, &seq, iters * TASKS * 8))
    });

    let path = temp_db("dispatch");
    let sqlite = support::sqlite(&path);
    g.bench_function("sqlite", |b| {
        b.to_async(&rt)
            .iter_custom(|iters| storm(&sqlite, &seq, iters * TASKS * 8))
    });
    drop(sqlite);
    remove_db(&path);

    // The same file with a trail of its own (`SqliteAuditSink::open`): every write synced.
    let path = temp_db("dispatch");
    let store = Arc::new(SqliteStore::open_with(&path, Durability::Full).expect("sqlite"));
    let sqlite = base()
        .store(store)
        .audit(SqliteAuditSink::open(&path).expect("sqlite audit"))
        .unanchored_audit("measures the store, comparable with earlier runs")
        .build()
        .expect("dispatcher");
    g.bench_function("sqlite_separate_audit", |b| {
        b.to_async(&rt)
            .iter_custom(|iters| storm(&sqlite, &seq, iters * TASKS * 8))
    });
    drop(sqlite);
    remove_db(&path);

    if let Some(url) = pg_url() {
        // `shared`: the trail through the store's pool (`PgStore::audit_sink`), so that the
        // writes a later synced write of the call covers do not wait for the disk; `separate`:
        // a sink of its own (`PgAuditSink::connect`), every write synced.
        for shared in [true, false] {
            let config = PgConfig::new(url.clone())
                .schema(unique("dispatch"))
                .pool_size(16);
            let (store, audit) = rt.block_on(async {
                let store = PgStore::connect(&config).await.expect("pg store");
                let audit = match shared {
                    true => store.audit_sink(),
                    false => PgAuditSink::connect(&config).await.expect("pg audit"),
                };
                (Arc::new(store), audit)
            });
            let pg = base()
                .store(store.clone())
                .audit(audit)
                .unanchored_audit("measures the store, comparable with earlier runs")
                .build()
                .expect("dispatcher");
            let name = if shared {
                "postgres"
            } else {
                "postgres_separate_audit"
            };
            g.bench_function(name, |b| {
                b.to_async(&rt)
                    .iter_custom(|iters| storm(&pg, &seq, iters * TASKS * 8))
            });
            drop(pg);
            let _ = rt.block_on(store.drop_schema());
        }
    }

    if let Some(url) = redis_url() {
        let connections = toolguard::redis::DEFAULT_CONNECTIONS;
        let (d, redis) = rt.block_on(support::redis(&url, unique("dispatch"), connections));
        g.bench_function("redis", |b| {
            b.to_async(&rt)
                .iter_custom(|iters| storm(&d, &seq, iters * TASKS * 8))
        });
        let _ = rt.block_on(redis.clear());
    }
    g.finish();
}

fn record(i: u64) -> AuditRecord {
    AuditRecord {
        event: AuditEvent::Call,
        time_ms: 1_700_000_000_000 + i,
        tenant: format!("tenant-{}", i % 10).into(),
        subject: format!("user-{}", i % 1_000).into(),
        session: "bench".into(),
        tool: format!("tool-{}", i % 20).into(),
        call_id: format!("call-{i}").into(),
        operation_id: Some(format!("op-{i}").into()),
        idempotency_key: Some(format!("key-{i:012}").into()),
        status: Some(Status::Ok),
        request_digest: Some("9f".repeat(32)),
        arguments: Some(std::sync::Arc::new(
            json!({"from": "acc-1", "amount": i % 1_000, "currency": "USD"}),
        )),
        duration_us: 120,
        ..AuditRecord::default()
    }
}

/// Appends `total` records from 256 tasks; returns the elapsed time.
async fn append_storm<S: AuditSink + Clone + Send + Sync + 'static>(
    sink: &S,
    next: &Arc<AtomicU64>,
    total: u64,
) -> Duration {
    const WRITERS: u64 = 256;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let sink = sink.clone();
        let next = next.clone();
        let per = total.div_ceil(WRITERS);
        tasks.push(tokio::spawn(async move {
            for _ in 0..per {
                let i = next.fetch_add(1, Ordering::Relaxed);
                sink.append(record(i)).await.expect("append");
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    started.elapsed()
}

fn audit(c: &mut Criterion) {
    let rt = runtime();
    let path = temp_db("audit");
    let sqlite = Arc::new(SqliteAuditSink::open(&path).expect("sqlite audit"));
    let pg = pg_url().map(|url| {
        let config = PgConfig::new(url).schema(unique("audit")).pool_size(4);
        let store = rt.block_on(PgStore::connect(&config)).expect("pg");
        let sink = rt
            .block_on(PgAuditSink::connect(&config))
            .expect("pg audit");
        (store, Arc::new(sink))
    });

    {
        let mut g = c.benchmark_group("audit_append");
        g.sample_size(10)
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(5))
            .throughput(Throughput::Elements(4_096));
        let next = Arc::new(AtomicU64::new(0));
        g.bench_function("sqlite", |b| {
            b.to_async(&rt)
                .iter_custom(|iters| append_storm(&sqlite, &next, iters * 4_096))
        });
        if let Some((_, sink)) = &pg {
            let next = Arc::new(AtomicU64::new(0));
            g.bench_function("postgres", |b| {
                b.to_async(&rt)
                    .iter_custom(|iters| append_storm(sink, &next, iters * 4_096))
            });
        }
        g.finish();
    }

    // Fresh trails of exactly 100,000 entries for the queries.
    let qpath = temp_db("query");
    let sqlite_q = Arc::new(SqliteAuditSink::open(&qpath).expect("sqlite audit"));
    rt.block_on(append_storm(
        &sqlite_q,
        &Arc::new(AtomicU64::new(0)),
        QUERY_ENTRIES,
    ));
    let pg_q = pg_url().map(|url| {
        let config = PgConfig::new(url).schema(unique("query")).pool_size(4);
        let store = rt.block_on(PgStore::connect(&config)).expect("pg");
        let sink = Arc::new(
            rt.block_on(PgAuditSink::connect(&config))
                .expect("pg audit"),
        );
        rt.block_on(append_storm(
            &sink,
            &Arc::new(AtomicU64::new(0)),
            QUERY_ENTRIES,
        ));
        (store, sink)
    });

    let mut g = c.benchmark_group("audit_query");
    g.sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    let mut sinks: Vec<(&str, Arc<dyn AuditQueryDyn>)> = vec![("sqlite", sqlite_q.clone())];
    if let Some((_, sink)) = &pg_q {
        sinks.push(("postgres", sink.clone()));
    }
    for (name, sink) in &sinks {
        let n = rt.block_on(sink.count()).expect("count");
        eprintln!("{name}: {n} audit entries");
        g.bench_function(format!("{name}/actor"), |b| {
            b.to_async(&rt).iter(|| async {
                let v = sink
                    .q()
                    .by_actor("tenant-7", "user-417", 50)
                    .await
                    .expect("actor");
                assert!(!v.is_empty());
            })
        });
        g.bench_function(format!("{name}/tool"), |b| {
            b.to_async(&rt).iter(|| async {
                let v = sink.q().by_tool("tool-13", 50).await.expect("tool");
                assert_eq!(v.len(), 50);
            })
        });
        g.bench_function(format!("{name}/time"), |b| {
            b.to_async(&rt).iter(|| async {
                let from = 1_700_000_000_000 + 40_000;
                let v = sink
                    .q()
                    .by_time(from, from + 5_000, 50)
                    .await
                    .expect("time");
                assert_eq!(v.len(), 50);
            })
        });
    }
    g.finish();

    drop(sinks);
    drop((sqlite, sqlite_q));
    remove_db(&path);
    remove_db(&qpath);
    for (store, _) in pg.into_iter().chain(pg_q) {
        let _ = rt.block_on(store.drop_schema());
    }
}

/// A queryable sink that can also count its entries.
trait AuditQueryDyn: Send + Sync {
    fn q(&self) -> &dyn AuditQuery;
    fn count(&self) -> toolguard::BoxFuture<'_, Result<u64, toolguard::audit::AuditError>>;
}

impl AuditQueryDyn for SqliteAuditSink {
    fn q(&self) -> &dyn AuditQuery {
        self
    }
    fn count(&self) -> toolguard::BoxFuture<'_, Result<u64, toolguard::audit::AuditError>> {
        Box::pin(self.len())
    }
}

impl AuditQueryDyn for PgAuditSink {
    fn q(&self) -> &dyn AuditQuery {
        self
    }
    fn count(&self) -> toolguard::BoxFuture<'_, Result<u64, toolguard::audit::AuditError>> {
        Box::pin(self.len())
    }
}

criterion_group!(benches, dispatch_high_risk, audit);
criterion_main!(benches);
