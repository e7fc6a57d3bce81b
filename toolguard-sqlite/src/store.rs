//! SQLite backend (feature `sqlite`): every store in one database file, in WAL mode.
//!
//! SQLite is synchronous, so each [`SqliteStore`] owns one connection on a dedicated thread and
//! sends it statements through a queue; the async trait methods wait for the answer. A short write
//! on a call's path (an audit entry of a read, a write followed by the call's synced one) that
//! comes alone to an idle connection (no other caller waiting, the file's write lock free) runs
//! at once on the caller's thread instead, in its own short transaction (it never waits for a
//! lock there), which spares the hand-off to the thread and back. Atomicity comes from single statements (`INSERT ... ON CONFLICT ... WHERE`,
//! `UPDATE ... WHERE owner = ?`) and, for the session ledger, `BEGIN IMMEDIATE` transactions.
//! The audit trail of the same file is written by [`crate::audit::SqliteAuditSink`]. The log is
//! copied back into the database file (checkpointed) by a thread of its own, not by the writing
//! connection (see `checkpoint`): the log of a store under a steady load grows up to 256 MiB
//! before it starts over.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::checkpoint::Checkpointer;
pub(crate) use crate::worker::{Mode, Worker};
use toolguard_pipeline::DispatcherBuilder;
use toolguard_pipeline::clock::unix_millis;
use toolguard_pipeline::store::encode::{
    HELD_SQLITE, LEDGER_HOLDS, PURGE_INDEXES, i64_of, millis, new_token, u64_of,
};
pub(crate) use toolguard_pipeline::store::*;
use toolguard_pipeline::store::{
    ApprovalStore, IdempotencyStore, OperationStore, SessionLedger, StoreError, StoreResult,
    record_then_complete,
};
use toolguard_pipeline::tool::BoxFuture;

/// Current version of the SQLite schema.
pub const SQLITE_SCHEMA_VERSION: i64 = 4;

const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE IF NOT EXISTS toolguard_idempotency (
    key TEXT PRIMARY KEY,
    request_digest TEXT NOT NULL,
    operation_id TEXT,
    owner TEXT,
    lease_until_ms INTEGER NOT NULL,
    outcome TEXT,
    expires_at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS toolguard_approvals (
    id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    state TEXT NOT NULL,
    created_at_ms INTEGER NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS toolguard_approvals_pending
    ON toolguard_approvals (tenant, state, created_at_ms, id);
CREATE TABLE IF NOT EXISTS toolguard_ledger (
    id INTEGER PRIMARY KEY,
    scope TEXT NOT NULL,
    entry TEXT NOT NULL,
    amount INTEGER NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS toolguard_ledger_scope ON toolguard_ledger (scope, at_ms);
CREATE INDEX IF NOT EXISTS toolguard_ledger_entry ON toolguard_ledger (entry);
CREATE TABLE IF NOT EXISTS toolguard_operations (
    id TEXT PRIMARY KEY,
    updated_at_ms INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolguard_audit (
    seq INTEGER PRIMARY KEY,
    time_ms INTEGER NOT NULL,
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

/// How a SQLite connection syncs to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous = NORMAL` (WAL): a committed transaction survives a crash of the process; a
    /// power loss may roll back the last commits. The store's default.
    Process,
    /// Synced to disk: every commit is on disk before it returns. The audit sink's default.
    ///
    /// A [`SqliteStore`] commits with `synchronous = NORMAL` and syncs the write-ahead log on a
    /// thread of its own, so that one sync covers every transaction committed before it while
    /// the connection goes on committing. Once an audit trail writes through the store's
    /// connection ([`SqliteStore::audit_sink`], as [`toolguard_pipeline::DispatcherBuilder::sqlite`] does),
    /// the writes of a call that its later writes follow (the idempotency reservation, its
    /// completion or release, the final operation record) are answered at commit and reach the
    /// disk with the next synced commit: the operation record written before the handler runs
    /// (synced) covers the reservation, and the call's audit entry (synced, after every other
    /// write of the call) covers the rest, so a call's outcome is on disk before its caller
    /// sees it.
    Full,
}

pub(crate) fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::caused_by("sqlite", e)
}

/// How long a connection waits for the file's write lock held by another connection.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Opens `path`, sets WAL mode and the pragmas, and applies pending migrations.
pub(crate) fn open_connection(path: &Path, durability: Durability) -> rusqlite::Result<Connection> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mode: String = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CANTOPEN),
            Some(format!(
                "{}: WAL mode is unavailable (journal mode stays `{mode}`); use a file on a local disk",
                path.display()
            )),
        ));
    }
    let sync = match durability {
        Durability::Process => "NORMAL",
        Durability::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    migrate(&mut conn)?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS toolguard_schema_version (version INTEGER NOT NULL)",
    )?;
    let current: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM toolguard_schema_version",
            [],
            |r| r.get(0),
        )
        .unwrap_or(0);
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        if version > current {
            tx.execute_batch(sql)?;
            tx.execute(
                "INSERT INTO toolguard_schema_version (version) VALUES (?1)",
                [version],
            )?;
        }
    }
    tx.commit()
}

