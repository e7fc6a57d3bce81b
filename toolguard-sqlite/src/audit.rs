//! SQLite audit sink (feature `sqlite`) with group commit.
//!
//! Appends go into a queue; one writer thread takes everything queued (up to
//! [`MAX_BATCH`]), seals each record after the last stored entry, inserts the batch in one
//! transaction and commits it; each `append` resolves once its batch is committed. The writer
//! recovers the last sequence number and hash from the file when it opens. Queries run on a
//! separate read connection (WAL lets it read while the writer commits).

use std::path::Path;
use std::sync::Arc;

use arcstr::ArcStr;
use rusqlite::{Connection, OptionalExtension, params};
use tokio::sync::{mpsc, oneshot};

use crate::checkpoint::Checkpointer;
use crate::store::{Durability, Mode, Worker, open_connection};
use toolguard_pipeline::audit::columns::{COLUMNS, Columns, limit_of};
use toolguard_pipeline::audit::{Appending, AuditError, AuditSink};
use toolguard_pipeline::audit::{AuditAnchor, Checkpoint};
use toolguard_pipeline::audit::{AuditEntry, AuditRecord};
use toolguard_pipeline::audit::{AuditQuery, ChainVerifier, VerifyError, VerifyReport};
use toolguard_pipeline::audit::{GENESIS_HASH, Sealer};
use toolguard_pipeline::store::StoreError;
use toolguard_pipeline::store::encode::i64_of;
use toolguard_pipeline::tool::BoxFuture;

/// Most entries committed in one transaction.
pub const MAX_BATCH: usize = 4096;

const QUEUE: usize = 65_536;
const VERIFY_CHUNK: i64 = 10_000;

/// The stored entry's sequence number and hash.
type Reply = oneshot::Sender<Result<(u64, String), AuditError>>;

/// An audit trail in a SQLite file (the table `toolguard_audit`, beside the tables of
/// [`crate::store::SqliteStore`]).
#[derive(Debug)]
pub struct SqliteAuditSink {
    writer: Writer,
    reader: Worker,
    sealer: Sealer,
    anchor: Option<Arc<AuditAnchor>>,
}

/// Who writes the entries.
#[derive(Debug)]
enum Writer {
    /// The sink's own writer thread and connection, with its own group commits.
    Own(mpsc::Sender<(AuditRecord, Reply)>),
    /// The connection of a [`crate::store::SqliteStore`], in its group commits.
    Shared(Arc<Worker>),
}

/// Seals `record` after the last stored entry and inserts it with its stored form `body`
/// (inside the caller's transaction).
fn append_one(
    conn: &Connection,
    sealer: &Sealer,
    record: AuditRecord,
    body: String,
) -> rusqlite::Result<(u64, String)> {
    let (seq, prev) = last_entry(conn)?;
    let entry = sealer.seal(seq + 1, record, &ArcStr::from(prev));
    let mut stmt = conn.prepare_cached(INSERT)?;
    stmt.execute(params![
        i64_of(entry.seq),
        i64_of(entry.record.time_ms),
        &*entry.record.tenant,
        &*entry.record.subject,
        &*entry.record.tool,
        entry.record.status.map(|s| s.as_str()),
        body,
        &*entry.prev_hash,
        &*entry.hash,
    ])?;
    Ok((entry.seq, entry.hash.to_string()))
}

const INSERT: &str = "INSERT INTO toolguard_audit
    (seq, time_ms, tenant, subject, tool, status, record, prev_hash, hash)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

fn aerr(e: impl std::fmt::Display) -> AuditError {
    AuditError(format!("sqlite: {e}"))
}

fn serr(e: StoreError) -> AuditError {
    AuditError(e.message().to_owned())
}

fn last_entry(conn: &Connection) -> rusqlite::Result<(u64, String)> {
    let last: Option<(i64, String)> = conn
        .prepare_cached("SELECT seq, hash FROM toolguard_audit ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match last {
        Some((seq, hash)) => (u64::try_from(seq).unwrap_or(0), hash),
        None => (0, GENESIS_HASH.to_owned()),
    })
}

