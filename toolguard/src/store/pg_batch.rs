//! Group commit for the PostgreSQL store's writes that answer only "done": operation records and
//! idempotency completions.
//!
//! Under concurrency most of a call's cost on PostgreSQL is the statement round trip itself (a
//! server process woken, a plan run, a reply sent), not the rows. A [`Batcher`] queues these
//! writes; one writer task takes everything queued (up to [`MAX_BATCH`]) and writes it with one
//! statement per kind (`unnest` over arrays), then answers every caller. A caller still waits
//! until its row is committed, so what a call writes is visible (and, on the synced pool, on
//! disk) before the call goes on. If a batch fails, its writes are retried one by one, so one
//! bad row never fails the others.

use std::collections::{HashMap, HashSet};

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use super::postgres::err;
use super::{StoreError, StoreResult};

/// Most writes written by one statement.
const MAX_BATCH: usize = 512;
/// Writes waiting at most; callers wait for room beyond it.
const QUEUE: usize = 8_192;

/// Upserts operation records: `(id, updated_at_ms, body)` arrays.
const PUT_OPERATIONS: &str = "INSERT INTO toolguard_operations (id, updated_at_ms, body)
     SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[])
     ON CONFLICT (id) DO UPDATE SET updated_at_ms = excluded.updated_at_ms, body = excluded.body";

/// Stores outcomes under the keys their owners still hold: `(outcome, expires_at_ms, key,
/// owner)` arrays; returns the keys it completed.
const COMPLETE_KEYS: &str = "UPDATE toolguard_idempotency AS t
     SET outcome = u.outcome, owner = NULL, expires_at_ms = u.expires
     FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[]) AS u(outcome, expires, key, owner)
     WHERE t.key = u.key AND t.owner = u.owner AND t.outcome IS NULL
     RETURNING t.key";

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
}

type Reply = oneshot::Sender<StoreResult<bool>>;

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

    /// Writes `write` with whatever else is queued; for a completion, whether the owner still
    /// held the key (`true` for an operation record).
    pub(crate) async fn submit(&self, write: Write) -> StoreResult<bool> {
        let stopped = || StoreError::new("postgres: the store's writer stopped".to_owned());
        let (reply, done) = oneshot::channel();
        self.queue
            .send((write, reply))
            .await
            .map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }
}

async fn writer(pool: Pool, mut rx: mpsc::Receiver<(Write, Reply)>) {
    let mut batch = Vec::with_capacity(64);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (writes, replies): (Vec<Write>, Vec<Reply>) = batch.drain(..).unzip();
        match write_all(&pool, &writes).await {
            Ok(done) => {
                for (reply, done) in replies.into_iter().zip(done) {
                    let _ = reply.send(Ok(done));
                }
            }
            Err(e) if writes.len() == 1 => {
                let _ = replies.into_iter().next().map(|r| r.send(Err(e)));
            }
            // One bad write must not fail the rest: each is tried on its own.
            Err(_) => {
                for (write, reply) in writes.into_iter().zip(replies) {
                    let one = write_all(&pool, std::slice::from_ref(&write)).await;
                    let _ = reply.send(one.map(|done| done[0]));
                }
            }
        }
    }
}

/// Writes `writes`: every operation record with one statement, every completion with another
/// (each statement commits on its own); returns, per write, whether it took effect.
async fn write_all(pool: &Pool, writes: &[Write]) -> StoreResult<Vec<bool>> {
    let client = pool.get().await.map_err(err)?;
    let mut done = vec![true; writes.len()];
    let operations = Operations::of(writes);
    if !operations.ids.is_empty() {
        let stmt = client.prepare_cached(PUT_OPERATIONS).await.map_err(err)?;
        let Operations { ids, times, bodies } = &operations;
        client
            .execute(&stmt, &[ids, times, bodies])
            .await
            .map_err(err)?;
    }
    // A key is completed at most once per statement: a second completion of the same key in
    // one batch (a retry racing its original) goes to a statement of its own, in queue order.
    let mut pending: Vec<(usize, &Write)> = writes
        .iter()
        .enumerate()
        .filter(|(_, w)| matches!(w, Write::Completion { .. }))
        .collect();
    if !pending.is_empty() {
        let stmt = client.prepare_cached(COMPLETE_KEYS).await.map_err(err)?;
        while !pending.is_empty() {
            let mut round = Completions::default();
            let mut later = Vec::new();
            for (i, w) in pending {
                if !round.push(i, w) {
                    later.push((i, w));
                }
            }
            let Completions {
                outcomes,
                expiries,
                keys,
                owners,
                slots,
                ..
            } = &round;
            let rows = client
                .query(&stmt, &[outcomes, expiries, keys, owners])
                .await
                .map_err(err)?;
            let mut completed = HashSet::with_capacity(rows.len());
            for row in &rows {
                completed.insert(row.try_get::<_, String>(0).map_err(err)?);
            }
            for (key, &i) in keys.iter().zip(slots) {
                done[i] = completed.contains(key);
            }
            pending = later;
        }
    }
    Ok(done)
}

/// The operation records of a batch as statement arrays, the last write of each id winning
/// (one statement may not change a row twice).
struct Operations {
    ids: Vec<String>,
    times: Vec<i64>,
    bodies: Vec<String>,
}

impl Operations {
    fn of(writes: &[Write]) -> Self {
        let mut at: HashMap<&str, usize> = HashMap::new();
        let mut out = Operations {
            ids: Vec::new(),
            times: Vec::new(),
            bodies: Vec::new(),
        };
        for w in writes {
            let Write::Operation {
                id,
                updated_at_ms,
                body,
            } = w
            else {
                continue;
            };
            match at.get(id.as_str()) {
                Some(&i) => {
                    out.times[i] = *updated_at_ms;
                    out.bodies[i].clone_from(body);
                }
                None => {
                    at.insert(id, out.ids.len());
                    out.ids.push(id.clone());
                    out.times.push(*updated_at_ms);
                    out.bodies.push(body.clone());
                }
            }
        }
        out
    }
}

/// One statement's completions (distinct keys) and the batch slot of each.
#[derive(Default)]
struct Completions {
    outcomes: Vec<String>,
    expiries: Vec<i64>,
    keys: Vec<String>,
    owners: Vec<String>,
    slots: Vec<usize>,
    seen: HashSet<String>,
}

impl Completions {
    /// Adds completion `w` (slot `i`) unless its key is already in this statement.
    fn push(&mut self, i: usize, w: &Write) -> bool {
        let Write::Completion {
            key,
            owner,
            outcome,
            expires_at_ms,
        } = w
        else {
            return true;
        };
        if !self.seen.insert(key.clone()) {
            return false;
        }
        self.outcomes.push(outcome.clone());
        self.expiries.push(*expires_at_ms);
        self.keys.push(key.clone());
        self.owners.push(owner.clone());
        self.slots.push(i);
        true
    }
}