/// Runs the cached statement `sql` with `params`; returns the rows changed.
fn exec(c: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(params)
}

/// The first row of the cached statement `sql` with `params`, read by `f`.
fn row<T>(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(params, f)
}

fn to_json<T: serde::Serialize>(v: &T) -> rusqlite::Result<String> {
    serde_json::to_string(v).map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))
}

fn from_json<T: serde::de::DeserializeOwned>(s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Every store of the dispatcher in one SQLite file: idempotency records, approval requests,
/// session ledgers and operation records (the audit trail lives in the same file, written by
/// [`crate::audit::SqliteAuditSink`]).
///
/// ```no_run
/// # fn main() -> Result<(), toolguard_pipeline::store::StoreError> {
/// use std::sync::Arc;
/// use toolguard_sqlite::SqliteAuditSink;
/// use toolguard_sqlite::SqliteStore;
///
/// let store = Arc::new(SqliteStore::open("toolguard.db")?);
/// // A development trail; in production open it with `SqliteAuditSink::open_anchored`.
/// let audit = SqliteAuditSink::open("toolguard.db")?;
/// let dispatcher = toolguard_pipeline::Dispatcher::builder(())
///     .store(store)
///     .audit(audit)
///     .unanchored_audit("development database");
/// # let _ = dispatcher; Ok(()) }
/// ```
#[derive(Debug)]
pub struct SqliteStore {
    worker: std::sync::Arc<Worker>,
    path: PathBuf,
    durability: Durability,
}

impl SqliteStore {
    /// Opens (or creates) the database at `path` with [`Durability::Process`].
    pub fn open(path: impl AsRef<Path>) -> StoreResult<Self> {
        Self::open_with(path, Durability::Process)
    }

    /// Opens (or creates) the database at `path` with the given durability.
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> StoreResult<Self> {
        let path = path.as_ref().to_path_buf();
        let conn = open_connection(&path, durability).map_err(err)?;
        let wal = match durability {
            Durability::Process => None,
            Durability::Full => {
                // Commits only write the log; the worker's sync thread puts it on disk.
                conn.pragma_update(None, "synchronous", "NORMAL")
                    .map_err(err)?;
                let mut wal = path.as_os_str().to_owned();
                wal.push("-wal");
                Some(PathBuf::from(wal))
            }
        };
        // The log is checkpointed off the writing connection (see `checkpoint`).
        let checkpoints =
            Checkpointer::for_writer(&conn, &path, "toolguard-sqlite-checkpoint").map_err(err)?;
        let mode = Mode::Batched {
            wal,
            checkpoints: Some(checkpoints),
        };
        let worker = Worker::start(conn, "toolguard-sqlite", mode).map_err(err)?;
        Ok(SqliteStore {
            worker: std::sync::Arc::new(worker),
            path,
            durability,
        })
    }

    /// An audit sink on the same file that writes through this store's connection: its entries
    /// are committed in the same group commits as the store's statements, so that the store and
    /// the trail never wait for each other's write lock. Entries are as durable as the store's
    /// [`Durability`] (open the store with [`Durability::Full`] for a trail that survives power
    /// loss; [`toolguard_pipeline::DispatcherBuilder::sqlite`] does).
    pub fn audit_sink(&self) -> StoreResult<crate::audit::SqliteAuditSink> {
        self.worker.allow_deferral();
        crate::audit::SqliteAuditSink::shared(
            &self.path,
            self.durability,
            self.worker.clone(),
            None,
        )
    }

    /// [`audit_sink`](Self::audit_sink), sealing entries with the anchor's host keys and writing
    /// its checkpoints.
    pub fn audit_sink_anchored(
        &self,
        anchor: toolguard_pipeline::audit::AuditAnchor,
    ) -> StoreResult<crate::audit::SqliteAuditSink> {
        self.worker.allow_deferral();
        crate::audit::SqliteAuditSink::shared(
            &self.path,
            self.durability,
            self.worker.clone(),
            Some(std::sync::Arc::new(anchor)),
        )
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the store's connection (for maintenance and tests), on its thread.
    /// It runs inside the worker's batch transaction: use a savepoint, not `BEGIN`, to group
    /// statements.
    pub async fn with_connection<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.worker.run(f).await
    }

    /// Runs the read `f` on the store's connection, answered once its batch committed, without
    /// waiting for the sync when the store writes an audit trail ([`Worker::run_deferred`]):
    /// for reads of state whose writers wait for the sync themselves, so that what the read
    /// returns and a power loss could take back is only what no caller was yet told is stored.
    pub(crate) async fn read_committed<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.worker.run_deferred(f).await
    }

    /// Deletes idempotency records and ledger reservations that expired before `now`, and ledger
    /// entries older than `keep`. Returns how many rows were removed.
    pub async fn purge(&self, now: SystemTime, keep: Duration) -> StoreResult<usize> {
        let now_ms = i64_of(unix_millis(now));
        let before = i64_of(unix_millis(now).saturating_sub(millis(keep)));
        self.worker
            .run(move |c| {
                let a = exec(
                    c,
                    "DELETE FROM toolguard_idempotency WHERE expires_at_ms <= ?1",
                    [now_ms],
                )?;
                let b = exec(
                    c,
                    "DELETE FROM toolguard_ledger WHERE at_ms <= ?1",
                    [before],
                )?;
                let h = exec(
                    c,
                    "DELETE FROM toolguard_holds WHERE until_ms <= ?1",
                    [now_ms],
                )?;
                Ok(a + b + h)
            })
            .await
    }
}

