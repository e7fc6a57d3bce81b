//! PostgreSQL audit sink (feature `postgres`) with group commit.
//!
//! Appends go into a queue; one writer task takes everything queued (up to [`MAX_BATCH`]),
//! locks the chain head (a transaction-level advisory lock, so several replicas may append to
//! one trail), reads the last stored entry, seals the batch after it and inserts it with one
//! `INSERT ... SELECT FROM unnest(...)` in one transaction; each `append` resolves once its batch
//! committed. A batch whose session fails (cut by the server, the network, a restart) is
//! retried on a fresh one, and never stored twice: a retry first learns, under the lock, whether
//! the failed attempt committed after all.

use arcstr::ArcStr;
use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use std::sync::Arc;

use crate::store::{PgConfig, connect_pool};
use toolguard_pipeline::audit::columns::{COLUMNS, Columns, limit_of};
use toolguard_pipeline::audit::{AuditAnchor, Checkpoint};
use toolguard_pipeline::audit::{AuditEntry, AuditRecord};
use toolguard_pipeline::audit::{AuditError, AuditSink};
use toolguard_pipeline::audit::{AuditQuery, ChainVerifier, VerifyError, VerifyReport};
use toolguard_pipeline::audit::{ChainBreak, GENESIS_HASH, Sealer};
use toolguard_pipeline::store::StoreError;
use toolguard_pipeline::store::encode::i64_of;
use toolguard_pipeline::tool::BoxFuture;

/// Most entries committed in one transaction.
pub const MAX_BATCH: usize = 4096;

const QUEUE: usize = 65_536;
const VERIFY_CHUNK: i64 = 10_000;

/// The stored entry's sequence number and hash.
type Reply = oneshot::Sender<Result<(u64, String), AuditError>>;

/// An audit trail in PostgreSQL (the table `toolguard_audit` of the configured schema).
pub struct PgAuditSink {
    queue: mpsc::Sender<(AuditRecord, Reply)>,
    pool: Pool,
    sealer: Sealer,
    anchor: Option<Arc<AuditAnchor>>,
}

impl std::fmt::Debug for PgAuditSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgAuditSink").finish_non_exhaustive()
    }
}

/// `e` as an audit error, with the causes its own message leaves out (the server's message
/// behind a client's `db error`).
fn aerr(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> AuditError {
    let e = e.into();
    let mut text = format!("postgres: {e}");
    let mut cause = e.source();
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    AuditError(text)
}

/// Inserts a sealed batch, one array per column.
const INSERT: &str = "INSERT INTO toolguard_audit
    (seq, time_ms, tenant, subject, tool, status, record, prev_hash, hash)
    SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[], $4::TEXT[], $5::TEXT[],
                         $6::TEXT[], $7::TEXT[], $8::TEXT[], $9::TEXT[])";

/// Opens the batch's transaction and locks the chain head: one lock per schema, so that trails
/// in other schemas do not wait for this one. The transaction's commit does not wait for the
/// disk, so that the lock is free as soon as the batch is visible; [`FLUSH`] waits for it.
const BEGIN_LOCKED: &str = "BEGIN; SET LOCAL synchronous_commit = off; \
    SELECT pg_advisory_xact_lock(hashtextextended('toolguard_audit:' || current_schema(), 0))";
/// A transaction with an id, committed as the session commits (synced): its commit returns once
/// the log is on disk up to its commit record, so up to the batch committed before it on the
/// session. The log is written in order, so a batch is never on disk without every earlier
/// batch it chains to, whichever replica wrote it.
const FLUSH: &str = "SELECT txid_current()";
/// The chain head: the last stored entry.
const HEAD: &str = "SELECT seq, hash FROM toolguard_audit ORDER BY seq DESC LIMIT 1";

/// The sequence numbers and hashes a batch was given: the last entry's pair tells whether
/// that batch committed (the batch is one transaction).
type Assigned = Vec<(u64, String)>;

