//! PostgreSQL backend (feature `postgres`): idempotency records, approval requests, session
//! ledgers and operation records, so that a whole dispatcher (with
//! [`crate::audit::PgAuditSink`]) runs on one database shared by many replicas.
//!
//! Tables live in one schema ([`PgConfig::schema`], `public` by default); the embedded
//! migrations are applied on connect under an advisory lock and recorded in
//! `toolguard_schema_version`. Idempotency uses `INSERT ... ON CONFLICT` with an owner-token
//! column, approvals compare-and-set on `version`, and the ledger serializes admissions per scope
//! with transaction-level advisory locks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use crate::batch::{Batcher, Write, Written};
use toolguard_pipeline::clock::unix_millis;
use toolguard_pipeline::store::encode::{
    LEDGER_HOLDS, PURGE_INDEXES, i64_of, millis, new_token, u64_of, without_credentials,
};
pub(crate) use toolguard_pipeline::store::*;
use toolguard_pipeline::store::{
    ApprovalStore, IdempotencyStore, OperationStore, SessionLedger, StoreError, StoreResult,
    record_then_complete,
};
use toolguard_pipeline::tool::BoxFuture;

/// Current version of the PostgreSQL schema.
pub const PG_SCHEMA_VERSION: i32 = 4;

const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE IF NOT EXISTS toolguard_idempotency (
    key TEXT PRIMARY KEY,
    request_digest TEXT NOT NULL,
    operation_id TEXT,
    owner TEXT,
    lease_until_ms BIGINT NOT NULL,
    outcome TEXT,
    expires_at_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolguard_approvals (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    version BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolguard_approvals_pending
    ON toolguard_approvals (tenant, state, created_at_ms, id);
CREATE TABLE IF NOT EXISTS toolguard_ledger (
    id BIGSERIAL PRIMARY KEY,
    scope TEXT NOT NULL,
    entry TEXT NOT NULL,
    amount BIGINT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolguard_ledger_scope ON toolguard_ledger (scope, at_ms);
CREATE INDEX IF NOT EXISTS toolguard_ledger_entry ON toolguard_ledger (entry);
CREATE TABLE IF NOT EXISTS toolguard_operations (
    id TEXT PRIMARY KEY,
    updated_at_ms BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolguard_audit (
    seq BIGINT PRIMARY KEY,
    time_ms BIGINT NOT NULL,
    tenant TEXT NOT NULL,
    subject TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT,
    record TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolguard_audit_actor ON toolguard_audit (tenant, subject, seq);
CREATE INDEX IF NOT EXISTS toolguard_audit_tool ON toolguard_audit (tool, seq);
CREATE INDEX IF NOT EXISTS toolguard_audit_time ON toolguard_audit (time_ms, seq);
"#,
    PURGE_INDEXES,
    LEDGER_HOLDS,
    toolguard_pipeline::provenance::SOURCES_TABLE,
];

/// Advisory lock key serializing migrations.
const MIGRATION_LOCK: i64 = 0x746f_6f6c_6775_6172;

/// Where and how to connect.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PgConfig {
    /// A `postgres://` URL or key-value connection string. It may hold a password: `Debug`
    /// shows it without one.
    pub url: String,
    /// Schema holding the tables (letters, digits and `_` only).
    pub schema: String,
    /// Most connections in the pool.
    pub pool_size: usize,
}

impl PgConfig {
    /// Connects to `url`, schema `public`, 16 pooled connections.
    pub fn new(url: impl Into<String>) -> Self {
        PgConfig {
            url: url.into(),
            schema: "public".to_owned(),
            pool_size: 16,
        }
    }

    /// Uses tables in `schema` (created if missing).
    #[must_use]
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// Sets the pool size.
    #[must_use]
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }
}

impl std::fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgConfig")
            .field("url", &without_credentials(&self.url))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

pub(crate) fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::caused_by("postgres", e)
}

fn valid_schema(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

/// Builds the pool and applies the migrations.
pub(crate) async fn connect_pool(config: &PgConfig) -> StoreResult<Pool> {
    let pool = build_pool(config, Commits::Synced, Sessions::Calls)?;
    migrate(&pool, &config.schema).await?;
    Ok(pool)
}

/// How the sessions of a pool commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Commits {
    /// A commit returns once it is on disk (the server's `synchronous_commit`).
    Synced,
    /// `synchronous_commit = off`: a commit returns once it is visible; it reaches the disk
    /// with the next synced commit (which flushes the log up to itself) or within the server's
    /// `wal_writer_delay`.
    Relaxed,
}

/// What the sessions of a pool run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sessions {
    /// Any statement: `config.pool_size` sessions.
    Calls,
    /// The fixed batch statement of a group-commit writer or of the provenance reader, whose
    /// every row is found by index: one session whose planner reads tables by index only (no
    /// sequential scan, no hash or merge join). The statement's plan is cached once per
    /// session, possibly while the tables are still nearly empty, and a plan that scanned them
    /// whole would then be kept as they grow. The session uses that one generic plan for every
    /// batch: left to choose, the server kept planning the writer's statement anew for each
    /// batch's arrays, which took longer than running it (0.21 ms against 0.17 ms for ten
    /// reservations; 0.05 ms with the cached plan).
    Batch,
}

