//! Two audit sinks writing one trail (two processes on one SQLite file, two replicas on one
//! PostgreSQL schema): group commits interleave, yet every entry gets its own sequence number and
//! the chain verifies.

#![cfg(any(feature = "sqlite", feature = "postgres"))]

mod store_support;

use std::sync::Arc;

use toolguard::audit::{AuditQuery, AuditRecord, AuditSink};

fn record(i: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_000 + i,
        tenant: "acme".into(),
        subject: format!("user-{}", i % 3).into(),
        tool: "transfer_funds".into(),
        call_id: format!("call-{i}").into(),
        ..AuditRecord::default()
    }
}

async fn two_writers<S: AuditSink + AuditQuery>(a: Arc<S>, b: Arc<S>) {
    let mut tasks = Vec::new();
    for i in 0..400u64 {
        let sink = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            sink.append(record(i)).await.unwrap()
        }));
    }
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=400).collect::<Vec<_>>());
    a.verify().await.expect("one intact chain");
    b.verify().await.expect("one intact chain");
    assert_eq!(a.by_time(0, u64::MAX, 1_000).await.unwrap().len(), 400);
}

#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sqlite_sinks_on_one_file_keep_one_chain() {
    use toolguard::sqlite::SqliteAuditSink;
    let path = store_support::sqlite_path("two_writers");
    // One sink with its own writer, one writing through a store's connection.
    let store = toolguard::sqlite::SqliteStore::open(&path).unwrap();
    let a = Arc::new(SqliteAuditSink::open(&path).unwrap());
    let b = Arc::new(store.audit_sink().unwrap());
    two_writers(a, b).await;
    drop(store);
    store_support::remove_sqlite(&path);
}

#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
async fn two_postgres_sinks_on_one_schema_keep_one_chain() {
    use toolguard::postgres::PgAuditSink;
    use toolguard::postgres::{PgConfig, PgStore};
    let test = "two_postgres_sinks_on_one_schema_keep_one_chain";
    let Some(url) = store_support::pg_url(test) else {
        return;
    };
    let config = PgConfig::new(url)
        .schema(store_support::unique("two_writers"))
        .pool_size(4);
    let store = PgStore::connect(&config).await.unwrap();
    let a = Arc::new(PgAuditSink::connect(&config).await.unwrap());
    let b = Arc::new(PgAuditSink::connect(&config).await.unwrap());
    let result = tokio::spawn(two_writers(a, b)).await;
    let _ = store.drop_schema().await;
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}