fn read_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<IdempotencyRecord> {
    let request_digest: String = row.get(0)?;
    let operation_id: Option<String> = row.get(1)?;
    let owner: Option<String> = row.get(2)?;
    let lease_until_ms: i64 = row.get(3)?;
    let outcome: Option<String> = row.get(4)?;
    let expires_at_ms: i64 = row.get(5)?;
    let state = match (outcome, owner) {
        (Some(o), _) => RecordState::Done {
            outcome: from_json(&o)?,
        },
        (None, owner) => RecordState::InFlight {
            owner: owner.unwrap_or_default(),
            lease_until_ms: u64_of(lease_until_ms),
        },
    };
    Ok(IdempotencyRecord {
        request_digest,
        operation_id,
        state,
        expires_at_ms: u64_of(expires_at_ms),
    })
}

const SELECT_RECORD: &str = "SELECT request_digest, operation_id, owner, lease_until_ms, outcome, \
     expires_at_ms FROM toolguard_idempotency WHERE key = ?1 AND expires_at_ms > ?2";

impl IdempotencyStore for SqliteStore {
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        request_digest: &'a str,
        operation_id: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>> {
        let k = key.storage_key();
        let digest = request_digest.to_owned();
        let op = operation_id.map(str::to_owned);
        let now_ms = unix_millis(now);
        let lease_until = i64_of(now_ms.saturating_add(millis(lease)));
        // Never before the lease ends: a short TTL must not free a key mid-flight.
        let expires = i64_of(now_ms.saturating_add(millis(ttl.max(lease))));
        let now_ms = i64_of(now_ms);
        let owner = new_token();
        // Answered at commit: the reservation reaches the disk with the call's next synced
        // write (see `Durability::Full`).
        Box::pin(self.worker.run_deferred(move |c| {
            // One statement: insert, or take the row over if it expired.
            let won: Option<String> = c
                .prepare_cached(
                    "INSERT INTO toolguard_idempotency
                        (key, request_digest, operation_id, owner, lease_until_ms, outcome, expires_at_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, NULL, ?6)
                     ON CONFLICT (key) DO UPDATE SET
                        request_digest = excluded.request_digest,
                        operation_id = excluded.operation_id,
                        owner = excluded.owner,
                        lease_until_ms = excluded.lease_until_ms,
                        outcome = NULL,
                        expires_at_ms = excluded.expires_at_ms
                     WHERE toolguard_idempotency.expires_at_ms <= ?7
                     RETURNING owner",
                )?
                .query_row(
                    params![k, digest, op, owner, lease_until, expires, now_ms],
                    |r| r.get(0),
                )
                .optional()?;
            if let Some(owner) = won {
                return Ok(Reservation::Reserved { owner });
            }
            let existing = c
                .prepare_cached(SELECT_RECORD)?
                .query_row(params![k, now_ms], read_record)?;
            Ok(Reservation::Existing(existing))
        }))
    }

    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let completion = Completion::new(key, owner, &outcome, ttl, now);
        // Answered at commit: the call's audit entry, synced after it, covers it.
        Box::pin(self.worker.run_deferred(move |c| completion.write(c)))
    }

    /// When `operations` is this store, the record and the completion are one job of the
    /// connection: one trip to its thread, one transaction.
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
            if !std::ptr::addr_eq(operations, self) {
                let other =
                    record_then_complete(self, key, owner, outcome, ttl, now, record, operations);
                return other.await;
            }
            let row = OperationRow::new(&record);
            let completion = Completion::new(key, owner, &outcome, ttl, now);
            // Each statement's failure is its own: the completion runs after a failed record.
            let job = move |c: &mut Connection| Ok((row.write(c), completion.write(c)));
            match self.worker.run_deferred(job).await {
                Ok((written, completed)) => (written.map_err(err), completed.map_err(err)),
                // Not committed.
                Err(e) => (Err(e.clone()), Err(e)),
            }
        })
    }

    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let k = key.storage_key();
        let owner = owner.to_owned();
        Box::pin(self.worker.run_deferred(move |c| {
            let n = c
                .prepare_cached(
                    "DELETE FROM toolguard_idempotency WHERE key = ?1 AND owner = ?2 AND outcome IS NULL",
                )?
                .execute(params![k, owner])?;
            Ok(n == 1)
        }))
    }

    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let k = key.storage_key();
        let owner = owner.to_owned();
        let until = i64_of(unix_millis(now).saturating_add(millis(lease)));
        Box::pin(self.worker.run(move |c| {
            let n = exec(
                c,
                "UPDATE toolguard_idempotency SET lease_until_ms = ?1,
                    expires_at_ms = MAX(expires_at_ms, ?1)
                 WHERE key = ?2 AND owner = ?3 AND outcome IS NULL",
                params![until, k, owner],
            )?;
            Ok(n == 1)
        }))
    }

    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        let k = key.storage_key();
        let now_ms = unix_millis(now);
        let until = i64_of(now_ms.saturating_add(millis(lease)));
        let now_ms = i64_of(now_ms);
        Box::pin(self.worker.run(move |c| {
            let token = new_token();
            row(
                c,
                "UPDATE toolguard_idempotency SET owner = ?1, lease_until_ms = ?2,
                    expires_at_ms = MAX(expires_at_ms, ?2)
                 WHERE key = ?3 AND outcome IS NULL AND lease_until_ms <= ?4 AND expires_at_ms > ?4
                 RETURNING owner",
                params![token, until, k, now_ms],
                |r| r.get(0),
            )
            .optional()
        }))
    }

    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let k = key.storage_key();
        let op = operation_id.to_owned();
        let expires = i64_of(unix_millis(now).saturating_add(millis(ttl)));
        Box::pin(self.worker.run(move |c| {
            let body = to_json(&outcome)?;
            let n = exec(
                c,
                "UPDATE toolguard_idempotency SET outcome = ?1, owner = NULL, expires_at_ms = ?2
                 WHERE key = ?3 AND operation_id = ?4",
                params![body, expires, k, op],
            )?;
            Ok(n == 1)
        }))
    }

    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let k = key.storage_key();
        let op = operation_id.to_owned();
        Box::pin(self.worker.run(move |c| {
            let n = exec(
                c,
                "DELETE FROM toolguard_idempotency WHERE key = ?1 AND operation_id = ?2",
                params![k, op],
            )?;
            Ok(n == 1)
        }))
    }

    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        let k = key.storage_key();
        let now_ms = i64_of(unix_millis(now));
        Box::pin(self.worker.run(move |c| {
            c.prepare_cached(SELECT_RECORD)?
                .query_row(params![k, now_ms], read_record)
                .optional()
        }))
    }
}

