//! Group commit for the PostgreSQL store's writes on a call's path: idempotency reservations,
//! completions and operation records.
//!
//! Under concurrency most of a call's cost on PostgreSQL is the statement round trip itself (a
//! server process woken, a plan run, a reply sent), not the rows. A [`Batcher`] queues these
//! writes; one writer task takes everything queued (up to [`MAX_BATCH`]) and writes it with one
//! statement ([`WRITE_BATCH`]: one data-modifying sub-statement per kind, over arrays), which
//! commits on its own, then answers every caller. A caller still waits until its row is
//! committed, so what a call writes is visible (and, on the synced pool, on disk) before the call
//! goes on. A statement never touches one idempotency key twice: a second write of a key in the
//! same batch goes to a statement of its own, in queue order. If a statement fails, the writes it
//! carried (and those after it) are retried one by one, so one bad row never fails the others.
//!
//! A statement whose session was lost (cut by the server, a restart, a failover) may have
//! committed without its answer arriving. The writes without an answer are then written again
//! on a fresh session, a bounded number of times ([`TRIES`]), and every kind of write is safe to
//! write twice: an operation record is replaced by itself, a reservation finds the key held by
//! its own owner token (which only that reservation can have written) and is answered as won,
//! and a completion that finds its own outcome already stored is answered as applied.

use std::collections::{HashMap, HashSet};

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use crate::store::{err, read_record};
use toolguard_pipeline::store::{RecordState, Reservation, StoreError, StoreResult};

/// Most writes written by one statement.
const MAX_BATCH: usize = 512;
/// Writes waiting at most; callers wait for room beyond it.
const QUEUE: usize = 8_192;
/// Most statements a write is tried in while its sessions are lost.
const TRIES: u32 = 3;

/// Writes one batch; the sub-statements touch distinct rows.
///
/// - `r` ($1-$7): reservations `(key, digest, operation_id, owner, lease_until_ms,
///   expires_at_ms, now_ms)`. `won` inserts each, or takes over the row of its key if that row
///   expired at the reservation's own `now_ms` (one atomic `INSERT ... ON CONFLICT` per key).
/// - `ops` ($8-$10): operation records `(id, updated_at_ms, body)`, inserted or replaced.
/// - `done` ($11-$14): completions `(outcome, expires_at_ms, key, owner)`: the outcome is stored
///   under keys their owners still hold.
///
/// Rows out: `(0, key)` per completed key, `(1, key)` per reservation won, and `(2, key, record
/// columns)` for each row of a reserved key as it was before the statement (the sub-statements'
/// changes are not visible to it): for a key not won, the record that held it.
const WRITE_BATCH: &str = "WITH r AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[],
        $6::bigint[], $7::bigint[]) AS r(key, digest, op, owner, lease, expires, now)
), ops AS (
    INSERT INTO toolguard_operations (id, updated_at_ms, body)
    SELECT * FROM unnest($8::text[], $9::bigint[], $10::text[])
    ON CONFLICT (id) DO UPDATE SET updated_at_ms = excluded.updated_at_ms, body = excluded.body
), done AS (
    UPDATE toolguard_idempotency AS t
    SET outcome = u.outcome, owner = NULL, expires_at_ms = u.expires
    FROM unnest($11::text[], $12::bigint[], $13::text[], $14::text[])
        AS u(outcome, expires, key, owner)
    WHERE t.key = u.key AND t.owner = u.owner AND t.outcome IS NULL
    RETURNING t.key
), won AS (
    INSERT INTO toolguard_idempotency AS t
        (key, request_digest, operation_id, owner, lease_until_ms, outcome, expires_at_ms)
    SELECT key, digest, op, owner, lease, NULL, expires FROM r
    ON CONFLICT (key) DO UPDATE SET
        request_digest = excluded.request_digest,
        operation_id = excluded.operation_id,
        owner = excluded.owner,
        lease_until_ms = excluded.lease_until_ms,
        outcome = NULL,
        expires_at_ms = excluded.expires_at_ms
    WHERE t.expires_at_ms <= (SELECT r.now FROM r WHERE r.key = excluded.key)
    RETURNING t.key
)
SELECT 0, key, NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::text, NULL::bigint
    FROM done
UNION ALL SELECT 1, key, NULL, NULL, NULL, NULL, NULL, NULL FROM won
UNION ALL SELECT 2, key, request_digest, operation_id, owner, lease_until_ms, outcome,
    expires_at_ms FROM toolguard_idempotency WHERE key = ANY($1::text[])";

