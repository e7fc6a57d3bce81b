//! Backends for the store conformance suite: the same test functions run against memory,
//! SQLite, PostgreSQL (`TOOLGUARD_PG_URL`) and Redis (`TOOLGUARD_REDIS_URL`). A backend whose
//! service variable is unset prints `SKIPPED: ...` and the test returns without asserting.

#![allow(dead_code)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use toolguard::BoxFuture;
use toolguard::audit::{AuditError, AuditQuery, AuditRecord, AuditSink, MemoryAuditSink};
use toolguard::store::{
    ApprovalStore, IdempotencyStore, MemoryStore, OperationStore, SessionLedger,
};

/// An audit sink that can be queried and verified.
pub trait AuditBackend: AuditSink + AuditQuery {}
impl<T: AuditSink + AuditQuery> AuditBackend for T {}

/// The `i`-th record of a trail of transfers by alice (call id `call-<i>`).
pub fn transfer_record(i: u64) -> AuditRecord {
    AuditRecord {
        time_ms: 1_000 + i,
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        call_id: format!("call-{i}").into(),
        ..AuditRecord::default()
    }
}

/// A shared audit backend, usable as the dispatcher's sink.
#[derive(Clone)]
pub struct SharedAudit(pub Arc<dyn AuditBackend>);

impl AuditSink for SharedAudit {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        self.0.append(record)
    }
}

type Cleanup = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>;
type Tamper =
    Arc<dyn Fn(TamperKind, u64) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// How a test tampers with a stored audit entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TamperKind {
    /// Change the stored record's content.
    Alter,
    /// Change only the indexed tenant column (SQL backends).
    Column,
    /// Delete the entry.
    Delete,
}

/// One backend under test. Stores a backend does not provide are `None`.
pub struct Backend {
    pub name: &'static str,
    pub idem: Arc<dyn IdempotencyStore>,
    pub ledger: Arc<dyn SessionLedger>,
    pub approvals: Option<Arc<dyn ApprovalStore>>,
    pub operations: Option<Arc<dyn OperationStore>>,
    pub audit: Option<Arc<dyn AuditBackend>>,
    pub tamper: Option<Tamper>,
    /// The PostgreSQL store, for backends built on one.
    #[cfg(feature = "postgres")]
    pub pg: Option<Arc<toolguard::postgres::PgStore>>,
    cleanup: std::sync::Mutex<Option<Cleanup>>,
}

impl Backend {
    /// Removes what the test stored (schema, keys, files).
    pub async fn cleanup(&self) {
        let c = self
            .cleanup
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(c) = c {
            c().await;
        }
    }
}

/// Says on the real stderr (not captured by the test harness, so it shows in every run) that a
/// service test did not run.
pub fn skipped(var: &str, backend: &str, test: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {var} not set ({backend}::{test})"
    );
}

/// A unique name for this test's schema, key prefix or file.
pub fn unique(test: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let mut t: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    t.truncate(30);
    format!("tg_{t}_{}", &id[..10])
}

pub async fn memory(_test: &str) -> Option<Backend> {
    let store = Arc::new(MemoryStore::new());
    let audit = Arc::new(MemoryAuditSink::new());
    let a2 = audit.clone();
    let tamper: Tamper = Arc::new(move |kind, seq| {
        a2.with_storage(|entries| match kind {
            TamperKind::Alter | TamperKind::Column => {
                if let Some(e) = entries.iter_mut().find(|e| e.seq == seq) {
                    e.record.tenant = "mallory".into();
                }
            }
            TamperKind::Delete => entries.retain(|e| e.seq != seq),
        });
        Box::pin(async {})
    });
    Some(Backend {
        name: "memory",
        idem: store.clone(),
        ledger: store.clone(),
        approvals: Some(store.clone()),
        operations: Some(store),
        audit: Some(audit),
        tamper: Some(tamper),
        #[cfg(feature = "postgres")]
        pg: None,
        cleanup: std::sync::Mutex::new(None),
    })
}

#[cfg(feature = "sqlite")]
pub fn sqlite_path(test: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{}.db", unique(test)))
}

#[cfg(feature = "sqlite")]
pub fn remove_sqlite(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

/// Tampers with the audit trail of the SQLite file at `tpath`.
#[cfg(feature = "sqlite")]
fn sqlite_tamper(tpath: std::path::PathBuf) -> Tamper {
    Arc::new(move |kind, seq| {
        let path = tpath.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let c = rusqlite::Connection::open(&path).expect("open for tampering");
                let sql = match kind {
                    TamperKind::Alter => {
                        "UPDATE toolguard_audit SET record = replace(record, '\"call_id\":\"', '\"call_id\":\"x') WHERE seq = ?1"
                    }
                    TamperKind::Column => {
                        "UPDATE toolguard_audit SET tenant = 'mallory' WHERE seq = ?1"
                    }
                    TamperKind::Delete => "DELETE FROM toolguard_audit WHERE seq = ?1",
                };
                let n = c.execute(sql, [seq as i64]).expect("tamper");
                assert_eq!(n, 1, "tampered one row");
            })
            .await
            .expect("tamper task");
        })
    })
}