/// A pool of sessions on the schema (connected on first use).
fn build_pool(config: &PgConfig, commits: Commits, sessions: Sessions) -> StoreResult<Pool> {
    if !valid_schema(&config.schema) {
        return Err(StoreError::new(format!(
            "postgres: schema name `{}` must be lowercase letters, digits and `_`",
            config.schema
        )));
    }
    let mut pg: tokio_postgres::Config = config.url.parse().map_err(err)?;
    let relaxed = match commits {
        Commits::Synced => "",
        Commits::Relaxed => " -c synchronous_commit=off",
    };
    let (indexed, size) = match sessions {
        Sessions::Calls => ("", config.pool_size),
        Sessions::Batch => (
            " -c enable_seqscan=off -c enable_hashjoin=off -c enable_mergejoin=off \
             -c plan_cache_mode=force_generic_plan",
            1,
        ),
    };
    pg.options(format!(
        "-c search_path=\"{}\"{relaxed}{indexed}",
        config.schema
    ));
    pg.connect_timeout(Duration::from_secs(10));
    let manager = Manager::from_config(
        pg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    Pool::builder(manager)
        .max_size(size)
        .wait_timeout(Some(Duration::from_secs(10)))
        .create_timeout(Some(Duration::from_secs(10)))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .build()
        .map_err(err)
}

/// Creates `schema` if missing and applies the pending migrations under an advisory lock.
async fn migrate(pool: &Pool, schema: &str) -> StoreResult<()> {
    let mut client = pool.get().await.map_err(err)?;
    let tx = client.transaction().await.map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(err)?;
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS \"{s}\"; SET LOCAL search_path TO \"{s}\";
         CREATE TABLE IF NOT EXISTS toolguard_schema_version (version INTEGER NOT NULL);",
        s = schema
    ))
    .await
    .map_err(err)?;
    let current: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM toolguard_schema_version",
            &[],
        )
        .await
        .map_err(err)?
        .try_get(0)
        .map_err(err)?;
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i32 + 1;
        if version > current {
            tx.batch_execute(sql).await.map_err(err)?;
            tx.execute(
                "INSERT INTO toolguard_schema_version (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(err)?;
        }
    }
    tx.commit().await.map_err(err)
}