impl ApprovalStore for SqliteStore {
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        let r = request.clone();
        Box::pin(self.worker.run(move |c| {
            let body = to_json(&r)?;
            exec(
                c,
                "INSERT INTO toolguard_approvals (id, tenant, state, created_at_ms, version, body)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    r.id,
                    &*r.requester.tenant,
                    ApprovalState::as_str(r.state),
                    i64_of(r.created_at_ms),
                    i64_of(r.version),
                    body
                ],
            )?;
            Ok(())
        }))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        let id = id.to_owned();
        Box::pin(self.worker.run(move |c| {
            let body: Option<String> = row(
                c,
                "SELECT body FROM toolguard_approvals WHERE id = ?1",
                [id],
                |r| r.get(0),
            )
            .optional()?;
            body.map(|b| from_json(&b)).transpose()
        }))
    }

    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        let tenant = tenant.to_owned();
        Box::pin(self.worker.run(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT body FROM toolguard_approvals WHERE tenant = ?1 AND state = 'pending'
                 ORDER BY created_at_ms, id",
            )?;
            let rows = stmt.query_map([tenant], |r| r.get::<_, String>(0))?;
            let mut out = Vec::new();
            for body in rows {
                out.push(from_json(&body?)?);
            }
            Ok(out)
        }))
    }

    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let mut next = request.clone();
        next.version = expected_version.saturating_add(1);
        Box::pin(self.worker.run(move |c| {
            let body = to_json(&next)?;
            let n = exec(
                c,
                "UPDATE toolguard_approvals SET state = ?1, version = ?2, body = ?3
                 WHERE id = ?4 AND version = ?5",
                params![
                    ApprovalState::as_str(next.state),
                    i64_of(next.version),
                    body,
                    next.id,
                    i64_of(expected_version)
                ],
            )?;
            Ok(n == 1)
        }))
    }
}