fn write_batch(conn: &mut Connection, sealer: &Sealer, batch: Vec<(AuditRecord, Reply)>) {
    let (records, replies): (Vec<AuditRecord>, Vec<Reply>) = batch.into_iter().unzip();
    let mut assigned = Vec::with_capacity(records.len());
    let result = (|| -> Result<(), String> {
        // IMMEDIATE takes the write lock first, so that another process appending to the same
        // file cannot interleave: the chain head is read inside the transaction.
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(|e| e.to_string())?;
        {
            let (mut seq, prev) = last_entry(&tx).map_err(|e| e.to_string())?;
            let mut prev = ArcStr::from(prev);
            let mut stmt = tx.prepare_cached(INSERT).map_err(|e| e.to_string())?;
            for record in records {
                seq += 1;
                let entry = sealer.seal(seq, record, &prev);
                let body = serde_json::to_string(&entry.record).map_err(|e| e.to_string())?;
                stmt.execute(params![
                    i64_of(entry.seq),
                    i64_of(entry.record.time_ms),
                    &*entry.record.tenant,
                    &*entry.record.subject,
                    &*entry.record.tool,
                    entry.record.status.map(|s| s.as_str()),
                    body,
                    &*entry.prev_hash,
                    &*entry.hash,
                ])
                .map_err(|e| e.to_string())?;
                prev = entry.hash;
                assigned.push((seq, prev.to_string()));
            }
        }
        tx.commit().map_err(|e| e.to_string())
    })();
    match result {
        Ok(()) => {
            for (reply, seq) in replies.into_iter().zip(assigned) {
                let _ = reply.send(Ok(seq));
            }
        }
        // Nothing of the batch is stored.
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(aerr(&e)));
            }
        }
    }
}

/// The trail's own writer: appends the entries queued (up to [`MAX_BATCH`]) in one transaction,
/// and leaves the checkpoints of the log to `checkpoints`.
fn writer(
    mut conn: Connection,
    sealer: Sealer,
    mut rx: mpsc::Receiver<(AuditRecord, Reply)>,
    checkpoints: Checkpointer,
) {
    while let Some(first) = rx.blocking_recv() {
        let mut batch = Vec::with_capacity(64);
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        write_batch(&mut conn, &sealer, batch);
        checkpoints.committed();
    }
}

fn read_entry(row: &rusqlite::Row<'_>) -> rusqlite::Result<(AuditEntry, Columns)> {
    let seq: i64 = row.get(0)?;
    let body: String = row.get(1)?;
    let prev_hash: String = row.get(2)?;
    let hash: String = row.get(3)?;
    let columns = Columns {
        time_ms: row.get(4)?,
        tenant: row.get(5)?,
        subject: row.get(6)?,
        tool: row.get(7)?,
        status: row.get(8)?,
    };
    let seq = u64::try_from(seq).unwrap_or(0);
    // A record that no longer parses was altered; keep it so that `verify` names it.
    let record = serde_json::from_str(&body).unwrap_or_else(|_| AuditRecord {
        reason: Some("unreadable record".into()),
        ..AuditRecord::default()
    });
    Ok((
        AuditEntry {
            seq,
            record,
            prev_hash: prev_hash.into(),
            hash: hash.into(),
        },
        columns,
    ))
}