/// Why a batch was not stored, and whether its commit may have happened anyway.
struct Unstored {
    error: AuditError,
    /// The pairs of a batch whose insert and commit were sent on a session that then failed:
    /// the server may have committed it.
    sent: Option<Assigned>,
}

impl From<AuditError> for Unstored {
    fn from(error: AuditError) -> Self {
        Unstored { error, sent: None }
    }
}

/// Seals `records` after the chain head and inserts them in one transaction; the sequence number
/// and hash of each once committed.
///
/// Two round trips: the transaction's start, the lock and the head read are sent together (the
/// server runs them in order, so the head is read after the lock, in a snapshot of its own), then
/// the insert, the commit (which frees the lock without waiting for the disk) and [`FLUSH`]
/// (which waits for the disk): other replicas' batches take the lock while this one's is synced.
/// A session that fails anywhere (or whose batch is dropped midway) is closed, not returned to
/// the pool, so that no later batch runs in a transaction this one left open.
///
/// `earlier` is an attempt at the same records whose session failed after sending its commit.
/// Holding the lock, this attempt knows that transaction ended (it held the lock until then):
/// if its last entry is stored, it committed and its pairs are the answer (nothing is inserted
/// twice); otherwise it did not, and the records are sealed anew after the head.
async fn seal_and_insert(
    pool: &Pool,
    sealer: &Sealer,
    records: &[AuditRecord],
    earlier: Option<&Assigned>,
) -> Result<Assigned, Unstored> {
    let mut session = Discarded(Some(pool.get().await.map_err(aerr)?));
    let client = session.0.as_ref().ok_or_else(|| aerr("no session"))?;
    let result = async {
        let head_stmt = client.prepare_cached(HEAD).await.map_err(aerr)?;
        let insert_stmt = client.prepare_cached(INSERT).await.map_err(aerr)?;
        let (locked, head) = tokio::join!(
            client.batch_execute(BEGIN_LOCKED),
            client.query_opt(&head_stmt, &[])
        );
        locked.map_err(aerr)?;
        let (mut seq, mut prev) = match head.map_err(aerr)? {
            Some(r) => (
                u64::try_from(r.try_get::<_, i64>(0).map_err(aerr)?).unwrap_or(0),
                ArcStr::from(r.try_get::<_, &str>(1).map_err(aerr)?),
            ),
            None => (0, ArcStr::from(GENESIS_HASH)),
        };
        if let Some(earlier) = earlier
            && committed(client, earlier, seq).await?
        {
            // Stored by the earlier attempt: this transaction only held the lock. The flush
            // waits for the disk up to the earlier commit, as that attempt's would have.
            let (released, flushed) =
                tokio::join!(client.batch_execute("COMMIT"), client.batch_execute(FLUSH));
            released.map_err(aerr)?;
            flushed.map_err(aerr)?;
            return Ok(earlier.clone());
        }
        let n = records.len();
        let mut columns = Sealed::with_capacity(n);
        let mut assigned = Vec::with_capacity(n);
        for record in records {
            seq += 1;
            let entry = sealer.seal(seq, record.clone(), &prev);
            prev = entry.hash.clone();
            assigned.push((seq, entry.hash.to_string()));
            columns.push(seq, entry)?;
        }
        let Sealed {
            seqs,
            times,
            statuses,
            bodies,
            text,
        } = &columns;
        // The shared strings, as the text arrays the statement binds.
        let [tenants, subjects, tools, prevs, hashes] = text
            .each_ref()
            .map(|v| v.iter().map(|s| &**s).collect::<Vec<&str>>());
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
            seqs, times, &tenants, &subjects, &tools, statuses, bodies, &prevs, &hashes,
        ];
        let (inserted, committed, flushed) = tokio::join!(
            client.execute(&insert_stmt, &params),
            client.batch_execute("COMMIT"),
            client.batch_execute(FLUSH)
        );
        // An insert the server refused left the transaction aborted (its `COMMIT` rolled it
        // back), but the three were sent together: when the session failed, any answer lost
        // may be that of a commit the server made. The next attempt finds out.
        let sent = |error| Unstored {
            error,
            sent: Some(assigned.clone()),
        };
        inserted.map_err(aerr).map_err(sent)?;
        committed.map_err(aerr).map_err(sent)?;
        flushed.map_err(aerr).map_err(sent)?;
        Ok::<_, Unstored>(assigned)
    }
    .await;
    if result.is_ok() {
        // Committed: the session goes back to the pool.
        drop(session.0.take());
    }
    result
}