#[cfg(feature = "sqlite")]
pub async fn sqlite(test: &str) -> Option<Backend> {
    use toolguard::sqlite::SqliteAuditSink;
    use toolguard::sqlite::SqliteStore;

    let path = sqlite_path(test);
    let store = Arc::new(SqliteStore::open(&path).expect("open sqlite store"));
    let audit = Arc::new(SqliteAuditSink::open(&path).expect("open sqlite audit"));
    let tamper = sqlite_tamper(path.clone());
    let cpath = path.clone();
    Some(Backend {
        name: "sqlite",
        idem: store.clone(),
        ledger: store.clone(),
        approvals: Some(store.clone()),
        operations: Some(store),
        audit: Some(audit),
        tamper: Some(tamper),
        #[cfg(feature = "postgres")]
        pg: None,
        cleanup: std::sync::Mutex::new(Some(Box::new(move || {
            Box::pin(async move { remove_sqlite(&cpath) })
        }))),
    })
}

/// SQLite as `DispatcherBuilder::sqlite` sets it up: fully synced, the audit trail written
/// through the store's connection (the writes a later synced write covers answered at commit).
#[cfg(feature = "sqlite")]
pub async fn sqlite_shared(test: &str) -> Option<Backend> {
    use toolguard::sqlite::{Durability, SqliteStore};

    let path = sqlite_path(test);
    let store = Arc::new(SqliteStore::open_with(&path, Durability::Full).expect("open sqlite"));
    let audit = Arc::new(store.audit_sink().expect("shared sqlite audit"));
    let cpath = path.clone();
    Some(Backend {
        name: "sqlite_shared",
        idem: store.clone(),
        ledger: store.clone(),
        approvals: Some(store.clone()),
        operations: Some(store),
        audit: Some(audit),
        tamper: Some(sqlite_tamper(path)),
        #[cfg(feature = "postgres")]
        pg: None,
        cleanup: std::sync::Mutex::new(Some(Box::new(move || {
            Box::pin(async move { remove_sqlite(&cpath) })
        }))),
    })
}

#[cfg(feature = "postgres")]
pub fn pg_url(test: &str) -> Option<String> {
    match std::env::var("TOOLGUARD_PG_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            skipped("TOOLGUARD_PG_URL", "postgres", test);
            None
        }
    }
}

#[cfg(feature = "postgres")]
pub async fn postgres(test: &str) -> Option<Backend> {
    use toolguard::postgres::PgAuditSink;
    use toolguard::postgres::{PgConfig, PgStore};

    let url = pg_url(test)?;
    let config = PgConfig::new(url).schema(unique(test)).pool_size(8);
    let store = Arc::new(PgStore::connect(&config).await.expect("connect postgres"));
    let audit = Arc::new(PgAuditSink::connect(&config).await.expect("connect audit"));
    let pool = store.pool().clone();
    let tamper: Tamper = Arc::new(move |kind, seq| {
        let pool = pool.clone();
        Box::pin(async move {
            let c = pool.get().await.expect("pg client");
            let sql = match kind {
                TamperKind::Alter => {
                    "UPDATE toolguard_audit SET record = replace(record, '\"call_id\":\"', '\"call_id\":\"x') WHERE seq = $1"
                }
                TamperKind::Column => {
                    "UPDATE toolguard_audit SET tenant = 'mallory' WHERE seq = $1"
                }
                TamperKind::Delete => "DELETE FROM toolguard_audit WHERE seq = $1",
            };
            let n = c.execute(sql, &[&(seq as i64)]).await.expect("tamper");
            assert_eq!(n, 1, "tampered one row");
        })
    });
    let s2 = store.clone();
    Some(Backend {
        name: "postgres",
        #[cfg(feature = "postgres")]
        pg: Some(store.clone()),
        idem: store.clone(),
        ledger: store.clone(),
        approvals: Some(store.clone()),
        operations: Some(store),
        audit: Some(audit),
        tamper: Some(tamper),
        cleanup: std::sync::Mutex::new(Some(Box::new(move || {
            Box::pin(async move {
                let _ = s2.drop_schema().await;
            })
        }))),
    })
}

/// PostgreSQL with the audit trail through the store's pool (`PgStore::audit_sink`): the writes
/// a later synced write covers commit without waiting for the disk.
#[cfg(feature = "postgres")]
pub async fn postgres_shared(test: &str) -> Option<Backend> {
    let mut backend = postgres(test).await?;
    let store = backend.pg.clone()?;
    backend.name = "postgres_shared";
    backend.audit = Some(Arc::new(store.audit_sink()));
    Some(backend)
}

#[cfg(feature = "redis")]
pub fn redis_url(test: &str) -> Option<String> {
    match std::env::var("TOOLGUARD_REDIS_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            skipped("TOOLGUARD_REDIS_URL", "redis", test);
            None
        }
    }
}

