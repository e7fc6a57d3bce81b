//! The audit trail cannot be truncated or rewritten unnoticed, on the memory, SQLite (feature
//! `sqlite`) and PostgreSQL (feature `postgres`, `TOOLGUARD_PG_URL`) sinks.
//!
//! Each sink seals entries with the host keys and writes a signed checkpoint after every entry
//! to a checkpoint sink outside the store. The attacker has full write access to the audit table
//! (read every entry, rewrite the table) but not the key: they delete the newest entry, the newest
//! k entries, edit an entry and recompute every later hash (plain SHA-256, or HMAC under a key of
//! their own with the same key id), reorder entries, insert an entry in the middle, append a
//! forged one. Each attack is detected, naming the entry.

mod store_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use store_support::transfer_record as record;
use toolguard::HostKeys;
use toolguard::audit::{
    AuditAnchor, AuditEntry, AuditQuery, AuditSink, ChainBreak, Checkpoint, CheckpointPolicy,
    MemoryAuditSink, MemoryCheckpoints, VerifyError, seal,
};
use toolguard::digest::{canonical_json, sha256_hex};

type Rewrite = Box<
    dyn Fn(Box<dyn FnOnce(&mut Vec<AuditEntry>) + Send>) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// A keyed sink under test, its checkpoints, and the attacker's write access to its table.
struct Trail {
    sink: Arc<dyn Sink>,
    checkpoints: Arc<MemoryCheckpoints>,
    rewrite: Rewrite,
    /// Removes the test's file or schema.
    cleanup: std::sync::Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>,
}

trait Sink: AuditSink + AuditQuery {}
impl<T: AuditSink + AuditQuery> Sink for T {}

fn keys() -> Arc<HostKeys> {
    Arc::new(HostKeys::new("k1", *b"audit-test-secret-0123456789abcd").unwrap())
}

fn anchor(checkpoints: &Arc<MemoryCheckpoints>, every_entries: u64) -> AuditAnchor {
    AuditAnchor::new(keys()).checkpoints(
        checkpoints.clone(),
        CheckpointPolicy {
            every_entries,
            every: Duration::from_secs(3600),
        },
    )
}

async fn filled(trail: &Trail, n: u64) {
    for i in 1..=n {
        assert_eq!(trail.sink.append(record(i)).await.unwrap(), i);
    }
    assert_eq!(trail.checkpoints.latest().map(|c| c.seq), Some(n));
}

async fn verdict(trail: &Trail) -> Result<u64, ChainBreak> {
    match trail.sink.verify_against(&trail.checkpoints.all()).await {
        Ok(report) => Ok(report.entries),
        Err(VerifyError::Broken(b)) => Err(b),
        Err(e) => panic!("trail unreadable: {e}"),
    }
}

/// The attacker's plain SHA-256 rechain from entry `from` on.
fn rechain_plain(entries: &mut [AuditEntry], from: usize) {
    for i in from..entries.len() {
        if i > 0 {
            entries[i].prev_hash = entries[i - 1].hash.clone();
        }
        let e = &entries[i];
        let doc = canonical_json(&serde_json::to_value((e.seq, &e.record)).unwrap());
        entries[i].hash = sha256_hex(format!("{}\n{doc}", e.prev_hash).as_bytes()).into();
    }
}

/// The attacker's rechain under a key of their own that reuses the host key's id.
fn rechain_own_key(entries: &mut [AuditEntry], from: usize) {
    let own = Arc::new(HostKeys::new("k1", [0x42u8; 32]).unwrap());
    for i in from..entries.len() {
        let prev = if i > 0 {
            entries[i - 1].hash.clone()
        } else {
            entries[i].prev_hash.clone()
        };
        entries[i] = seal(&own, entries[i].seq, entries[i].record.clone(), &prev);
    }
}

async fn untouched_trail_verifies(t: &Trail) {
    filled(t, 5).await;
    assert_eq!(verdict(t).await, Ok(5));
    assert_eq!(t.checkpoints.all().len(), 5, "one checkpoint per entry");
    assert!(t.checkpoints.all().iter().all(|c| c.verify(&keys())));
}