/// The booked total of `scope` after `from`. Entries booked at a later time than the caller's
/// `now` count too: another process read its clock after this caller and booked first, and a
/// limit check that left its amount out would let both through.
fn window_total(c: &Connection, scope: &str, from: i64) -> rusqlite::Result<u64> {
    let mut stmt = c.prepare_cached(
        "SELECT COALESCE(SUM(amount), 0) FROM toolguard_ledger
         WHERE scope = ?1 AND at_ms > ?2",
    )?;
    let total: i64 = stmt.query_row(params![scope, from], |r| r.get(0))?;
    Ok(u64_of(total))
}

/// The booked total of `scope` after `from` (later clocks included) plus its live reservations
/// at `to`.
fn counted(c: &Connection, scope: &str, from: i64, to: i64) -> rusqlite::Result<u64> {
    let booked = window_total(c, scope, from)?;
    let mut stmt = c.prepare_cached(HELD_SQLITE)?;
    let held: i64 = stmt.query_row(params![scope, to], |r| r.get(0))?;
    Ok(booked.saturating_add(u64_of(held)))
}

/// Whether `amount` fits every limit at `now_ms`, reservations included.
fn fits(c: &Connection, amount: u64, limits: &[ScopeLimit], now_ms: u64) -> rusqlite::Result<bool> {
    for l in limits {
        let from = i64_of(now_ms.saturating_sub(millis(l.window)));
        if counted(c, &l.scope, from, i64_of(now_ms))?.saturating_add(amount) > l.limit {
            return Ok(false);
        }
    }
    Ok(true)
}

