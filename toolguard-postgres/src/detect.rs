//! Detection state in the schema of a [`PgStore`] (feature `postgres`): three tables, created
//! on first use; a scope's marks are updated under its row lock (`SELECT ... FOR UPDATE`), so
//! replicas never lose a mark.

use std::time::{Duration, SystemTime};

use deadpool_postgres::Pool;

use crate::store::PgStore;
use crate::store::err;
use toolguard_pipeline::clock::unix_millis;
use toolguard_pipeline::detect::store::SessionResponse;
use toolguard_pipeline::detect::store::{DetectionStore, Mark, Marks, live, millis};
use toolguard_pipeline::store::StoreResult;
use toolguard_pipeline::tool::BoxFuture;

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS toolguard_detect_marks (
    scope TEXT PRIMARY KEY, marks TEXT NOT NULL, until_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS toolguard_detect_claims (
    key TEXT PRIMARY KEY, until_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS toolguard_detect_responses (
    session TEXT PRIMARY KEY, body TEXT NOT NULL);";

/// Serializes concurrent first-time table creation.
const TABLES_LOCK: i64 = 0x746f_6f6c_6465_7463;

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Detection state in PostgreSQL, next to the dispatcher's other stores.
#[derive(Clone)]
pub struct PgDetectionStore {
    pool: Pool,
}

impl std::fmt::Debug for PgDetectionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgDetectionStore").finish_non_exhaustive()
    }
}

impl PgDetectionStore {
    /// Uses `store`'s pool and schema, creating the detection tables if missing.
    pub async fn new(store: &PgStore) -> StoreResult<Self> {
        let pool = store.pool().clone();
        let mut client = pool.get().await.map_err(err)?;
        let tx = client.transaction().await.map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&TABLES_LOCK])
            .await
            .map_err(err)?;
        tx.batch_execute(TABLES).await.map_err(err)?;
        tx.commit().await.map_err(err)?;
        drop(client);
        Ok(PgDetectionStore { pool })
    }

    /// Deletes marks and claims whose window ended before `now` (idle scopes); how many rows.
    pub async fn purge(&self, now: SystemTime) -> StoreResult<u64> {
        let now = i64_of(unix_millis(now));
        let client = self.pool.get().await.map_err(err)?;
        let mut removed = 0;
        for sql in [
            "DELETE FROM toolguard_detect_marks WHERE until_ms <= $1",
            "DELETE FROM toolguard_detect_claims WHERE until_ms <= $1",
        ] {
            removed += client.execute(sql, &[&now]).await.map_err(err)?;
        }
        Ok(removed)
    }
}

impl DetectionStore for PgDetectionStore {
    fn observe<'a>(
        &'a self,
        scope: &'a str,
        mark: Mark,
        window: Duration,
        keep: usize,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Marks>> {
        Box::pin(async move {
            let until = i64_of(unix_millis(now).saturating_add(millis(window)));
            let mut client = self.pool.get().await.map_err(err)?;
            let tx = client.transaction().await.map_err(err)?;
            tx.execute(
                "INSERT INTO toolguard_detect_marks (scope, marks, until_ms) VALUES ($1, '[]', $2)
                 ON CONFLICT (scope) DO NOTHING",
                &[&scope, &until],
            )
            .await
            .map_err(err)?;
            let row = tx
                .query_one(
                    "SELECT marks FROM toolguard_detect_marks WHERE scope = $1 FOR UPDATE",
                    &[&scope],
                )
                .await
                .map_err(err)?;
            let raw: String = row.try_get(0).map_err(err)?;
            let mut marks: Marks = serde_json::from_str(&raw).map_err(err)?;
            marks.admit(mark, window, keep, now);
            let body = serde_json::to_string(&marks).map_err(err)?;
            tx.execute(
                "UPDATE toolguard_detect_marks SET marks = $2, until_ms = GREATEST(until_ms, $3)
                 WHERE scope = $1",
                &[&scope, &body, &until],
            )
            .await
            .map_err(err)?;
            tx.commit().await.map_err(err)?;
            Ok(marks)
        })
    }

    fn claim<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let now_ms = i64_of(unix_millis(now));
            let until = i64_of(unix_millis(now).saturating_add(millis(ttl).max(1)));
            let client = self.pool.get().await.map_err(err)?;
            let rows = client
                .query(
                    "INSERT INTO toolguard_detect_claims (key, until_ms) VALUES ($1, $2)
                     ON CONFLICT (key) DO UPDATE SET until_ms = EXCLUDED.until_ms
                     WHERE toolguard_detect_claims.until_ms <= $3 RETURNING key",
                    &[&key, &until, &now_ms],
                )
                .await
                .map_err(err)?;
            Ok(!rows.is_empty())
        })
    }

    fn respond<'a>(&'a self, response: &'a SessionResponse) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(response).map_err(err)?;
            let client = self.pool.get().await.map_err(err)?;
            client
                .execute(
                    "INSERT INTO toolguard_detect_responses (session, body) VALUES ($1, $2)
                     ON CONFLICT (session) DO UPDATE SET body = EXCLUDED.body",
                    &[&response.key(), &body],
                )
                .await
                .map_err(err)?;
            Ok(())
        })
    }

    fn response<'a>(
        &'a self,
        session: &'a str,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<SessionResponse>>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let row = client
                .query_opt(
                    "SELECT body FROM toolguard_detect_responses WHERE session = $1",
                    &[&session],
                )
                .await
                .map_err(err)?;
            let Some(row) = row else { return Ok(None) };
            let raw: String = row.try_get(0).map_err(err)?;
            let found: SessionResponse = serde_json::from_str(&raw).map_err(err)?;
            Ok(live(&found, unix_millis(now)).then_some(found))
        })
    }

    fn lift<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let client = self.pool.get().await.map_err(err)?;
            let n = client
                .execute(
                    "DELETE FROM toolguard_detect_responses WHERE session = $1",
                    &[&session],
                )
                .await
                .map_err(err)?;
            Ok(n > 0)
        })
    }
}