async fn delete_last(t: &Trail) {
    filled(t, 5).await;
    (t.rewrite)(Box::new(|e| {
        e.pop();
    }))
    .await;
    // The shorter chain is intact: only the checkpoint shows what is missing.
    t.sink.verify().await.unwrap();
    assert_eq!(
        verdict(t).await,
        Err(ChainBreak::Truncated {
            expected: 5,
            last: 4
        })
    );
}

async fn delete_last_k(t: &Trail) {
    filled(t, 6).await;
    (t.rewrite)(Box::new(|e| e.truncate(3))).await;
    assert_eq!(
        verdict(t).await,
        Err(ChainBreak::Truncated {
            expected: 6,
            last: 3
        })
    );
    (t.rewrite)(Box::new(|e| e.clear())).await;
    assert_eq!(
        verdict(t).await,
        Err(ChainBreak::Truncated {
            expected: 6,
            last: 0
        })
    );
}

async fn edit_and_rechain(t: &Trail) {
    filled(t, 5).await;
    (t.rewrite)(Box::new(|e| {
        e[2].record.tenant = "mallory".into();
        rechain_plain(e, 2);
    }))
    .await;
    assert_eq!(verdict(t).await, Err(ChainBreak::Unsealed { seq: 3 }));
    assert_eq!(
        t.sink.verify().await,
        Err(VerifyError::Broken(ChainBreak::Unsealed { seq: 3 }))
    );
    (t.rewrite)(Box::new(|e| rechain_own_key(e, 2))).await;
    assert_eq!(verdict(t).await, Err(ChainBreak::Altered { seq: 3 }));
}

async fn reorder(t: &Trail) {
    filled(t, 5).await;
    // Swap the records of entries 2 and 3, keeping sequence numbers and hashes.
    (t.rewrite)(Box::new(|e| {
        let r = e[1].record.clone();
        e[1].record = e[2].record.clone();
        e[2].record = r;
    }))
    .await;
    assert_eq!(verdict(t).await, Err(ChainBreak::Altered { seq: 2 }));
    // Swap whole entries and renumber them.
    (t.rewrite)(Box::new(|e| {
        let r = e[1].record.clone();
        e[1].record = e[2].record.clone();
        e[2].record = r;
        e.swap(1, 2);
        e[1].seq = 2;
        e[2].seq = 3;
    }))
    .await;
    assert!(matches!(
        verdict(t).await,
        Err(ChainBreak::Unlinked { seq: 2 } | ChainBreak::Altered { seq: 2 })
    ));
}

async fn insert(t: &Trail) {
    filled(t, 5).await;
    // A forged entry 3, the old 3..5 renumbered 4..6, everything after rechained.
    (t.rewrite)(Box::new(|e| {
        let mut forged = e[2].clone();
        forged.record.call_id = "forged".into();
        e.insert(2, forged);
        for (i, entry) in e.iter_mut().enumerate() {
            entry.seq = i as u64 + 1;
        }
        rechain_own_key(e, 2);
    }))
    .await;
    assert_eq!(verdict(t).await, Err(ChainBreak::Altered { seq: 3 }));
}

async fn append_forged(t: &Trail) {
    filled(t, 5).await;
    (t.rewrite)(Box::new(|e| {
        let mut forged = e[4].clone();
        forged.seq = 6;
        forged.record.call_id = "forged".into();
        forged.prev_hash = e[4].hash.clone();
        e.push(forged);
        rechain_plain(e, 5);
    }))
    .await;
    assert_eq!(verdict(t).await, Err(ChainBreak::Unsealed { seq: 6 }));
}