fn hold(
    c: &Connection,
    entry: &str,
    amount: u64,
    limits: &[ScopeLimit],
    until: i64,
    now: u64,
) -> rusqlite::Result<bool> {
    exec(
        c,
        "DELETE FROM toolguard_holds WHERE entry = ?1 AND until_ms <= ?2",
        params![entry, i64_of(now)],
    )?;
    let held: Option<i64> = row(
        c,
        "SELECT amount FROM toolguard_holds WHERE entry = ?1",
        [entry],
        |r| r.get(0),
    )
    .optional()?;
    if held.is_some() {
        return Ok(true);
    }
    if !fits(c, amount, limits, now)? {
        return Ok(false);
    }
    exec(
        c,
        "INSERT INTO toolguard_holds (entry, amount, until_ms) VALUES (?1, ?2, ?3)",
        params![entry, i64_of(amount), until],
    )?;
    let mut stmt = c.prepare_cached(
        "INSERT OR IGNORE INTO toolguard_hold_scopes (entry, scope) VALUES (?1, ?2)",
    )?;
    for l in limits {
        stmt.execute(params![entry, l.scope])?;
    }
    Ok(true)
}

fn commit_hold(c: &Connection, entry: &str, amount: u64, now: i64) -> rusqlite::Result<HoldCommit> {
    let held: Option<i64> = row(
        c,
        "SELECT amount FROM toolguard_holds WHERE entry = ?1 AND until_ms > ?2",
        params![entry, now],
        |r| r.get(0),
    )
    .optional()?;
    let Some(reserved) = held.map(u64_of) else {
        return Ok(HoldCommit::Missing);
    };
    if amount > reserved {
        return Ok(HoldCommit::Exceeds { reserved });
    }
    let scopes: Vec<String> = {
        let mut stmt =
            c.prepare_cached("SELECT scope FROM toolguard_hold_scopes WHERE entry = ?1")?;
        let rows = stmt.query_map([entry], |r| r.get(0))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    exec(c, "DELETE FROM toolguard_holds WHERE entry = ?1", [entry])?;
    for s in &scopes {
        insert_entry(c, s, entry, amount, now)?;
    }
    Ok(HoldCommit::Committed)
}

fn insert_entry(
    c: &Connection,
    scope: &str,
    entry: &str,
    amount: u64,
    at: i64,
) -> rusqlite::Result<()> {
    let mut stmt = c.prepare_cached(
        "INSERT INTO toolguard_ledger (scope, entry, amount, at_ms) VALUES (?1, ?2, ?3, ?4)",
    )?;
    stmt.execute(params![scope, entry, i64_of(amount), at])?;
    Ok(())
}

impl SessionLedger for SqliteStore {
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
        let entry = entry.to_owned();
        let limits = limits.to_vec();
        let now_ms = unix_millis(now);
        Box::pin(self.worker.run(move |c| {
            let tx = c.savepoint()?;
            if !fits(&tx, amount, &limits, now_ms)? {
                return Ok(false);
            }
            for l in &limits {
                insert_entry(&tx, &l.scope, &entry, amount, i64_of(now_ms))?;
            }
            tx.commit()?;
            Ok(true)
        }))
    }

    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let entry = entry.to_owned();
        let scopes = scopes.to_vec();
        let at = i64_of(unix_millis(now));
        Box::pin(self.worker.run(move |c| {
            let tx = c.savepoint()?;
            for s in &scopes {
                insert_entry(&tx, s, &entry, amount, at)?;
            }
            tx.commit()
        }))
    }

    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        let entry = entry.to_owned();
        let scopes = scopes.to_vec();
        Box::pin(self.worker.run(move |c| {
            let tx = c.savepoint()?;
            for s in &scopes {
                exec(
                    &tx,
                    "DELETE FROM toolguard_ledger WHERE scope = ?1 AND entry = ?2",
                    params![s, entry],
                )?;
            }
            tx.commit()
        }))
    }

    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        let scope = scope.to_owned();
        let now_ms = unix_millis(now);
        let from = i64_of(now_ms.saturating_sub(millis(window)));
        Box::pin(
            self.worker
                .run(move |c| counted(c, &scope, from, i64_of(now_ms))),
        )
    }

    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let entry = entry.to_owned();
        let limits = limits.to_vec();
        let until = i64_of(unix_millis(until));
        let now_ms = unix_millis(now);
        Box::pin(self.worker.run(move |c| {
            let tx = c.savepoint()?;
            let held = hold(&tx, &entry, amount, &limits, until, now_ms)?;
            tx.commit()?;
            Ok(held)
        }))
    }

    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        let entry = entry.to_owned();
        Box::pin(self.worker.run(move |c| {
            let n = exec(c, "DELETE FROM toolguard_holds WHERE entry = ?1", [entry])?;
            Ok(n == 1)
        }))
    }

    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        let entry = entry.to_owned();
        let now_ms = i64_of(unix_millis(now));
        Box::pin(self.worker.run(move |c| {
            let tx = c.savepoint()?;
            let out = commit_hold(&tx, &entry, amount, now_ms)?;
            tx.commit()?;
            Ok(out)
        }))
    }

    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let scope = format!("rate|{scope}");
        let now_ms = unix_millis(now);
        let from = i64_of(now_ms.saturating_sub(millis(window)));
        let now_ms = i64_of(now_ms);
        Box::pin(self.worker.run(move |c| {
            let tx = c.savepoint()?;
            exec(
                &tx,
                "DELETE FROM toolguard_ledger WHERE scope = ?1 AND at_ms <= ?2",
                params![scope, from],
            )?;
            // Calls counted under a later clock (another process's) count too.
            let counted: i64 = row(
                &tx,
                "SELECT COUNT(*) FROM toolguard_ledger WHERE scope = ?1 AND at_ms > ?2",
                params![scope, from],
                |r| r.get(0),
            )?;
            if u64_of(counted) >= u64::from(max) {
                return Ok(false);
            }
            insert_entry(&tx, &scope, "", 1, now_ms)?;
            tx.commit()?;
            Ok(true)
        }))
    }
}