/// Parameters of a statement.
type Params<'p> = &'p [&'p (dyn tokio_postgres::types::ToSql + Sync)];

/// Runs `sql` in `tx`, prepared once per session.
async fn tx_exec(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, tokio_postgres::Error> {
    let stmt = tx.prepare_cached(sql).await?;
    tx.execute(&stmt, params).await
}

/// The one row of `sql` in `tx`, prepared once per session.
async fn tx_one(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    params: Params<'_>,
) -> Result<tokio_postgres::Row, tokio_postgres::Error> {
    let stmt = tx.prepare_cached(sql).await?;
    tx.query_one(&stmt, params).await
}

/// The row of `sql` in `tx`, if any, prepared once per session.
async fn tx_opt(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    let stmt = tx.prepare_cached(sql).await?;
    tx.query_opt(&stmt, params).await
}

/// The rows of `sql` in `tx`, prepared once per session.
async fn tx_rows(
    tx: &deadpool_postgres::Transaction<'_>,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let stmt = tx.prepare_cached(sql).await?;
    tx.query(&stmt, params).await
}

/// Runs `sql` on `c`, prepared once per session.
async fn c_exec(
    c: &deadpool_postgres::ClientWrapper,
    sql: &str,
    params: Params<'_>,
) -> Result<u64, tokio_postgres::Error> {
    let stmt = c.prepare_cached(sql).await?;
    c.execute(&stmt, params).await
}

/// The row of `sql` on `c`, if any, prepared once per session.
async fn c_opt(
    c: &deadpool_postgres::ClientWrapper,
    sql: &str,
    params: Params<'_>,
) -> Result<Option<tokio_postgres::Row>, tokio_postgres::Error> {
    let stmt = c.prepare_cached(sql).await?;
    c.query_opt(&stmt, params).await
}

/// The rows of `sql` on `c`, prepared once per session.
async fn c_rows(
    c: &deadpool_postgres::ClientWrapper,
    sql: &str,
    params: Params<'_>,
) -> Result<Vec<tokio_postgres::Row>, tokio_postgres::Error> {
    let stmt = c.prepare_cached(sql).await?;
    c.query(&stmt, params).await
}

/// What an operation record or a completion did.
fn applied(written: Written) -> StoreResult<bool> {
    match written {
        Written::Applied(done) => Ok(done),
        Written::Reserved(_) => Err(unexpected()),
    }
}

/// The writer answered a write with the answer of another kind of write.
fn unexpected() -> StoreError {
    StoreError::new("postgres: the store's writer gave a wrong answer".to_owned())
}

fn to_json<T: serde::Serialize>(v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(err)
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> StoreResult<T> {
    serde_json::from_str(s).map_err(err)
}

/// Every store of the dispatcher in PostgreSQL.
///
/// ```no_run
/// # async fn run() -> Result<(), toolguard_pipeline::store::StoreError> {
/// use std::sync::Arc;
/// use toolguard_postgres::PgAuditSink;
/// use toolguard_postgres::{PgConfig, PgStore};
///
/// let config = PgConfig::new("postgres://postgres@127.0.0.1:5432/app").schema("toolguard");
/// let store = Arc::new(PgStore::connect(&config).await?);
/// // A development trail; in production use `PgAuditSink::connect_anchored`.
/// let audit = PgAuditSink::connect(&config).await?;
/// let builder = toolguard_pipeline::Dispatcher::builder(())
///     .store(store)
///     .audit(audit)
///     .unanchored_audit("development database");
/// # let _ = builder; Ok(()) }
/// ```
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    /// Sessions with `synchronous_commit = off`, for the writes a call's later synced write
    /// covers (see [`PgStore::audit_sink`]).
    relaxed: Pool,
    /// Whether those writes use `relaxed`: set once an audit trail shares the store's pool.
    defer: Arc<AtomicBool>,
    /// Group commit of reservations, completions and operation records on `pool` and on
    /// `relaxed`.
    batched: Batcher,
    batched_relaxed: Batcher,
    /// Batched reads of provenance sources, on a session of their own.
    sources: crate::provenance::Reader,
    schema: String,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// The writer of the synced pool and a session of the store's own (tests of the writer).
    #[cfg(test)]
    pub(crate) fn writer(&self) -> (&Batcher, &Pool) {
        (&self.batched, &self.pool)
    }
}

impl PgStore {
    /// Connects, creating the schema and applying migrations if needed.
    ///
    /// Idempotency reservations and completions and operation records go through a writer task
    /// per pool (started on the current Tokio runtime) that writes everything queued with one
    /// statement, so concurrent calls share round trips and commits; reads of provenance sources
    /// likewise go through a reader task that answers every queued read with one statement.
    pub async fn connect(config: &PgConfig) -> StoreResult<Self> {
        let pool = connect_pool(config).await?;
        let relaxed = build_pool(config, Commits::Relaxed, Sessions::Calls)?;
        let writer = build_pool(config, Commits::Synced, Sessions::Batch)?;
        let relaxed_writer = build_pool(config, Commits::Relaxed, Sessions::Batch)?;
        // The reader's statement is planned once too, on a session of its own.
        let reader = build_pool(config, Commits::Synced, Sessions::Batch)?;
        Ok(PgStore {
            batched: Batcher::start(writer),
            batched_relaxed: Batcher::start(relaxed_writer),
            sources: crate::provenance::Reader::start(reader),
            pool,
            relaxed,
            defer: Arc::new(AtomicBool::new(false)),
            schema: config.schema.clone(),
        })
    }

    /// An audit trail in the store's schema, appending through the store's pool (group
    /// commit, as [`PgAuditSink::connect`](crate::audit::PgAuditSink::connect)).
    ///
    /// Its synced commit of a call's entry comes after every other write of the call, so from
    /// then on the store commits the writes that a later write of the same call covers (the
    /// idempotency reservation, its completion or release, the final operation record) without
    /// waiting for the disk (`synchronous_commit = off`): the operation record written before
    /// the handler runs (synced) flushes the log up to itself, reservation included, and the
    /// audit entry does so for the rest, so a call's outcome is on disk before its caller sees
    /// it, with two waits for the disk per call instead of five. Call it inside a Tokio runtime:
    /// the sink's writer task starts on it.
    pub fn audit_sink(&self) -> crate::audit::PgAuditSink {
        self.defer.store(true, Ordering::Relaxed);
        crate::audit::PgAuditSink::on_pool(self.pool.clone(), None)
    }

    /// [`audit_sink`](Self::audit_sink), sealing entries with the anchor's host keys and
    /// writing its checkpoints.
    pub fn audit_sink_anchored(
        &self,
        anchor: toolguard_pipeline::audit::AuditAnchor,
    ) -> crate::audit::PgAuditSink {
        self.defer.store(true, Ordering::Relaxed);
        crate::audit::PgAuditSink::on_pool(self.pool.clone(), Some(Arc::new(anchor)))
    }

    /// The pool for a write that a later synced write of the same call covers.
    fn covered(&self) -> &Pool {
        if self.defer.load(Ordering::Relaxed) {
            &self.relaxed
        } else {
            &self.pool
        }
    }

    /// The writer for a write that a later synced write of the same call covers.
    fn covered_batch(&self) -> &Batcher {
        if self.defer.load(Ordering::Relaxed) {
            &self.batched_relaxed
        } else {
            &self.batched
        }
    }

    /// The reader of provenance sources.
    pub(crate) fn source_reader(&self) -> &crate::provenance::Reader {
        &self.sources
    }

    /// The connection pool, for the family's own tests (which tamper with rows). Not public
    /// API: its type is the pool crate's, which follows that crate's releases.
    #[doc(hidden)]
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Drops the schema with every table in it (for tests that used a schema of their own).
    /// Refuses to drop `public`.
    pub async fn drop_schema(&self) -> StoreResult<()> {
        if self.schema == "public" {
            return Err(StoreError::new(
                "postgres: refusing to drop the `public` schema".to_owned(),
            ));
        }
        let client = self.pool.get().await.map_err(err)?;
        client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ))
            .await
            .map_err(err)
    }

    /// Deletes expired idempotency records and ledger reservations, and ledger entries older
    /// than `keep`.
    pub async fn purge(&self, now: SystemTime, keep: Duration) -> StoreResult<u64> {
        let client = self.pool.get().await.map_err(err)?;
        let now_ms = i64_of(unix_millis(now));
        let before = i64_of(unix_millis(now).saturating_sub(millis(keep)));
        let a = c_exec(
            &client,
            "DELETE FROM toolguard_idempotency WHERE expires_at_ms <= $1",
            &[&now_ms],
        )
        .await
        .map_err(err)?;
        let b = c_exec(
            &client,
            "DELETE FROM toolguard_ledger WHERE at_ms <= $1",
            &[&before],
        )
        .await
        .map_err(err)?;
        let h = c_exec(
            &client,
            "DELETE FROM toolguard_holds WHERE until_ms <= $1",
            &[&now_ms],
        )
        .await
        .map_err(err)?;
        Ok(a + b + h)
    }
}

