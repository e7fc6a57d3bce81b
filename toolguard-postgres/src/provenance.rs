//! Sources in the PostgreSQL store (table `toolguard_provenance`, created by its migrations).
//! Every statement is prepared once per pooled session (`prepare_cached`): each state-changing
//! call reads its session's sources, and preparing the statement on each read cost a round trip.
//!
//! Reads go through a [`Reader`]: one task takes every read queued (up to [`MAX_BATCH`]) and
//! answers them all with one statement over their distinct sessions, so concurrent calls share
//! a round trip instead of spending a statement each. A read is sent after it was queued, so it
//! sees every source committed before the caller asked.

use std::collections::HashMap;

use deadpool_postgres::Pool;
use tokio::sync::{mpsc, oneshot};

use crate::store::PgStore;
use toolguard_pipeline::provenance::{ProvenanceStore, Source, TRIM_SQL};
use toolguard_pipeline::store::encode::i64_of;
use toolguard_pipeline::store::{StoreError, StoreResult};
use toolguard_pipeline::tool::BoxFuture;

/// Adds a source (a source already added is kept as it is).
const INSERT_SQL: &str = "INSERT INTO toolguard_provenance (session, id, at_ms, body)
    VALUES ($1, $2, $3, $4) ON CONFLICT (session, id) DO NOTHING";
/// The sources of several sessions, each session's oldest first.
const SELECT_MANY_SQL: &str = "SELECT session, body FROM toolguard_provenance
    WHERE session = ANY($1::text[]) ORDER BY session, at_ms, id";
/// Clears a session's sources.
const DELETE_SQL: &str = "DELETE FROM toolguard_provenance WHERE session = $1";

fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::caused_by("postgres", e)
}

impl ProvenanceStore for PgStore {
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(source).map_err(err)?;
            let mut client = self.pool().get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            let insert = tx.prepare_cached(INSERT_SQL).await.map_err(err)?;
            tx.execute(
                &insert,
                &[&session, &source.id, &i64_of(source.at_ms), &body],
            )
            .await
            .map_err(err)?;
            let trim = tx.prepare_cached(TRIM_SQL).await.map_err(err)?;
            tx.execute(&trim, &[&session]).await.map_err(err)?;
            tx.commit().await.map_err(err)
        })
    }

    fn sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<Source>>> {
        Box::pin(self.source_reader().read(session))
    }

    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(async move {
            let client = self.pool().get().await.map_err(err)?;
            let delete = client.prepare_cached(DELETE_SQL).await.map_err(err)?;
            client.execute(&delete, &[&session]).await.map_err(err)
        })
    }
}

/// Most reads answered by one statement.
const MAX_BATCH: usize = 256;
/// Reads waiting at most; callers wait for room beyond it.
const QUEUE: usize = 8_192;

type Reply = oneshot::Sender<StoreResult<Vec<Source>>>;

/// The queue of the task that reads sources for every caller of one store.
#[derive(Debug, Clone)]
pub(crate) struct Reader {
    queue: mpsc::Sender<(String, Reply)>,
}

impl Reader {
    /// Starts the reading task on `pool` on the current Tokio runtime.
    pub(crate) fn start(pool: Pool) -> Self {
        let (queue, rx) = mpsc::channel(QUEUE);
        tokio::spawn(reader(pool, rx));
        Reader { queue }
    }

    /// `session`'s sources, oldest first, read with whatever other reads are queued.
    async fn read(&self, session: &str) -> StoreResult<Vec<Source>> {
        let stopped = || StoreError::new("postgres: the store's source reader stopped".to_owned());
        let (reply, done) = oneshot::channel();
        self.queue
            .send((session.to_owned(), reply))
            .await
            .map_err(|_| stopped())?;
        done.await.map_err(|_| stopped())?
    }
}

async fn reader(pool: Pool, mut rx: mpsc::Receiver<(String, Reply)>) {
    let mut batch = Vec::with_capacity(64);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let mut sessions: Vec<&str> = batch.iter().map(|(s, _)| s.as_str()).collect();
        sessions.sort_unstable();
        sessions.dedup();
        let read = read_many(&pool, &sessions).await;
        for (session, reply) in batch.drain(..) {
            let answer = match &read {
                Ok(by_session) => match by_session.get(&session) {
                    Some(sources) => sources.clone(),
                    None => Ok(Vec::new()),
                },
                Err(e) => Err(e.clone()),
            };
            let _ = reply.send(answer);
        }
    }
}

/// The sources of each of `sessions` that has any, oldest first, with one statement. A source
/// that does not parse fails its own session's read only.
async fn read_many(
    pool: &Pool,
    sessions: &[&str],
) -> StoreResult<HashMap<String, StoreResult<Vec<Source>>>> {
    let client = pool.get().await.map_err(err)?;
    let select = client.prepare_cached(SELECT_MANY_SQL).await.map_err(err)?;
    let rows = client.query(&select, &[&sessions]).await.map_err(err)?;
    let mut by_session: HashMap<String, StoreResult<Vec<Source>>> = HashMap::new();
    for row in &rows {
        let session: &str = row.try_get(0).map_err(err)?;
        let body: &str = row.try_get(1).map_err(err)?;
        let parsed = serde_json::from_str(body).map_err(err);
        let sources = match by_session.get_mut(session) {
            Some(sources) => sources,
            None => by_session
                .entry(session.to_owned())
                .or_insert_with(|| Ok(Vec::new())),
        };
        match (sources, parsed) {
            (Ok(list), Ok(source)) => list.push(source),
            (sources @ Ok(_), Err(e)) => *sources = Err(e),
            (Err(_), _) => {}
        }
    }
    Ok(by_session)
}