async fn forged_or_rewritten_checkpoints(t: &Trail) {
    filled(t, 4).await;
    let mut cps = t.checkpoints.all();
    // The attacker cannot sign a checkpoint for a shorter trail.
    cps[3].seq = 2;
    assert_eq!(
        t.sink.verify_against(&cps).await,
        Err(VerifyError::Broken(ChainBreak::ForgedCheckpoint { seq: 2 }))
    );
    // A rewritten entry 2 that passes the chain check (here: the attacker rechained with the
    // host's own key, as if it had leaked earlier) still differs from the checkpoint.
    let real = Checkpoint::new(&keys(), 2, "k1:00", 0);
    assert_eq!(
        t.sink.verify_against(&[real]).await,
        Err(VerifyError::Broken(ChainBreak::AnchorMismatch { seq: 2 }))
    );
}

/// With checkpoints every 3 entries, what was appended after the newest checkpoint is still
/// protected against editing, and against removal once the next checkpoint is written.
async fn checkpoint_window(b: &Trail) {
    for i in 1..=4 {
        b.sink.append(record(i)).await.unwrap();
    }
    assert_eq!(b.checkpoints.latest().map(|c| c.seq), Some(3));
    (b.rewrite)(Box::new(|e| {
        e[3].record.tenant = "mallory".into();
    }))
    .await;
    assert_eq!(verdict(b).await, Err(ChainBreak::Altered { seq: 4 }));
}

// ---------------------------------------------------------------- backends

fn memory_trail(every: u64) -> Option<Trail> {
    let checkpoints = Arc::new(MemoryCheckpoints::new());
    let sink = Arc::new(MemoryAuditSink::with_anchor(anchor(&checkpoints, every)));
    let s2 = sink.clone();
    Some(Trail {
        sink,
        checkpoints,
        rewrite: Box::new(move |f| {
            s2.with_storage(f);
            Box::pin(async {})
        }),
        cleanup: std::sync::Mutex::new(None),
    })
}

#[cfg(feature = "sqlite")]
fn sqlite_trail(every: u64, test: &str) -> Option<Trail> {
    use rusqlite;
    use toolguard::sqlite::Durability;
    use toolguard::sqlite::SqliteAuditSink;

    let path = store_support::sqlite_path(test);
    let checkpoints = Arc::new(MemoryCheckpoints::new());
    let sink = Arc::new(
        SqliteAuditSink::open_anchored(&path, Durability::Full, anchor(&checkpoints, every))
            .unwrap(),
    );
    let s2 = sink.clone();
    let cpath = path.clone();
    Some(Trail {
        sink,
        checkpoints,
        cleanup: std::sync::Mutex::new(Some(Box::pin(async move {
            store_support::remove_sqlite(&cpath)
        }))),
        rewrite: Box::new(move |f| {
            let (path, s2) = (path.clone(), s2.clone());
            Box::pin(async move {
                let mut entries = read_all(&*s2).await;
                f(&mut entries);
                tokio::task::spawn_blocking(move || {
                    let mut c = rusqlite::Connection::open(&path).unwrap();
                    let tx = c.transaction().unwrap();
                    tx.execute("DELETE FROM toolguard_audit", []).unwrap();
                    for e in &entries {
                        let (sql, p) = insert_row(e);
                        tx.execute(&sql.replace('$', "?"), rusqlite::params_from_iter(p))
                            .unwrap();
                    }
                    tx.commit().unwrap();
                })
                .await
                .unwrap();
            })
        }),
    })
}

/// Every stored entry, in order (the attacker reads the table).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
async fn read_all(sink: &dyn Sink) -> Vec<AuditEntry> {
    let mut all = sink.by_time(0, u64::MAX, 1_000_000).await.unwrap();
    all.sort_by_key(|e| e.seq);
    all
}

/// The INSERT of one stored row, values as text/integers.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn insert_row(e: &AuditEntry) -> (String, Vec<SqlValue>) {
    let sql = "INSERT INTO toolguard_audit
        (seq, time_ms, tenant, subject, tool, status, record, prev_hash, hash)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        .to_owned();
    let values = vec![
        SqlValue::Int(e.seq as i64),
        SqlValue::Int(e.record.time_ms as i64),
        SqlValue::Text(Some(e.record.tenant.to_string())),
        SqlValue::Text(Some(e.record.subject.to_string())),
        SqlValue::Text(Some(e.record.tool.to_string())),
        SqlValue::Text(e.record.status.map(|s| s.as_str().to_owned())),
        SqlValue::Text(Some(serde_json::to_string(&e.record).unwrap())),
        SqlValue::Text(Some(e.prev_hash.to_string())),
        SqlValue::Text(Some(e.hash.to_string())),
    ];
    (sql, values)
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
#[derive(Debug)]
enum SqlValue {
    Int(i64),
    Text(Option<String>),
}

