//! Sources in Redis: one list per session, `<prefix>:provenance:<session>`, of JSON sources,
//! trimmed to the newest [`MAX_SOURCES_PER_SESSION`], and the set of their ids,
//! `<prefix>:provenance-ids:<session>`. A source whose id the set holds is not added again, so
//! that repeating one never pushes others out.

use crate::store::RedisStore;
use toolguard_pipeline::provenance::{MAX_SOURCES_PER_SESSION, ProvenanceStore, Source};
use toolguard_pipeline::store::{StoreError, StoreResult};
use toolguard_pipeline::tool::BoxFuture;

fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::caused_by("redis", e)
}

/// KEYS: the session's list and its set of ids; ARGV: the source's id, its JSON (which starts
/// with its id: `{"id":"…"`), and how many the list keeps. The oldest beyond that are dropped
/// from both. Returns whether it was added.
pub(crate) const ADD_SOURCE: &str = r#"
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[2])
local keep = tonumber(ARGV[3])
while redis.call('LLEN', KEYS[1]) > keep do
  local old = redis.call('LPOP', KEYS[1])
  local id = string.match(old, '^{"id":"([^"]*)"')
  if id then redis.call('SREM', KEYS[2], id) end
end
return 1
"#;

fn key(store: &RedisStore, session: &str) -> String {
    format!("{}:provenance:{session}", store.prefix())
}

fn ids_key(store: &RedisStore, session: &str) -> String {
    format!("{}:provenance-ids:{session}", store.prefix())
}

impl ProvenanceStore for RedisStore {
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(source).map_err(err)?;
            let start = format!(
                "{{\"id\":{}",
                serde_json::to_string(&source.id).map_err(err)?
            );
            if !body.starts_with(&start) {
                return Err(StoreError::new(
                    "redis: a source does not serialize its id first".to_owned(),
                ));
            }
            let mut conn = self.connection();
            let _added: i64 = self
                .scripts
                .add_source
                .key(key(self, session))
                .key(ids_key(self, session))
                .arg(&source.id)
                .arg(body)
                .arg(MAX_SOURCES_PER_SESSION)
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(())
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
                .arg(ids_key(self, session))
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n)
        })
    }
}