#[cfg(feature = "redis")]
pub async fn redis(test: &str) -> Option<Backend> {
    use toolguard::redis::RedisStore;

    let url = redis_url(test)?;
    let store = Arc::new(
        RedisStore::connect(&url, unique(test))
            .await
            .expect("connect redis"),
    );
    let s2 = store.clone();
    Some(Backend {
        name: "redis",
        idem: store.clone(),
        ledger: store,
        approvals: None,
        operations: None,
        audit: None,
        tamper: None,
        #[cfg(feature = "postgres")]
        pg: None,
        cleanup: std::sync::Mutex::new(Some(Box::new(move || {
            Box::pin(async move {
                let _ = s2.clear().await;
            })
        }))),
    })
}

/// Runs `test` against `backend` (if available), cleans up even when the test panics, then
/// re-raises the panic.
pub async fn run<F, Fut>(backend: Option<Backend>, test: F)
where
    F: FnOnce(Arc<Backend>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(backend) = backend else { return };
    let backend = Arc::new(backend);
    let result = tokio::spawn(test(backend.clone())).await;
    backend.cleanup().await;
    if let Err(e) = result {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
        panic!("test task failed: {e}");
    }
}

/// A test's clean-up of its stores (drop a schema, delete its keys), taken once.
pub type PendingCleanup = std::sync::Mutex<Option<Pin<Box<dyn Future<Output = ()> + Send>>>>;

/// A set of stores a test file builds per backend, with its clean-up.
pub trait Rig: Send + Sync + 'static {
    /// The clean-up to run after the test.
    fn cleanup(&self) -> &PendingCleanup;
}

/// Runs `test` against `rig` (if its backend is available), runs the rig's clean-up even when
/// the test panics, then re-raises the panic.
pub async fn run_rig<R, F, Fut>(rig: Option<R>, test: F)
where
    R: Rig,
    F: FnOnce(Arc<R>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(rig) = rig else { return };
    let cleanup = rig.cleanup().lock().unwrap().take();
    let result = tokio::spawn(test(Arc::new(rig))).await;
    if let Some(c) = cleanup {
        c.await;
    }
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Fresh key `n` of the tests that cut a store's connections.
pub fn fresh_key(n: u64) -> toolguard::store::ScopedKey {
    toolguard::store::ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer".into(),
        key: format!("key-{n}").into(),
    }
}

/// The answer to the reservation of each fresh key.
pub type FreshAnswers = Vec<(
    u64,
    toolguard::store::StoreResult<toolguard::store::Reservation>,
)>;

/// Reserves `waves` × `per_wave` fresh keys ([`fresh_key`]), `per_wave` at a time; every key is
/// reserved once, so nobody else can hold it.
pub async fn reserve_fresh(
    store: Arc<dyn IdempotencyStore>,
    waves: u64,
    per_wave: u64,
) -> FreshAnswers {
    let hour = std::time::Duration::from_secs(3600);
    let mut answers = Vec::new();
    for wave in 0..waves {
        let mut tasks = Vec::new();
        for i in 0..per_wave {
            let store = store.clone();
            let n = wave * per_wave + i;
            tasks.push(tokio::spawn(async move {
                let now = std::time::SystemTime::now();
                let key = fresh_key(n);
                (
                    n,
                    store.reserve(&key, "digest", None, hour, hour, now).await,
                )
            }));
        }
        for t in tasks {
            answers.push(t.await.expect("reserve task"));
        }
    }
    answers
}

/// What the answers of [`reserve_fresh`] came to.
#[derive(Debug, Default)]
pub struct FreshOutcome {
    /// Keys answered as reserved.
    pub reserved: usize,
    /// Reservations that failed (closed: whether they happened could not be told).
    pub failed: usize,
    /// Fresh keys answered as held by someone else: never right.
    pub foreign: Vec<(u64, toolguard::store::IdempotencyRecord)>,
    /// Keys answered as reserved whose owner token does not complete them.
    pub unusable: Vec<(u64, toolguard::store::StoreResult<bool>)>,
}

/// Checks `answers` once the store is left alone: each key reserved is completed with the
/// owner token its caller got.
pub async fn check_fresh(store: &dyn IdempotencyStore, answers: &FreshAnswers) -> FreshOutcome {
    use toolguard::store::{Reservation, StoredOutcome};
    let mut out = FreshOutcome::default();
    let hour = std::time::Duration::from_secs(3600);
    for (n, answer) in answers {
        match answer {
            Ok(Reservation::Reserved { owner }) => {
                out.reserved += 1;
                let outcome = StoredOutcome::new(toolguard::Status::Ok);
                let now = std::time::SystemTime::now();
                let completed = store
                    .complete(&fresh_key(*n), owner, outcome, hour, now)
                    .await;
                if !matches!(completed, Ok(true)) {
                    out.unusable.push((*n, completed));
                }
            }
            Ok(Reservation::Existing(record)) => out.foreign.push((*n, record.clone())),
            Err(_) => out.failed += 1,
        }
    }
    out
}
