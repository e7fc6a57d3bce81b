//! Sources in Redis: one list per session, `<prefix>:provenance:<session>`, of JSON sources,
//! trimmed to the newest [`MAX_SOURCES_PER_SESSION`].

use crate::store::RedisStore;
use toolguard_pipeline::provenance::{MAX_SOURCES_PER_SESSION, ProvenanceStore, Source};
use toolguard_pipeline::store::{StoreError, StoreResult};
use toolguard_pipeline::tool::BoxFuture;

fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::caused_by("redis", e)
}

fn key(store: &RedisStore, session: &str) -> String {
    format!("{}:provenance:{session}", store.prefix())
}

impl ProvenanceStore for RedisStore {
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(source).map_err(err)?;
            let key = key(self, session);
            let keep = -(MAX_SOURCES_PER_SESSION as i64);
            let mut conn = self.connection();
            redis::pipe()
                .atomic()
                .cmd("RPUSH")
                .arg(&key)
                .arg(body)
                .ignore()
                .cmd("LTRIM")
                .arg(&key)
                .arg(keep)
                .arg(-1)
                .ignore()
                .query_async::<()>(&mut conn)
                .await
                .map_err(err)
        })
    }

    fn sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<Source>>> {
        Box::pin(async move {
            let mut conn = self.connection();
            let bodies: Vec<String> = redis::cmd("LRANGE")
                .arg(key(self, session))
                .arg(0)
                .arg(-1)
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            let mut out: Vec<Source> = Vec::with_capacity(bodies.len());
            for body in bodies {
                let s: Source = serde_json::from_str(&body).map_err(err)?;
                if !out.iter().any(|o| o.id == s.id) {
                    out.push(s);
                }
            }
            Ok(out)
        })
    }

    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(async move {
            let key = key(self, session);
            let mut conn = self.connection();
            let (n, _): (u64, u64) = redis::pipe()
                .atomic()
                .cmd("LLEN")
                .arg(&key)
                .cmd("DEL")
                .arg(&key)
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n)
        })
    }
}