/// The idempotency record in the columns of `row` from `at` on: request digest, operation id,
/// owner, lease end, outcome, expiry (the order of [`SELECT_RECORD`]).
pub(crate) fn read_record(row: &tokio_postgres::Row, at: usize) -> StoreResult<IdempotencyRecord> {
    let outcome: Option<String> = row.try_get(at + 4).map_err(err)?;
    let owner: Option<String> = row.try_get(at + 2).map_err(err)?;
    let lease: i64 = row.try_get(at + 3).map_err(err)?;
    let state = match outcome {
        Some(o) => RecordState::Done {
            outcome: from_json(&o)?,
        },
        None => RecordState::InFlight {
            owner: owner.unwrap_or_default(),
            lease_until_ms: u64_of(lease),
        },
    };
    Ok(IdempotencyRecord {
        request_digest: row.try_get(at).map_err(err)?,
        operation_id: row.try_get(at + 1).map_err(err)?,
        state,
        expires_at_ms: u64_of(row.try_get(at + 5).map_err(err)?),
    })
}

const SELECT_RECORD: &str = "SELECT request_digest, operation_id, owner, lease_until_ms, outcome, \
     expires_at_ms FROM toolguard_idempotency WHERE key = $1 AND expires_at_ms > $2";

impl IdempotencyStore for PgStore {
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        request_digest: &'a str,
        operation_id: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>> {
        Box::pin(async move {
            let k = key.storage_key();
            let now_ms = unix_millis(now);
            let lease_until = i64_of(now_ms.saturating_add(millis(lease)));
            // Never before the lease ends: a short TTL must not free a key mid-flight.
            let expires = i64_of(now_ms.saturating_add(millis(ttl.max(lease))));
            let now_ms = i64_of(now_ms);
            // Through the writer, with the other calls' writes: one statement inserts the
            // record, or takes over the row of the key if it expired, atomically per key. A
            // record that held the key may vanish or change while the statement runs; try again
            // then.
            for _ in 0..5 {
                let write = Write::Reservation {
                    key: k.clone(),
                    request_digest: request_digest.to_owned(),
                    operation_id: operation_id.map(str::to_owned),
                    owner: new_token(),
                    lease_until_ms: lease_until,
                    expires_at_ms: expires,
                    now_ms,
                };
                match self.covered_batch().submit(write).await? {
                    Written::Reserved(Some(reservation)) => return Ok(*reservation),
                    Written::Reserved(None) => {}
                    Written::Applied(_) => return Err(unexpected()),
                }
            }
            Err(StoreError::new(
                "postgres: the idempotency record kept changing".to_owned(),
            ))
        })
    }

    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let write = completion_write(key, owner, &outcome, ttl, now)?;
            self.covered_batch().submit(write).await.and_then(applied)
        })
    }

    /// When `operations` is this store, the record and the completion go to the writer
    /// together and usually share its statement: one round trip, one transaction.
    fn complete_with_record<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
        record: OperationRecord,
        operations: &'a dyn OperationStore,
    ) -> BoxFuture<'a, (StoreResult<()>, StoreResult<bool>)> {
        Box::pin(async move {
            // The identity is checked before anything is serialized.
            let writes = std::ptr::addr_eq(operations, self)
                .then(|| {
                    let record = operation_write(&record).ok()?;
                    Some((
                        record,
                        completion_write(key, owner, &outcome, ttl, now).ok()?,
                    ))
                })
                .flatten();
            let Some((written, completion)) = writes else {
                // Another operation store (or what does not serialize): one after the other.
                let other =
                    record_then_complete(self, key, owner, outcome, ttl, now, record, operations);
                return other.await;
            };
            let (written, completed) = self.covered_batch().submit_pair(written, completion).await;
            (
                written.and_then(applied).map(|_| ()),
                completed.and_then(applied),
            )
        })
    }

    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let client = self.covered().get().await.map_err(err)?;
            let stmt = client
                .prepare_cached(
                    "DELETE FROM toolguard_idempotency WHERE key = $1 AND owner = $2 AND outcome IS NULL",
                )
                .await
                .map_err(err)?;
            let n = client
                .execute(&stmt, &[&key.storage_key(), &owner])
                .await
                .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let until = i64_of(unix_millis(now).saturating_add(millis(lease)));
            let client = self.pool.get().await.map_err(err)?;
            let n = c_exec(
                &client,
                "UPDATE toolguard_idempotency SET lease_until_ms = $1,
                        expires_at_ms = GREATEST(expires_at_ms, $1)
                     WHERE key = $2 AND owner = $3 AND outcome IS NULL",
                &[&until, &key.storage_key(), &owner],
            )
            .await
            .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let until = i64_of(now_ms.saturating_add(millis(lease)));
            let now_ms = i64_of(now_ms);
            let token = new_token();
            let client = self.pool.get().await.map_err(err)?;
            let row = c_opt(
                &client,
                "UPDATE toolguard_idempotency SET owner = $1, lease_until_ms = $2,
                        expires_at_ms = GREATEST(expires_at_ms, $2)
                     WHERE key = $3 AND outcome IS NULL AND lease_until_ms <= $4
                       AND expires_at_ms > $4
                     RETURNING owner",
                &[&token, &until, &key.storage_key(), &now_ms],
            )
            .await
            .map_err(err)?;
            Ok(row.map(|_| token))
        })
    }

    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let body = to_json(&outcome)?;
            let expires = i64_of(unix_millis(now).saturating_add(millis(ttl)));
            let client = self.pool.get().await.map_err(err)?;
            let n = c_exec(
                &client,
                "UPDATE toolguard_idempotency SET outcome = $1, owner = NULL, expires_at_ms = $2
                     WHERE key = $3 AND operation_id = $4",
                &[&body, &expires, &key.storage_key(), &operation_id],
            )
            .await
            .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let n = c_exec(
                &client,
                "DELETE FROM toolguard_idempotency WHERE key = $1 AND operation_id = $2",
                &[&key.storage_key(), &operation_id],
            )
            .await
            .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let row = client
                .query_opt(
                    SELECT_RECORD,
                    &[&key.storage_key(), &i64_of(unix_millis(now))],
                )
                .await
                .map_err(err)?;
            row.map(|r| read_record(&r, 0)).transpose()
        })
    }
}