#[cfg(feature = "sqlite")]
impl rusqlite::ToSql for SqlValue {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        match self {
            SqlValue::Int(i) => i.to_sql(),
            SqlValue::Text(t) => t.to_sql(),
        }
    }
}

#[cfg(feature = "postgres")]
async fn pg_trail(every: u64, test: &str) -> Option<Trail> {
    use toolguard::postgres::PgAuditSink;
    use toolguard::postgres::{PgConfig, PgStore};

    let url = store_support::pg_url(test)?;
    let config = PgConfig::new(url)
        .schema(store_support::unique(test))
        .pool_size(4);
    let store = Arc::new(PgStore::connect(&config).await.unwrap());
    let checkpoints = Arc::new(MemoryCheckpoints::new());
    let sink = Arc::new(
        PgAuditSink::connect_anchored(&config, anchor(&checkpoints, every))
            .await
            .unwrap(),
    );
    let s2 = sink.clone();
    let dropper = store.clone();
    Some(Trail {
        sink,
        checkpoints,
        cleanup: std::sync::Mutex::new(Some(Box::pin(async move {
            let _ = dropper.drop_schema().await;
        }))),
        rewrite: Box::new(move |f| {
            let (store, s2) = (store.clone(), s2.clone());
            Box::pin(async move {
                let mut entries = read_all(&*s2).await;
                f(&mut entries);
                let mut c = store.pool().get().await.unwrap();
                let tx = c.transaction().await.unwrap();
                tx.execute("DELETE FROM toolguard_audit", &[])
                    .await
                    .unwrap();
                for e in &entries {
                    let (sql, values) = insert_row(e);
                    let params: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>> = values
                        .into_iter()
                        .map(|v| -> Box<dyn tokio_postgres::types::ToSql + Sync + Send> {
                            match v {
                                SqlValue::Int(i) => Box::new(i),
                                SqlValue::Text(t) => Box::new(t),
                            }
                        })
                        .collect();
                    let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> =
                        params.iter().map(|p| &**p as _).collect();
                    tx.execute(&sql, &refs).await.unwrap();
                }
                tx.commit().await.unwrap();
            })
        }),
    })
}

macro_rules! audit_suite {
    ($module:ident, $make:expr, #[$attr:meta]) => {
        mod $module {
            audit_suite!(@tests $make, #[$attr]:
                untouched_trail_verifies: 1,
                delete_last: 1,
                delete_last_k: 1,
                edit_and_rechain: 1,
                reorder: 1,
                insert: 1,
                append_forged: 1,
                forged_or_rewritten_checkpoints: 1,
                checkpoint_window: 3,
            );
        }
    };
    (@tests $make:expr, #[$attr:meta]: $($name:ident: $every:expr),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[$attr]
            async fn $name() {
                #[allow(clippy::redundant_closure_call)]
                let trail = ($make)($every, stringify!($name)).await;
                if let Some(trail) = trail {
                    let cleanup = trail.cleanup.lock().unwrap().take();
                    let trail = std::sync::Arc::new(trail);
                    let t2 = trail.clone();
                    let result = tokio::spawn(async move { crate::$name(&t2).await }).await;
                    if let Some(c) = cleanup {
                        c.await;
                    }
                    if let Err(e) = result {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
            }
        )*
    };
}

audit_suite!(memory, |every, _test| async move { crate::memory_trail(every) }, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "sqlite")]
audit_suite!(sqlite, |every, test| async move { crate::sqlite_trail(every, test) }, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "postgres")]
audit_suite!(postgres, crate::pg_trail, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
