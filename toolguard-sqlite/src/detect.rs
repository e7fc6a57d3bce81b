//! Detection state in the SQLite file of a [`SqliteStore`] (feature `sqlite`): three tables,
//! created on first use; each operation runs in the store's `BEGIN IMMEDIATE` batch, so the
//! read-modify-write of a scope is atomic across processes sharing the file.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rusqlite::{OptionalExtension, params};

use crate::store::SqliteStore;
use toolguard_pipeline::clock::unix_millis;
use toolguard_pipeline::detect::store::SessionResponse;
use toolguard_pipeline::detect::store::{DetectionStore, Mark, Marks, live, millis};
use toolguard_pipeline::store::StoreResult;
use toolguard_pipeline::tool::BoxFuture;

const TABLES: &str = "
CREATE TABLE IF NOT EXISTS toolguard_detect_marks (
    scope TEXT PRIMARY KEY, marks TEXT NOT NULL, until_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS toolguard_detect_claims (
    key TEXT PRIMARY KEY, until_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS toolguard_detect_responses (
    session TEXT PRIMARY KEY, body TEXT NOT NULL);";

fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn json_err(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

/// Detection state in a SQLite file shared with the dispatcher's other stores.
#[derive(Debug, Clone)]
pub struct SqliteDetectionStore {
    store: Arc<SqliteStore>,
}

impl SqliteDetectionStore {
    /// Uses `store`'s file, creating the detection tables if missing.
    pub async fn new(store: Arc<SqliteStore>) -> StoreResult<Self> {
        store.with_connection(|c| c.execute_batch(TABLES)).await?;
        Ok(SqliteDetectionStore { store })
    }

    /// Deletes marks and claims whose window ended before `now`; how many rows.
    pub async fn purge(&self, now: SystemTime) -> StoreResult<usize> {
        let now = i64_of(unix_millis(now));
        self.store
            .with_connection(move |c| {
                let a = c.execute(
                    "DELETE FROM toolguard_detect_marks WHERE until_ms <= ?1",
                    [now],
                )?;
                let b = c.execute(
                    "DELETE FROM toolguard_detect_claims WHERE until_ms <= ?1",
                    [now],
                )?;
                Ok(a + b)
            })
            .await
    }
}

impl DetectionStore for SqliteDetectionStore {
    fn observe<'a>(
        &'a self,
        scope: &'a str,
        mark: Mark,
        window: Duration,
        keep: usize,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Marks>> {
        let scope = scope.to_owned();
        let until = i64_of(unix_millis(now).saturating_add(millis(window)));
        Box::pin(self.store.with_connection(move |c| {
            let raw: Option<String> = c
                .query_row(
                    "SELECT marks FROM toolguard_detect_marks WHERE scope = ?1",
                    [&scope],
                    |r| r.get(0),
                )
                .optional()?;
            let mut marks: Marks = match raw {
                Some(s) => serde_json::from_str(&s).map_err(json_err)?,
                None => Marks::default(),
            };
            marks.admit(mark, window, keep, now);
            let body = serde_json::to_string(&marks).map_err(json_err)?;
            c.execute(
                "INSERT INTO toolguard_detect_marks (scope, marks, until_ms) VALUES (?1, ?2, ?3)
                 ON CONFLICT (scope) DO UPDATE SET marks = excluded.marks,
                 until_ms = MAX(until_ms, excluded.until_ms)",
                params![scope, body, until],
            )?;
            Ok(marks)
        }))
    }

    fn claim<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let key = key.to_owned();
        let now_ms = i64_of(unix_millis(now));
        let until = i64_of(unix_millis(now).saturating_add(millis(ttl).max(1)));
        Box::pin(self.store.with_connection(move |c| {
            let n = c.execute(
                "INSERT INTO toolguard_detect_claims (key, until_ms) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET until_ms = excluded.until_ms
                 WHERE toolguard_detect_claims.until_ms <= ?3",
                params![key, until, now_ms],
            )?;
            Ok(n == 1)
        }))
    }

    fn respond<'a>(&'a self, response: &'a SessionResponse) -> BoxFuture<'a, StoreResult<()>> {
        let key = response.key();
        let body = serde_json::to_string(response);
        Box::pin(async move {
            let body =
                body.map_err(|e| toolguard_pipeline::store::StoreError::caused_by("sqlite", e))?;
            self.store
                .with_connection(move |c| {
                    c.execute(
                        "INSERT INTO toolguard_detect_responses (session, body) VALUES (?1, ?2)
                         ON CONFLICT (session) DO UPDATE SET body = excluded.body",
                        params![key, body],
                    )
                    .map(|_| ())
                })
                .await
        })
    }

    fn response<'a>(
        &'a self,
        session: &'a str,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<SessionResponse>>> {
        let session = session.to_owned();
        let now_ms = unix_millis(now);
        Box::pin(self.store.with_connection(move |c| {
            let raw: Option<String> = c
                .query_row(
                    "SELECT body FROM toolguard_detect_responses WHERE session = ?1",
                    [&session],
                    |r| r.get(0),
                )
                .optional()?;
            let found: Option<SessionResponse> = match raw {
                Some(s) => Some(serde_json::from_str(&s).map_err(json_err)?),
                None => None,
            };
            Ok(found.filter(|r| live(r, now_ms)))
        }))
    }

    fn lift<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        let session = session.to_owned();
        Box::pin(self.store.with_connection(move |c| {
            let n = c.execute(
                "DELETE FROM toolguard_detect_responses WHERE session = ?1",
                [&session],
            )?;
            Ok(n > 0)
        }))
    }
}