impl ApprovalStore for PgStore {
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let body = to_json(request)?;
            let client = self.pool.get().await.map_err(err)?;
            c_exec(
                &client,
                "INSERT INTO toolguard_approvals (id, tenant, state, created_at_ms, version, body)
                     VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &request.id,
                    &&*request.requester.tenant,
                    &ApprovalState::as_str(request.state),
                    &i64_of(request.created_at_ms),
                    &i64_of(request.version),
                    &body,
                ],
            )
            .await
            .map_err(err)?;
            Ok(())
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let row = c_opt(
                &client,
                "SELECT body FROM toolguard_approvals WHERE id = $1",
                &[&id],
            )
            .await
            .map_err(err)?;
            match row {
                Some(r) => Ok(Some(from_json(&r.try_get::<_, String>(0).map_err(err)?)?)),
                None => Ok(None),
            }
        })
    }

    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let rows = c_rows(
                &client,
                "SELECT body FROM toolguard_approvals WHERE tenant = $1 AND state = 'pending'
                     ORDER BY created_at_ms, id",
                &[&tenant],
            )
            .await
            .map_err(err)?;
            rows.iter()
                .map(|r| from_json(&r.try_get::<_, String>(0).map_err(err)?))
                .collect()
        })
    }

    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut next = request.clone();
            next.version = expected_version.saturating_add(1);
            let body = to_json(&next)?;
            let client = self.pool.get().await.map_err(err)?;
            let n = c_exec(
                &client,
                "UPDATE toolguard_approvals SET state = $1, version = $2, body = $3
                     WHERE id = $4 AND version = $5",
                &[
                    &ApprovalState::as_str(next.state),
                    &i64_of(next.version),
                    &body,
                    &next.id,
                    &i64_of(expected_version),
                ],
            )
            .await
            .map_err(err)?;
            Ok(n == 1)
        })
    }
}