/// One queued write.
#[derive(Debug, Clone)]
pub(crate) enum Write {
    /// Insert or replace the operation record `id`.
    Operation {
        /// Operation id.
        id: String,
        /// When the record changed, Unix milliseconds.
        updated_at_ms: i64,
        /// The record as JSON.
        body: String,
    },
    /// Store `outcome` under `key` if `owner` still holds it.
    Completion {
        /// Storage key of the idempotency record.
        key: String,
        /// The reservation's owner token.
        owner: String,
        /// The stored outcome as JSON.
        outcome: String,
        /// New expiry, Unix milliseconds.
        expires_at_ms: i64,
    },
    /// Reserve `key` for `owner` if it has no record live at `now_ms`.
    Reservation {
        /// Storage key of the idempotency record.
        key: String,
        /// Request digest of the reserving call.
        request_digest: String,
        /// Operation id of the reserving call.
        operation_id: Option<String>,
        /// The new owner token.
        owner: String,
        /// When the lease ends, Unix milliseconds.
        lease_until_ms: i64,
        /// When the record expires, Unix milliseconds.
        expires_at_ms: i64,
        /// The reservation's present, Unix milliseconds: a record expired by then counts as
        /// absent.
        now_ms: i64,
    },
}

/// What a write did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Written {
    /// An operation record (always `true`) or a completion (whether the owner still held the
    /// key).
    Applied(bool),
    /// A reservation: won or the live record that holds the key; `None` if neither could be
    /// told (the record that held the key changed while the statement ran): try again.
    Reserved(Option<Box<Reservation>>),
}

type Reply = oneshot::Sender<StoreResult<Written>>;

/// The queue of one pool's writer task.
#[derive(Debug, Clone)]
pub(crate) struct Batcher {
    queue: mpsc::Sender<(Write, Reply)>,
}

impl Batcher {
    /// Starts the writer task for `pool` on the current Tokio runtime.
    pub(crate) fn start(pool: Pool) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(writer(pool, rx));
        Batcher { queue }
    }

    /// Writes `first`, then `second`, with whatever else is queued: both are queued before
    /// either is waited for, so that they usually share a statement (one transaction), and
    /// `second` is never committed before `first` (a statement that carries both commits them
    /// together; else `first`'s comes first). Returns what each did once committed.
    pub(crate) async fn submit_pair(
        &self,
        first: Write,
        second: Write,
    ) -> (StoreResult<Written>, StoreResult<Written>) {
        // The writer takes the queue in order.
        let first = self.queue_write(first).await;
        let second = match first {
            Ok(_) => self.queue_write(second).await,
            Err(_) => Err(stopped()),
        };
        (answered(first).await, answered(second).await)
    }

    /// Writes `write` with whatever else is queued; returns what it did once it committed.
    pub(crate) async fn submit(&self, write: Write) -> StoreResult<Written> {
        answered(self.queue_write(write).await).await
    }

    /// Queues `write` for the writer; the answer comes on the returned channel once committed.
    async fn queue_write(
        &self,
        write: Write,
    ) -> StoreResult<oneshot::Receiver<StoreResult<Written>>> {
        let (reply, done) = oneshot::channel();
        self.queue
            .send((write, reply))
            .await
            .map_err(|_| stopped())?;
        Ok(done)
    }
}

/// The writer's answer to a queued write.
async fn answered(
    queued: StoreResult<oneshot::Receiver<StoreResult<Written>>>,
) -> StoreResult<Written> {
    queued?.await.map_err(|_| stopped())?
}

/// The writer task is gone.
fn stopped() -> StoreError {
    StoreError::new("postgres: the store's writer stopped".to_owned())
}

async fn writer(pool: Pool, mut rx: mpsc::Receiver<(Write, Reply)>) {
    let mut batch = Vec::with_capacity(64);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // The calls the previous batch answered run first and queue their next writes, which
        // then share this statement: fewer, larger statements, and less waiting in all.
        tokio::task::yield_now().await;
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(write) => batch.push(write),
                Err(_) => break,
            }
        }
        let (writes, replies): (Vec<Write>, Vec<Reply>) = batch.drain(..).unzip();
        let mut results: Vec<Option<Written>> = vec![None; writes.len()];
        let (failed, lost) = write_tried(&pool, &writes, &mut results).await;
        for ((write, reply), result) in writes.into_iter().zip(replies).zip(results) {
            let answer = match (result, &failed) {
                // Committed by a statement that succeeded (after one that was lost, perhaps:
                // a completion it did not apply may be that one's).
                (Some(done), _) if lost => earlier(&pool, &write, done).await,
                (Some(done), _) => Ok(done),
                (None, None) => Err(no_answer()),
                // Its statement failed: tried on its own, so that one bad write does not fail
                // the rest.
                (None, Some(_)) => {
                    let mut one = [None];
                    match write_tried(&pool, std::slice::from_ref(&write), &mut one).await {
                        (None, also_lost) => {
                            let done = one[0].take().ok_or_else(no_answer);
                            match done {
                                Ok(done) if lost || also_lost => earlier(&pool, &write, done).await,
                                done => done,
                            }
                        }
                        (Some(e), _) => Err(e),
                    }
                }
            };
            let _ = reply.send(answer);
        }
    }
}

