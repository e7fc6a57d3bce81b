//! Sources in the PostgreSQL store (table `toolguard_provenance`, created by its migrations).
//! Every statement is prepared once per pooled session (`prepare_cached`): each state-changing
//! call reads its session's sources, and preparing the statement on each read cost a round trip.

use crate::store::PgStore;
use toolguard_pipeline::provenance::{ProvenanceStore, Source, TRIM_SQL};
use toolguard_pipeline::store::encode::i64_of;
use toolguard_pipeline::store::{StoreError, StoreResult};
use toolguard_pipeline::tool::BoxFuture;

/// Adds a source (a source already added is kept as it is).
const INSERT_SQL: &str = "INSERT INTO toolguard_provenance (session, id, at_ms, body)
    VALUES ($1, $2, $3, $4) ON CONFLICT (session, id) DO NOTHING";
/// A session's sources, oldest first.
const SELECT_SQL: &str =
    "SELECT body FROM toolguard_provenance WHERE session = $1 ORDER BY at_ms, id";
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
        Box::pin(async move {
            let client = self.pool().get().await.map_err(err)?;
            let select = client.prepare_cached(SELECT_SQL).await.map_err(err)?;
            let rows = client.query(&select, &[&session]).await.map_err(err)?;
            rows.iter()
                .map(|r| {
                    let body: String = r.try_get(0).map_err(err)?;
                    serde_json::from_str(&body).map_err(err)
                })
                .collect()
        })
    }

    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(async move {
            let client = self.pool().get().await.map_err(err)?;
            let delete = client.prepare_cached(DELETE_SQL).await.map_err(err)?;
            client.execute(&delete, &[&session]).await.map_err(err)
        })
    }
}