/// An operation record as its row.
struct OperationRow {
    id: arcstr::ArcStr,
    updated_at_ms: i64,
    body: rusqlite::Result<String>,
}

impl OperationRow {
    fn new(record: &OperationRecord) -> Self {
        OperationRow {
            id: record.id.clone(),
            updated_at_ms: i64_of(record.updated_at_ms),
            body: to_json(record),
        }
    }

    /// Inserts or replaces the row.
    fn write(self, c: &mut Connection) -> rusqlite::Result<()> {
        c.prepare_cached(
            "INSERT INTO toolguard_operations (id, updated_at_ms, body) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET updated_at_ms = excluded.updated_at_ms,
                body = excluded.body",
        )?
        .execute(params![&*self.id, self.updated_at_ms, self.body?])?;
        Ok(())
    }
}

/// The completion of a key's reservation with its outcome.
struct Completion {
    key: String,
    owner: String,
    expires_at_ms: i64,
    outcome: rusqlite::Result<String>,
}

impl Completion {
    fn new(
        key: &ScopedKey,
        owner: &str,
        outcome: &StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> Self {
        Completion {
            key: key.storage_key(),
            owner: owner.to_owned(),
            expires_at_ms: i64_of(unix_millis(now).saturating_add(millis(ttl))),
            outcome: to_json(outcome),
        }
    }

    /// Stores the outcome if the owner still holds the key; whether it did.
    fn write(self, c: &mut Connection) -> rusqlite::Result<bool> {
        let n = c
            .prepare_cached(
                "UPDATE toolguard_idempotency SET outcome = ?1, owner = NULL, expires_at_ms = ?2
                 WHERE key = ?3 AND owner = ?4 AND outcome IS NULL",
            )?
            .execute(params![
                self.outcome?,
                self.expires_at_ms,
                self.key,
                self.owner
            ])?;
        Ok(n == 1)
    }
}

impl OperationStore for SqliteStore {
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>> {
        let row = OperationRow::new(&record);
        let job = move |c: &mut Connection| row.write(c);
        // The record written before the handler runs is synced (it also covers the call's
        // reservation); the others are covered by the call's audit entry.
        if record.state == OperationState::Executing {
            Box::pin(self.worker.run(job))
        } else {
            Box::pin(self.worker.run_deferred(job))
        }
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        let id = id.to_owned();
        Box::pin(self.worker.run(move |c| {
            let body: Option<String> = c
                .prepare_cached("SELECT body FROM toolguard_operations WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?;
            body.map(|b| from_json(&b)).transpose()
        }))
    }
}

impl DurableBackend for SqliteStore {
    fn open_audit(
        &self,
        anchor: Option<toolguard_pipeline::audit::AuditAnchor>,
    ) -> StoreResult<std::sync::Arc<dyn toolguard_pipeline::audit::AuditSink>> {
        let sink = match anchor {
            Some(anchor) => self.audit_sink_anchored(anchor)?,
            None => self.audit_sink()?,
        };
        Ok(std::sync::Arc::new(sink))
    }
}

/// [`DispatcherBuilder::sqlite`](SqliteBuilderExt::sqlite): every store and the audit trail in
/// one SQLite file.
pub trait SqliteBuilderExt: Sized {
    /// Keeps every store and the audit trail in the SQLite file at `path`, created if missing.
    /// Store statements and audit entries share one connection and its group commits, fully
    /// synced ([`Durability::Full`]). With host keys (given before or after this call) the trail
    /// is sealed under them and writes the audit checkpoints, if any (see
    /// [`DispatcherBuilder::durable`]).
    fn sqlite(self, path: impl AsRef<Path>) -> StoreResult<Self>;
}

impl<S: Send + Sync + 'static> SqliteBuilderExt for DispatcherBuilder<S> {
    fn sqlite(self, path: impl AsRef<Path>) -> StoreResult<Self> {
        let store = SqliteStore::open_with(path, Durability::Full)?;
        Ok(self.durable(std::sync::Arc::new(store)))
    }
}