async fn lock_scopes(
    tx: &deadpool_postgres::Transaction<'_>,
    scopes: &mut Vec<&str>,
) -> StoreResult<()> {
    // A fixed order, so that two admissions over overlapping scopes cannot deadlock.
    scopes.sort_unstable();
    scopes.dedup();
    for s in scopes.iter() {
        tx_exec(
            tx,
            "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            &[s],
        )
        .await
        .map_err(err)?;
    }
    Ok(())
}

/// The booked total of `scope` after `from`. Entries booked at a later time than the caller's
/// `now` count too: another replica read its clock after this caller and booked first, and a
/// limit check that left its amount out would let both through.
async fn window_total(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    from: i64,
) -> StoreResult<u64> {
    let row = tx_one(
        tx,
        "SELECT COALESCE(SUM(amount), 0)::BIGINT FROM toolguard_ledger
             WHERE scope = $1 AND at_ms > $2",
        &[&scope, &from],
    )
    .await
    .map_err(err)?;
    Ok(u64_of(row.try_get(0).map_err(err)?))
}

/// The booked total of `scope` after `from` (later clocks included) plus its live reservations
/// at `to`.
async fn counted(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    from: i64,
    to: i64,
) -> StoreResult<u64> {
    let booked = window_total(tx, scope, from).await?;
    let row = tx_one(
        tx,
        "SELECT COALESCE(SUM(h.amount), 0)::BIGINT FROM toolguard_hold_scopes s
             JOIN toolguard_holds h ON h.entry = s.entry WHERE s.scope = $1 AND h.until_ms > $2",
        &[&scope, &to],
    )
    .await
    .map_err(err)?;
    Ok(booked.saturating_add(u64_of(row.try_get(0).map_err(err)?)))
}