fn query(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> rusqlite::Result<Vec<AuditEntry>> {
    let mut stmt = c.prepare_cached(sql)?;
    let rows = stmt.query_map(params, read_entry)?;
    rows.map(|r| r.map(|(e, _)| e)).collect()
}

impl SqliteAuditSink {
    /// Opens (or creates) the audit trail in the database at `path`; commits are fully synced
    /// ([`Durability::Full`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, Durability::Full)
    }

    /// Opens the audit trail with the given durability (plain SHA-256 chain, no key: see
    /// [`open_anchored`](Self::open_anchored)).
    pub fn open_with(path: impl AsRef<Path>, durability: Durability) -> Result<Self, StoreError> {
        Self::open_inner(path.as_ref(), durability, None)
    }

    /// Opens the audit trail sealing entries with the anchor's host keys and writing its
    /// checkpoints.
    pub fn open_anchored(
        path: impl AsRef<Path>,
        durability: Durability,
        anchor: AuditAnchor,
    ) -> Result<Self, StoreError> {
        Self::open_inner(path.as_ref(), durability, Some(Arc::new(anchor)))
    }

    fn open_inner(
        path: &Path,
        durability: Durability,
        anchor: Option<Arc<AuditAnchor>>,
    ) -> Result<Self, StoreError> {
        let sealer = anchor.as_ref().map_or(Sealer::Plain, |a| a.sealer());
        let wconn = open_connection(path, durability).map_err(crate::store::err)?;
        let rconn = open_connection(path, durability).map_err(crate::store::err)?;
        let checkpoints =
            Checkpointer::for_writer(&wconn, path, "toolguard-sqlite-audit-checkpoint")
                .map_err(crate::store::err)?;
        let (queue, rx) = mpsc::channel(QUEUE);
        let wsealer = sealer.clone();
        std::thread::Builder::new()
            .name("toolguard-sqlite-audit".to_owned())
            .spawn(move || writer(wconn, wsealer, rx, checkpoints))
            .map_err(crate::store::err)?;
        let reader = Worker::start(rconn, "toolguard-sqlite-audit-read", Mode::Single)
            .map_err(crate::store::err)?;
        Ok(SqliteAuditSink {
            writer: Writer::Own(queue),
            reader,
            sealer,
            anchor,
        })
    }

    /// A sink writing through a store's connection worker.
    pub(crate) fn shared(
        path: &Path,
        durability: Durability,
        worker: Arc<Worker>,
        anchor: Option<Arc<AuditAnchor>>,
    ) -> Result<Self, StoreError> {
        let rconn = open_connection(path, durability).map_err(crate::store::err)?;
        let reader = Worker::start(rconn, "toolguard-sqlite-audit-read", Mode::Single)
            .map_err(crate::store::err)?;
        Ok(SqliteAuditSink {
            writer: Writer::Shared(worker),
            reader,
            sealer: anchor.as_ref().map_or(Sealer::Plain, |a| a.sealer()),
            anchor,
        })
    }

    /// Number of stored entries.
    pub async fn len(&self) -> Result<u64, AuditError> {
        self.reader
            .run(|c| {
                c.query_row("SELECT COUNT(*) FROM toolguard_audit", [], |r| {
                    r.get::<_, i64>(0)
                })
            })
            .await
            .map(|n| u64::try_from(n).unwrap_or(0))
            .map_err(serr)
    }

    /// Whether the trail holds no entry.
    pub async fn is_empty(&self) -> Result<bool, AuditError> {
        Ok(self.len().await? == 0)
    }

    /// The entry with sequence number `seq`.
    pub async fn get(&self, seq: u64) -> Result<Option<AuditEntry>, AuditError> {
        let sql = format!("SELECT {COLUMNS} FROM toolguard_audit WHERE seq = ?1");
        self.reader
            .run(move |c| query(c, &sql, [i64_of(seq)]).map(|v| v.into_iter().next()))
            .await
            .map_err(serr)
    }
}

impl SqliteAuditSink {
    async fn store(&self, record: AuditRecord, soon: bool) -> Result<(u64, String), AuditError> {
        let queue = match &self.writer {
            Writer::Own(queue) => queue,
            Writer::Shared(worker) => {
                let sealer = self.sealer.clone();
                // Encoded here, off the connection's thread; sealing needs the chain head.
                let body = serde_json::to_string(&record).map_err(aerr)?;
                let job = move |c: &mut Connection| append_one(c, &sealer, record, body);
                let stored = if soon {
                    worker.run_soon(job).await
                } else {
                    worker.run(job).await
                };
                return stored.map_err(serr);
            }
        };
        let (reply, done) = oneshot::channel();
        queue
            .send((record, reply))
            .await
            .map_err(|_| AuditError("sqlite: the audit writer stopped".to_owned()))?;
        done.await
            .map_err(|_| AuditError("sqlite: the audit writer stopped".to_owned()))?
    }
}