fn no_answer() -> StoreError {
    StoreError::new("postgres: a batched write got no answer".to_owned())
}

/// Writes `writes` as [`write_all`] does, again on a fresh session while a statement fails
/// because its session was lost (at most [`TRIES`] statements in all), each time the writes
/// still without an answer. Returns the last failure, if any, and whether a session was lost
/// (a statement then may have committed without its answer).
async fn write_tried(
    pool: &Pool,
    writes: &[Write],
    results: &mut [Option<Written>],
) -> (Option<StoreError>, bool) {
    let mut lost = false;
    for tried in 1..=TRIES {
        match write_all(pool, writes, results).await {
            Ok(()) => return (None, lost),
            Err(f) if f.lost && tried < TRIES => lost = true,
            Err(f) => return (Some(f.error), lost || f.lost),
        }
    }
    (Some(no_answer()), lost)
}

/// What `write` did, told again after a lost session: a completion not applied may have been
/// applied by the statement whose answer was lost, and is if its outcome is stored under its
/// key, no longer held by anyone.
async fn earlier(pool: &Pool, write: &Write, done: Written) -> StoreResult<Written> {
    let Write::Completion { key, outcome, .. } = write else {
        return Ok(done);
    };
    if done != Written::Applied(false) {
        return Ok(done);
    }
    let client = pool.get().await.map_err(err)?;
    let stmt = client.prepare_cached(STORED_OUTCOME).await.map_err(err)?;
    let found = client
        .query_opt(&stmt, &[key, outcome])
        .await
        .map_err(err)?;
    Ok(Written::Applied(found.is_some()))
}

/// Whether a key holds exactly this outcome and no owner: a completion's own result.
const STORED_OUTCOME: &str = "SELECT 1 FROM toolguard_idempotency \
     WHERE key = $1 AND owner IS NULL AND outcome = $2";

/// Why a statement failed.
struct Failed {
    error: StoreError,
    /// Its session was lost (the connection closed under it): the statement may have committed,
    /// and a fresh session may succeed.
    lost: bool,
}

/// A failure of `client`'s statement.
fn failed(client: &deadpool_postgres::Object, e: tokio_postgres::Error) -> Failed {
    Failed {
        lost: client.is_closed() || session_lost(&e),
        error: err(e),
    }
}

/// Whether `e` ended its session: the connection closed or broke, or the server ended it (a
/// `FATAL` error such as `57P01`, terminated by an administrator, or a connection exception,
/// class `08`).
fn session_lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return db.severity() == "FATAL" || code.starts_with("08") || code.starts_with("57P");
    }
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// Writes those of `writes` without an answer in `results` with as few statements as the
/// distinct-key rule allows (each commits on its own), filling `results` for the writes of every
/// statement that committed; stops at the first statement that fails.
async fn write_all(
    pool: &Pool,
    writes: &[Write],
    results: &mut [Option<Written>],
) -> Result<(), Failed> {
    let client = pool.get().await.map_err(|e| Failed {
        // A session cut while it was being opened: nothing was sent on it.
        lost: matches!(&e, deadpool_postgres::PoolError::Backend(e) if session_lost(e)),
        error: err(e),
    })?;
    let stmt = client
        .prepare_cached(WRITE_BATCH)
        .await
        .map_err(|e| failed(&client, e))?;
    let mut pending: Vec<usize> = (0..writes.len())
        .filter(|&i| results[i].is_none())
        .collect();
    while !pending.is_empty() {
        let mut round = Round::default();
        let mut later = Vec::new();
        for i in pending {
            if !round.push(i, &writes[i]) {
                later.push(i);
            }
        }
        let rows = client
            .query(
                &stmt,
                &[
                    &round.r_keys,
                    &round.r_digests,
                    &round.r_operations,
                    &round.r_owners,
                    &round.r_leases,
                    &round.r_expiries,
                    &round.r_nows,
                    &round.op_ids,
                    &round.op_times,
                    &round.op_bodies,
                    &round.c_outcomes,
                    &round.c_expiries,
                    &round.c_keys,
                    &round.c_owners,
                ],
            )
            .await
            .map_err(|e| failed(&client, e))?;
        round
            .answer(writes, &rows, results)
            .map_err(|error| Failed { error, lost: false })?;
        pending = later;
    }
    Ok(())
}

