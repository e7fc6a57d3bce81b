//! Sources in the SQLite store (table `toolguard_provenance`, created by the store's migrations).

use rusqlite::params;

use crate::store::SqliteStore;
use toolguard_pipeline::provenance::{ProvenanceStore, Source, TRIM_SQL};
use toolguard_pipeline::store::StoreResult;
use toolguard_pipeline::store::encode::i64_of;
use toolguard_pipeline::tool::BoxFuture;

fn to_sql(e: serde_json::Error) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

impl ProvenanceStore for SqliteStore {
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let session = session.to_owned();
        let source = source.clone();
        Box::pin(self.with_connection(move |c| {
            let body = serde_json::to_string(&source).map_err(to_sql)?;
            let tx = c.savepoint()?;
            tx.execute(
                "INSERT INTO toolguard_provenance (session, id, at_ms, body) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (session, id) DO NOTHING",
                params![session, source.id, i64_of(source.at_ms), body],
            )?;
            tx.execute(TRIM_SQL, params![session])?;
            tx.commit()
        }))
    }

    /// A session's sources, answered once the read's batch committed, without waiting for the
    /// sync: adding or clearing sources waits for it, so everything a caller was told is stored
    /// is on disk already; the read may also see a change whose caller is still waiting for the
    /// sync, as it would a moment later.
    fn sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<Source>>> {
        let session = session.to_owned();
        Box::pin(self.read_committed(move |c| {
            let mut stmt = c.prepare_cached(
                "SELECT body FROM toolguard_provenance WHERE session = ?1 ORDER BY at_ms, id",
            )?;
            let rows = stmt.query_map(params![session], |r| r.get::<_, String>(0))?;
            let mut out = Vec::new();
            for body in rows {
                out.push(serde_json::from_str(&body?).map_err(to_sql)?);
            }
            Ok(out)
        }))
    }

    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>> {
        let session = session.to_owned();
        Box::pin(self.with_connection(move |c| {
            let n = c.execute(
                "DELETE FROM toolguard_provenance WHERE session = ?1",
                params![session],
            )?;
            Ok(n as u64)
        }))
    }
}