impl AuditSink for SqliteAuditSink {
    fn durable_unanchored(&self) -> bool {
        self.anchor.as_ref().is_none_or(|a| !a.has_checkpoints())
    }

    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        Box::pin(async move {
            let (seq, head) = self.store(record, false).await?;
            if let Some(anchor) = &self.anchor {
                anchor.appended(seq, &head).await;
            }
            Ok(seq)
        })
    }

    /// On a trail that writes through the store's connection ([`SqliteStore::audit_sink`]),
    /// answers once the entry committed and syncs it soon after (with the other entries
    /// committed within two milliseconds, in one sync); a checkpoint is only ever
    /// written for an entry on disk (the log is synced first). A trail with its own connection
    /// appends as [`append`](Self::append) does.
    ///
    /// [`SqliteStore::audit_sink`]: crate::SqliteStore::audit_sink
    fn append_unsynced(&self, record: AuditRecord) -> Appending<'_> {
        let Writer::Shared(worker) = &self.writer else {
            return self.append_inline(record);
        };
        Appending::waiting(Box::pin(async move {
            let (seq, head) = self.store(record, true).await?;
            if let Some(anchor) = &self.anchor {
                let synced = async { worker.run(|_| Ok(())).await.is_ok() };
                anchor.appended_after(seq, &head, synced).await;
            }
            Ok(seq)
        }))
    }
}

impl AuditQuery for SqliteAuditSink {
    fn by_actor<'a>(
        &'a self,
        tenant: &'a str,
        subject: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        let (tenant, subject) = (tenant.to_owned(), subject.to_owned());
        let sql = format!(
            "SELECT {COLUMNS} FROM toolguard_audit WHERE tenant = ?1 AND subject = ?2
             ORDER BY seq DESC LIMIT ?3"
        );
        Box::pin(async move {
            self.reader
                .run(move |c| query(c, &sql, params![tenant, subject, limit_of(limit)]))
                .await
                .map_err(serr)
        })
    }

    fn by_tool<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        let tool = tool.to_owned();
        let sql = format!(
            "SELECT {COLUMNS} FROM toolguard_audit WHERE tool = ?1 ORDER BY seq DESC LIMIT ?2"
        );
        Box::pin(async move {
            self.reader
                .run(move |c| query(c, &sql, params![tool, limit_of(limit)]))
                .await
                .map_err(serr)
        })
    }

    fn by_source<'a>(
        &'a self,
        source_id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        let id = source_id.to_owned();
        let sql = format!(
            "SELECT {COLUMNS} FROM toolguard_audit WHERE EXISTS
             (SELECT 1 FROM json_each(record, '$.sources') WHERE value = ?1)
             ORDER BY seq LIMIT ?2"
        );
        Box::pin(async move {
            self.reader
                .run(move |c| query(c, &sql, params![id, limit_of(limit)]))
                .await
                .map_err(serr)
        })
    }

    fn by_time(
        &self,
        from_ms: u64,
        to_ms: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, AuditError>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM toolguard_audit WHERE time_ms >= ?1 AND time_ms < ?2
             ORDER BY time_ms, seq LIMIT ?3"
        );
        Box::pin(async move {
            self.reader
                .run(move |c| {
                    query(
                        c,
                        &sql,
                        params![i64_of(from_ms), i64_of(to_ms), limit_of(limit)],
                    )
                })
                .await
                .map_err(serr)
        })
    }

    fn verify_against<'a>(
        &'a self,
        checkpoints: &'a [Checkpoint],
    ) -> BoxFuture<'a, Result<VerifyReport, VerifyError>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM toolguard_audit WHERE seq > ?1 ORDER BY seq LIMIT {VERIFY_CHUNK}"
        );
        Box::pin(async move {
            let mut verifier = ChainVerifier::with_sealer(self.sealer.clone());
            verifier.expect(checkpoints)?;
            loop {
                let after = verifier.last().map(|e| i64_of(e.seq)).unwrap_or(0);
                let sql = sql.clone();
                let rows = self
                    .reader
                    .run(move |c| {
                        let mut stmt = c.prepare_cached(&sql)?;
                        let rows = stmt.query_map([after], read_entry)?;
                        rows.collect::<rusqlite::Result<Vec<_>>>()
                    })
                    .await
                    .map_err(|e| VerifyError::Unavailable(serr(e)))?;
                if rows.is_empty() {
                    return Ok(verifier.finish()?);
                }
                let disagree = rows.iter().position(|(e, c)| !c.agree(e));
                let altered = disagree.map(|i| rows[i].0.seq);
                let entries: Vec<AuditEntry> = rows
                    .into_iter()
                    .take(disagree.unwrap_or(usize::MAX))
                    .map(|(e, _)| e)
                    .collect();
                verifier.feed(&entries)?;
                if let Some(seq) = altered {
                    return Err(VerifyError::Broken(
                        toolguard_pipeline::audit::ChainBreak::Altered { seq },
                    ));
                }
            }
        })
    }
}