/// Whether the batch `earlier` is stored, the chain's head being at `head` (read under the
/// lock, after that batch's transaction ended).
async fn committed(
    client: &deadpool_postgres::Object,
    earlier: &Assigned,
    head: u64,
) -> Result<bool, AuditError> {
    let Some((last, hash)) = earlier.last() else {
        return Ok(true);
    };
    if *last > head {
        return Ok(false);
    }
    let row = client
        .query_opt(
            "SELECT hash FROM toolguard_audit WHERE seq = $1",
            &[&i64_of(*last)],
        )
        .await
        .map_err(aerr)?;
    Ok(row.is_some_and(|r| r.try_get::<_, &str>(0).is_ok_and(|h| h == hash)))
}

/// How long a batch is retried after a failure (a session cut, the server restarting), each
/// retry on a fresh session, before its appends fail.
const RETRY_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// Stores `records`, retrying on a fresh session after a failure, for up to [`RETRY_FOR`]. A
/// retry never stores a record twice: an attempt whose commit may have happened is resolved
/// first (see [`seal_and_insert`]).
async fn store(
    pool: &Pool,
    sealer: &Sealer,
    records: &[AuditRecord],
) -> Result<Assigned, AuditError> {
    let started = std::time::Instant::now();
    let mut pause = std::time::Duration::from_millis(10);
    let mut earlier: Option<Assigned> = None;
    loop {
        match seal_and_insert(pool, sealer, records, earlier.as_ref()).await {
            Ok(assigned) => return Ok(assigned),
            Err(Unstored { error, sent }) => {
                if sent.is_some() {
                    earlier = sent;
                }
                if started.elapsed() + pause > RETRY_FOR {
                    return Err(error);
                }
                tracing::warn!(error = %error, "audit batch not stored; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(std::time::Duration::from_millis(500));
            }
        }
    }
}

/// A pooled session closed when dropped, unless taken out first.
struct Discarded(Option<deadpool_postgres::Object>);

impl Drop for Discarded {
    fn drop(&mut self) {
        if let Some(session) = self.0.take() {
            drop(deadpool_postgres::Object::take(session));
        }
    }
}

/// The columns of a sealed batch.
struct Sealed {
    seqs: Vec<i64>,
    times: Vec<i64>,
    statuses: Vec<Option<String>>,
    bodies: Vec<String>,
    /// Tenants, subjects, tools, previous hashes, hashes.
    text: [Vec<ArcStr>; 5],
}

impl Sealed {
    fn with_capacity(n: usize) -> Self {
        Sealed {
            seqs: Vec::with_capacity(n),
            times: Vec::with_capacity(n),
            statuses: Vec::with_capacity(n),
            bodies: Vec::with_capacity(n),
            text: std::array::from_fn(|_| Vec::with_capacity(n)),
        }
    }

    fn push(&mut self, seq: u64, entry: AuditEntry) -> Result<(), AuditError> {
        self.bodies
            .push(serde_json::to_string(&entry.record).map_err(aerr)?);
        self.seqs.push(i64_of(seq));
        self.times.push(i64_of(entry.record.time_ms));
        self.statuses
            .push(entry.record.status.map(|s| s.as_str().to_owned()));
        let [tenants, subjects, tools, prevs, hashes] = &mut self.text;
        tenants.push(entry.record.tenant);
        subjects.push(entry.record.subject);
        tools.push(entry.record.tool);
        prevs.push(entry.prev_hash);
        hashes.push(entry.hash);
        Ok(())
    }
}

async fn write_batch(pool: &Pool, sealer: &Sealer, batch: Vec<(AuditRecord, Reply)>) {
    let (records, replies): (Vec<AuditRecord>, Vec<Reply>) = batch.into_iter().unzip();
    match store(pool, sealer, &records).await {
        Ok(seqs) => {
            for (reply, seq) in replies.into_iter().zip(seqs) {
                let _ = reply.send(Ok(seq));
            }
        }
        Err(e) => {
            for reply in replies {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

async fn writer(pool: Pool, sealer: Sealer, mut rx: mpsc::Receiver<(AuditRecord, Reply)>) {
    while let Some(first) = rx.recv().await {
        let mut batch = Vec::with_capacity(64);
        batch.push(first);
        // As the store's writers do (see `batch`): the calls the last batch answered queue
        // their next entries first.
        tokio::task::yield_now().await;
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        write_batch(&pool, &sealer, batch).await;
    }
}

fn read_entry(row: &tokio_postgres::Row) -> Result<(AuditEntry, Columns), AuditError> {
    let seq: i64 = row.try_get(0).map_err(aerr)?;
    let body: String = row.try_get(1).map_err(aerr)?;
    // A record that no longer parses was altered; keep it so that `verify` names it.
    let record = serde_json::from_str(&body).unwrap_or_else(|_| AuditRecord {
        reason: Some("unreadable record".into()),
        ..AuditRecord::default()
    });
    Ok((
        AuditEntry {
            seq: u64::try_from(seq).unwrap_or(0),
            record,
            prev_hash: row.try_get::<_, &str>(2).map_err(aerr)?.into(),
            hash: row.try_get::<_, &str>(3).map_err(aerr)?.into(),
        },
        Columns {
            time_ms: row.try_get(4).map_err(aerr)?,
            tenant: row.try_get(5).map_err(aerr)?,
            subject: row.try_get(6).map_err(aerr)?,
            tool: row.try_get(7).map_err(aerr)?,
            status: row.try_get(8).map_err(aerr)?,
        },
    ))
}

impl PgAuditSink {
    /// Connects (creating the schema and applying migrations if needed) and starts the writer
    /// task on the current Tokio runtime.
    /// The chain is plain SHA-256 (no key): see [`connect_anchored`](Self::connect_anchored).
    pub async fn connect(config: &PgConfig) -> Result<Self, StoreError> {
        Self::connect_inner(config, None).await
    }

    /// Connects as [`connect`](Self::connect) does, sealing entries with the anchor's host keys
    /// and writing its checkpoints.
    pub async fn connect_anchored(
        config: &PgConfig,
        anchor: AuditAnchor,
    ) -> Result<Self, StoreError> {
        Self::connect_inner(config, Some(Arc::new(anchor))).await
    }

    async fn connect_inner(
        config: &PgConfig,
        anchor: Option<Arc<AuditAnchor>>,
    ) -> Result<Self, StoreError> {
        Ok(Self::on_pool(connect_pool(config).await?, anchor))
    }

    /// A sink on `pool` (migrated), with its writer task started on the current Tokio runtime.
    pub(crate) fn on_pool(pool: Pool, anchor: Option<Arc<AuditAnchor>>) -> Self {
        let sealer = anchor.as_ref().map_or(Sealer::Plain, |a| a.sealer());
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(writer(pool.clone(), sealer.clone(), rx));
        PgAuditSink {
            queue,
            pool,
            sealer,
            anchor,
        }
    }

    async fn select(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<(AuditEntry, Columns)>, AuditError> {
        let client = self.pool.get().await.map_err(aerr)?;
        let stmt = client.prepare_cached(sql).await.map_err(aerr)?;
        let rows = client.query(&stmt, params).await.map_err(aerr)?;
        rows.iter().map(read_entry).collect()
    }

    /// Number of stored entries.
    pub async fn len(&self) -> Result<u64, AuditError> {
        let client = self.pool.get().await.map_err(aerr)?;
        let row = client
            .query_one("SELECT COUNT(*) FROM toolguard_audit", &[])
            .await
            .map_err(aerr)?;
        Ok(u64::try_from(row.try_get::<_, i64>(0).map_err(aerr)?).unwrap_or(0))
    }

    /// Whether the trail holds no entry.
    pub async fn is_empty(&self) -> Result<bool, AuditError> {
        Ok(self.len().await? == 0)
    }

    /// The entry with sequence number `seq`.
    pub async fn get(&self, seq: u64) -> Result<Option<AuditEntry>, AuditError> {
        let sql = format!("SELECT {COLUMNS} FROM toolguard_audit WHERE seq = $1");
        let rows = self.select(&sql, &[&i64_of(seq)]).await?;
        Ok(rows.into_iter().next().map(|(e, _)| e))
    }
}

fn entries(rows: Vec<(AuditEntry, Columns)>) -> Vec<AuditEntry> {
    rows.into_iter().map(|(e, _)| e).collect()
}

impl AuditSink for PgAuditSink {
    fn durable_unanchored(&self) -> bool {
        self.anchor.as_ref().is_none_or(|a| !a.has_checkpoints())
    }

    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        Box::pin(async move {
            let (reply, done) = oneshot::channel();
            self.queue
                .send((record, reply))
                .await
                .map_err(|_| AuditError("postgres: the audit writer stopped".to_owned()))?;
            let (seq, head) = done
                .await
                .map_err(|_| AuditError("postgres: the audit writer stopped".to_owned()))??;
            if let Some(anchor) = &self.anchor {
                anchor.appended(seq, &head).await;
            }
            Ok(seq)
        })
    }
}

impl AuditQuery for PgAuditSink {
    fn by_actor<'a>(
        &'a self,
        tenant: &'a str,
        subject: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM toolguard_audit WHERE tenant = $1 AND subject = $2
                 ORDER BY seq DESC LIMIT $3"
            );
            self.select(&sql, &[&tenant, &subject, &limit_of(limit)])
                .await
                .map(entries)
        })
    }

    fn by_tool<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM toolguard_audit WHERE tool = $1 ORDER BY seq DESC LIMIT $2"
            );
            self.select(&sql, &[&tool, &limit_of(limit)])
                .await
                .map(entries)
        })
    }

    fn by_source<'a>(
        &'a self,
        source_id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM toolguard_audit
                 WHERE jsonb_exists(record::jsonb -> 'sources', $1) ORDER BY seq LIMIT $2"
            );
            self.select(&sql, &[&source_id, &limit_of(limit)])
                .await
                .map(entries)
        })
    }

    fn by_time(
        &self,
        from_ms: u64,
        to_ms: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, AuditError>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM toolguard_audit WHERE time_ms >= $1 AND time_ms < $2
                 ORDER BY time_ms, seq LIMIT $3"
            );
            self.select(&sql, &[&i64_of(from_ms), &i64_of(to_ms), &limit_of(limit)])
                .await
                .map(entries)
        })
    }

    fn verify_against<'a>(
        &'a self,
        checkpoints: &'a [Checkpoint],
    ) -> BoxFuture<'a, Result<VerifyReport, VerifyError>> {
        Box::pin(async move {
            let sql = format!(
                "SELECT {COLUMNS} FROM toolguard_audit WHERE seq > $1 ORDER BY seq LIMIT {VERIFY_CHUNK}"
            );
            let mut verifier = ChainVerifier::with_sealer(self.sealer.clone());
            verifier.expect(checkpoints)?;
            loop {
                let after = verifier.last().map(|e| i64_of(e.seq)).unwrap_or(0);
                let rows = self.select(&sql, &[&after]).await?;
                if rows.is_empty() {
                    return Ok(verifier.finish()?);
                }
                let disagree = rows.iter().position(|(e, c)| !c.agree(e));
                let altered = disagree.map(|i| rows[i].0.seq);
                let chunk: Vec<AuditEntry> = rows
                    .into_iter()
                    .take(disagree.unwrap_or(usize::MAX))
                    .map(|(e, _)| e)
                    .collect();
                verifier.feed(&chunk)?;
                if let Some(seq) = altered {
                    return Err(VerifyError::Broken(ChainBreak::Altered { seq }));
                }
            }
        })
    }
}