/// Whether `amount` fits every limit at `now_ms`, reservations included (scopes locked).
async fn fits(
    tx: &deadpool_postgres::Transaction<'_>,
    amount: u64,
    limits: &[ScopeLimit],
    now_ms: u64,
) -> StoreResult<bool> {
    for l in limits {
        let from = i64_of(now_ms.saturating_sub(millis(l.window)));
        if counted(tx, &l.scope, from, i64_of(now_ms))
            .await?
            .saturating_add(amount)
            > l.limit
        {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Takes the reservation of `entry` for booking: `None` if there is no live one.
async fn take_hold(
    tx: &deadpool_postgres::Transaction<'_>,
    entry: &str,
    now: i64,
) -> StoreResult<Option<(u64, Vec<String>)>> {
    // `FOR UPDATE`: a racing commit waits here, then finds the row gone.
    let Some(row) = tx_opt(
        tx,
        "SELECT amount FROM toolguard_holds WHERE entry = $1 AND until_ms > $2 FOR UPDATE",
        &[&entry, &now],
    )
    .await
    .map_err(err)?
    else {
        return Ok(None);
    };
    let reserved = u64_of(row.try_get(0).map_err(err)?);
    let scopes = tx_rows(
        tx,
        "SELECT scope FROM toolguard_hold_scopes WHERE entry = $1",
        &[&entry],
    )
    .await
    .map_err(err)?
    .iter()
    .map(|r| r.try_get::<_, String>(0).map_err(err))
    .collect::<StoreResult<Vec<_>>>()?;
    Ok(Some((reserved, scopes)))
}

async fn insert_entries(
    tx: &deadpool_postgres::Transaction<'_>,
    scopes: &[&str],
    entry: &str,
    amount: u64,
    at: i64,
) -> StoreResult<()> {
    let scopes: Vec<&str> = scopes.to_vec();
    tx_exec(
        tx,
        "INSERT INTO toolguard_ledger (scope, entry, amount, at_ms)
         SELECT s, $2, $3, $4 FROM unnest($1::TEXT[]) AS s",
        &[&scopes, &entry, &i64_of(amount), &at],
    )
    .await
    .map_err(err)?;
    Ok(())
}

impl SessionLedger for PgStore {
    fn provenance(
        self: std::sync::Arc<Self>,
    ) -> Option<toolguard_pipeline::provenance::SharedProvenance> {
        Some(self)
    }

    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let mut client = self.pool.get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            let mut scopes: Vec<&str> = limits.iter().map(|l| l.scope.as_str()).collect();
            lock_scopes(&tx, &mut scopes).await?;
            if !fits(&tx, amount, limits, now_ms).await? {
                return Ok(false);
            }
            let all: Vec<&str> = limits.iter().map(|l| l.scope.as_str()).collect();
            insert_entries(&tx, &all, entry, amount, i64_of(now_ms)).await?;
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }

    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let mut client = self.pool.get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            let all: Vec<&str> = scopes.iter().map(String::as_str).collect();
            insert_entries(&tx, &all, entry, amount, i64_of(unix_millis(now))).await?;
            tx.commit().await.map_err(err)
        })
    }

    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let all: Vec<&str> = scopes.iter().map(String::as_str).collect();
            c_exec(
                &client,
                "DELETE FROM toolguard_ledger WHERE entry = $1 AND scope = ANY($2::TEXT[])",
                &[&entry, &all],
            )
            .await
            .map_err(err)?;
            Ok(())
        })
    }

    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let from = i64_of(now_ms.saturating_sub(millis(window)));
            let mut client = self.pool.get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            let total = counted(&tx, scope, from, i64_of(now_ms)).await?;
            tx.commit().await.map_err(err)?;
            Ok(total)
        })
    }

    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let mut client = self.pool.get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            // The entry's own lock serializes two reservations of one entry.
            let entry_lock = format!("hold|{entry}");
            let mut scopes: Vec<&str> = limits.iter().map(|l| l.scope.as_str()).collect();
            scopes.push(&entry_lock);
            lock_scopes(&tx, &mut scopes).await?;
            tx_exec(
                &tx,
                "DELETE FROM toolguard_holds WHERE entry = $1 AND until_ms <= $2",
                &[&entry, &i64_of(now_ms)],
            )
            .await
            .map_err(err)?;
            let held = tx_opt(
                &tx,
                "SELECT 1 FROM toolguard_holds WHERE entry = $1",
                &[&entry],
            )
            .await
            .map_err(err)?;
            if held.is_some() {
                return Ok(true);
            }
            if !fits(&tx, amount, limits, now_ms).await? {
                return Ok(false);
            }
            tx_exec(
                &tx,
                "INSERT INTO toolguard_holds (entry, amount, until_ms) VALUES ($1, $2, $3)",
                &[&entry, &i64_of(amount), &i64_of(unix_millis(until))],
            )
            .await
            .map_err(err)?;
            let all: Vec<&str> = limits.iter().map(|l| l.scope.as_str()).collect();
            tx_exec(
                &tx,
                "INSERT INTO toolguard_hold_scopes (entry, scope)
                 SELECT DISTINCT $1, s FROM unnest($2::TEXT[]) AS s",
                &[&entry, &all],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }

    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let n = c_exec(
                &client,
                "DELETE FROM toolguard_holds WHERE entry = $1",
                &[&entry],
            )
            .await
            .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        Box::pin(async move {
            let now_ms = i64_of(unix_millis(now));
            let mut client = self.pool.get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            // Lock the hold's scopes first, as `admit` and `reserve` do: an admission summing
            // entries and holds in two statements must not see the hold gone and its booking
            // not yet there. (A hold's scopes never change, so reading them unlocked is safe.)
            let held_scopes: Vec<String> = tx_rows(
                &tx,
                "SELECT scope FROM toolguard_hold_scopes WHERE entry = $1",
                &[&entry],
            )
            .await
            .map_err(err)?
            .iter()
            .map(|r| r.try_get::<_, String>(0).map_err(err))
            .collect::<StoreResult<_>>()?;
            let entry_lock = format!("hold|{entry}");
            let mut locks: Vec<&str> = held_scopes.iter().map(String::as_str).collect();
            locks.push(&entry_lock);
            lock_scopes(&tx, &mut locks).await?;
            let Some((reserved, scopes)) = take_hold(&tx, entry, now_ms).await? else {
                return Ok(HoldCommit::Missing);
            };
            if amount > reserved {
                return Ok(HoldCommit::Exceeds { reserved });
            }
            tx_exec(
                &tx,
                "DELETE FROM toolguard_holds WHERE entry = $1",
                &[&entry],
            )
            .await
            .map_err(err)?;
            let all: Vec<&str> = scopes.iter().map(String::as_str).collect();
            insert_entries(&tx, &all, entry, amount, now_ms).await?;
            tx.commit().await.map_err(err)?;
            Ok(HoldCommit::Committed)
        })
    }

    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let scope = format!("rate|{scope}");
            let now_ms = unix_millis(now);
            let from = i64_of(now_ms.saturating_sub(millis(window)));
            let now_ms = i64_of(now_ms);
            let mut client = self.pool.get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            let mut scopes = vec![scope.as_str()];
            lock_scopes(&tx, &mut scopes).await?;
            tx_exec(
                &tx,
                "DELETE FROM toolguard_ledger WHERE scope = $1 AND at_ms <= $2",
                &[&scope, &from],
            )
            .await
            .map_err(err)?;
            // Calls counted under a later clock (another replica's) count too.
            let counted: i64 = tx_one(
                &tx,
                "SELECT COUNT(*) FROM toolguard_ledger WHERE scope = $1 AND at_ms > $2",
                &[&scope, &from],
            )
            .await
            .map_err(err)?
            .try_get(0)
            .map_err(err)?;
            if u64_of(counted) >= u64::from(max) {
                return Ok(false);
            }
            insert_entries(&tx, &[scope.as_str()], "", 1, now_ms).await?;
            tx.commit().await.map_err(err)?;
            Ok(true)
        })
    }
}

