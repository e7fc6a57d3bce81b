//! Sources in Redis: one list per session, `<prefix>:provenance:<session>`, of JSON sources,
//! trimmed to the newest [`MAX_SOURCES_PER_SESSION`]. A source whose id the list holds is not
//! added again, so that repeating one never pushes others out.

use crate::store::RedisStore;
use toolguard_pipeline::provenance::{MAX_SOURCES_PER_SESSION, ProvenanceStore, Source};
use toolguard_pipeline::store::{StoreError, StoreResult};
use toolguard_pipeline::tool::BoxFuture;

fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::caused_by("redis", e)
}

/// KEYS: the session's list; ARGV: the start of the source's JSON up to its id (`{"id":"…"`;
/// serialized first, and unique: no other entry can start with it), its JSON, and the index
/// from which LTRIM keeps the newest. Returns whether it was added.
pub(crate) const ADD_SOURCE: &str = r#"
local prefix = ARGV[1]
for _, v in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if string.sub(v, 1, #prefix) == prefix then return 0 end
end
redis.call('RPUSH', KEYS[1], ARGV[2])
redis.call('LTRIM', KEYS[1], ARGV[3], -1)
return 1
"#;

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
            let prefix = format!(
                "{{\"id\":{}",
                serde_json::to_string(&source.id).map_err(err)?
            );
            if !body.starts_with(&prefix) {
                return Err(StoreError::new(
                    "redis: a source does not serialize its id first".to_owned(),
                ));
            }
            let keep = -(MAX_SOURCES_PER_SESSION as i64);
            let mut conn = self.connection();
            let _added: i64 = self
                .scripts
                .add_source
                .key(key(self, session))
                .arg(prefix)
                .arg(body)
                .arg(keep)
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
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n)
        })
    }
}