/// One statement's writes, as arrays, and the batch slot of each.
#[derive(Default)]
struct Round<'w> {
    r_keys: Vec<&'w str>,
    r_digests: Vec<&'w str>,
    r_operations: Vec<Option<&'w str>>,
    r_owners: Vec<&'w str>,
    r_leases: Vec<i64>,
    r_expiries: Vec<i64>,
    r_nows: Vec<i64>,
    op_ids: Vec<&'w str>,
    op_times: Vec<i64>,
    op_bodies: Vec<&'w str>,
    c_outcomes: Vec<&'w str>,
    c_expiries: Vec<i64>,
    c_keys: Vec<&'w str>,
    c_owners: Vec<&'w str>,
    /// Batch slots of the operation records written; several slots of one id share a row.
    op_slots: Vec<usize>,
    /// Batch slot of each key written (completion or reservation).
    keys: HashMap<&'w str, usize>,
    /// Row of each operation id.
    op_rows: HashMap<&'w str, usize>,
}

impl<'w> Round<'w> {
    /// Adds write `w` (batch slot `i`) unless its key is already written by this statement. An
    /// operation record always joins; of several of one id, the last one queued is written.
    fn push(&mut self, i: usize, w: &'w Write) -> bool {
        match w {
            Write::Operation {
                id,
                updated_at_ms,
                body,
            } => {
                match self.op_rows.get(id.as_str()) {
                    Some(&row) => {
                        self.op_times[row] = *updated_at_ms;
                        self.op_bodies[row] = body;
                    }
                    None => {
                        self.op_rows.insert(id, self.op_ids.len());
                        self.op_ids.push(id);
                        self.op_times.push(*updated_at_ms);
                        self.op_bodies.push(body);
                    }
                }
                self.op_slots.push(i);
            }
            Write::Completion {
                key,
                owner,
                outcome,
                expires_at_ms,
            } => {
                if self.keys.contains_key(key.as_str()) {
                    return false;
                }
                self.keys.insert(key, i);
                self.c_outcomes.push(outcome);
                self.c_expiries.push(*expires_at_ms);
                self.c_keys.push(key);
                self.c_owners.push(owner);
            }
            Write::Reservation {
                key,
                request_digest,
                operation_id,
                owner,
                lease_until_ms,
                expires_at_ms,
                now_ms,
            } => {
                if self.keys.contains_key(key.as_str()) {
                    return false;
                }
                self.keys.insert(key, i);
                self.r_keys.push(key);
                self.r_digests.push(request_digest);
                self.r_operations.push(operation_id.as_deref());
                self.r_owners.push(owner);
                self.r_leases.push(*lease_until_ms);
                self.r_expiries.push(*expires_at_ms);
                self.r_nows.push(*now_ms);
            }
        }
        true
    }