/// The batched completion of `key`'s reservation by `owner` with `outcome`.
fn completion_write(
    key: &ScopedKey,
    owner: &str,
    outcome: &StoredOutcome,
    ttl: Duration,
    now: SystemTime,
) -> StoreResult<Write> {
    Ok(Write::Completion {
        key: key.storage_key(),
        owner: owner.to_owned(),
        outcome: to_json(outcome)?,
        expires_at_ms: i64_of(unix_millis(now).saturating_add(millis(ttl))),
    })
}

/// The batched write of operation record `record`.
fn operation_write(record: &OperationRecord) -> StoreResult<Write> {
    Ok(Write::Operation {
        id: record.id.to_string(),
        updated_at_ms: i64_of(record.updated_at_ms),
        body: to_json(record)?,
    })
}

impl OperationStore for PgStore {
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(async move {
            let write = operation_write(&record)?;
            // The record written before the handler runs is synced (it also flushes the call's
            // reservation); the others are covered by the call's audit entry.
            let writer = match record.state {
                OperationState::Executing => &self.batched,
                _ => self.covered_batch(),
            };
            writer.submit(write).await.and_then(applied).map(|_| ())
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let stmt = client
                .prepare_cached("SELECT body FROM toolguard_operations WHERE id = $1")
                .await
                .map_err(err)?;
            let row = client.query_opt(&stmt, &[&id]).await.map_err(err)?;
            match row {
                Some(r) => Ok(Some(from_json(&r.try_get::<_, String>(0).map_err(err)?)?)),
                None => Ok(None),
            }
        })
    }
}