    /// Fills `results` for this statement's writes from its `rows`.
    fn answer(
        &self,
        writes: &[Write],
        rows: &[tokio_postgres::Row],
        results: &mut [Option<Written>],
    ) -> StoreResult<()> {
        for &i in &self.op_slots {
            results[i] = Some(Written::Applied(true));
        }
        // Completions and reservations start as neither completed nor won.
        for &i in self.keys.values() {
            results[i] = Some(match writes[i] {
                Write::Reservation { .. } => Written::Reserved(None),
                _ => Written::Applied(false),
            });
        }
        let mut won = HashSet::new();
        for row in rows {
            let kind: i32 = row.try_get(0).map_err(err)?;
            let key: &str = row.try_get(1).map_err(err)?;
            let Some(&i) = self.keys.get(key) else {
                continue;
            };
            match (kind, &writes[i]) {
                (0, Write::Completion { .. }) => results[i] = Some(Written::Applied(true)),
                (1, Write::Reservation { owner, .. }) => {
                    won.insert(i);
                    results[i] = Some(Written::Reserved(Some(Box::new(Reservation::Reserved {
                        owner: owner.clone(),
                    }))));
                }
                (2, Write::Reservation { now_ms, owner, .. }) if !won.contains(&i) => {
                    let record = read_record(row, 2)?;
                    if matches!(&record.state, RecordState::InFlight { owner: held, .. } if held == owner)
                    {
                        // Held by this reservation's own token: an earlier statement carrying
                        // it committed, and its answer was lost with its session.
                        won.insert(i);
                        results[i] =
                            Some(Written::Reserved(Some(Box::new(Reservation::Reserved {
                                owner: owner.clone(),
                            }))));
                    } else if record.expires_at_ms > u64::try_from(*now_ms).unwrap_or(0) {
                        // Only a record live at the reservation's present held the key.
                        let existing = Box::new(Reservation::Existing(record));
                        results[i] = Some(Written::Reserved(Some(existing)));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! What a write does when it is written again after its answer was lost (needs
    //! `TOOLGUARD_PG_URL`; skipped without it).

    use super::*;
    use crate::store::{PgConfig, PgStore};

    async fn store(test: &str) -> Option<PgStore> {
        let Some(url) = std::env::var("TOOLGUARD_PG_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            eprintln!("skipped {test}: TOOLGUARD_PG_URL is not set");
            return None;
        };
        let schema = format!("batch_{test}_{}", std::process::id());
        Some(
            PgStore::connect(&PgConfig::new(url).schema(schema))
                .await
                .expect("connect postgres"),
        )
    }

    fn reservation(key: &str, owner: &str) -> Write {
        let now = 1_000_000_000_000;
        Write::Reservation {
            key: key.into(),
            request_digest: "digest".into(),
            operation_id: None,
            owner: owner.into(),
            lease_until_ms: now + 60_000,
            expires_at_ms: now + 3_600_000,
            now_ms: now,
        }
    }

    fn completion(key: &str, owner: &str, outcome: &str) -> Write {
        Write::Completion {
            key: key.into(),
            owner: owner.into(),
            outcome: outcome.into(),
            expires_at_ms: 1_000_000_000_000 + 3_600_000,
        }
    }

    fn reserved(written: &Written) -> Option<&str> {
        match written {
            Written::Reserved(Some(r)) => match &**r {
                Reservation::Reserved { owner } => Some(owner),
                Reservation::Existing(_) => None,
            },
            _ => None,
        }
    }

    #[tokio::test]
    async fn a_reservation_written_again_is_still_its_owners() {
        let Some(store) = store("reservation_again").await else {
            return;
        };
        let (batcher, _) = store.writer();
        let first = batcher.submit(reservation("k1", "owner-a")).await.unwrap();
        // The same reservation again, as after a statement whose answer was lost.
        let again = batcher.submit(reservation("k1", "owner-a")).await.unwrap();
        // Another caller's reservation of the key finds it held.
        let other = batcher.submit(reservation("k1", "owner-b")).await.unwrap();
        let _ = store.drop_schema().await;
        assert_eq!(reserved(&first), Some("owner-a"));
        assert_eq!(reserved(&again), Some("owner-a"), "{again:?}");
        assert!(
            matches!(&other, Written::Reserved(Some(r)) if matches!(&**r, Reservation::Existing(rec)
                if matches!(&rec.state, RecordState::InFlight { owner, .. } if owner == "owner-a"))),
            "{other:?}"
        );
    }

    #[tokio::test]
    async fn a_completion_whose_outcome_is_stored_was_applied() {
        let Some(store) = store("completion_again").await else {
            return;
        };
        let (batcher, pool) = store.writer();
        batcher.submit(reservation("k2", "owner-a")).await.unwrap();
        let write = completion("k2", "owner-a", r#"{"status":"ok"}"#);
        let first = batcher.submit(write.clone()).await.unwrap();
        // Written again: the key is no longer held, so the statement does not apply it...
        let again = batcher.submit(write.clone()).await.unwrap();
        // ...but the outcome it carries is the one stored: it was applied.
        let told = earlier(pool, &write, again.clone()).await.unwrap();
        // A completion of another outcome was not.
        let other = completion("k2", "owner-a", r#"{"status":"error"}"#);
        let not = earlier(pool, &other, Written::Applied(false))
            .await
            .unwrap();
        let _ = store.drop_schema().await;
        assert_eq!(first, Written::Applied(true));
        assert_eq!(again, Written::Applied(false));
        assert_eq!(told, Written::Applied(true));
        assert_eq!(not, Written::Applied(false));
    }
}
