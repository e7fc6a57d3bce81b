//! Detection state in Redis under the prefix of a [`RedisStore`] (feature `redis`): a scope's
//! marks are one JSON string updated by a Lua script (atomic), expiring with the window; claims
//! are `SET NX PX`; responses are JSON strings (a block expires with its period).

use std::time::{Duration, SystemTime};

use redis::Script;

use crate::connections::Connections;
use crate::store::RedisStore;
use crate::store::err;
use toolguard_pipeline::clock::unix_millis;
use toolguard_pipeline::detect::store::SessionResponse;
use toolguard_pipeline::detect::store::{DetectionStore, Mark, Marks, live, millis};
use toolguard_pipeline::store::StoreResult;
use toolguard_pipeline::tool::BoxFuture;

/// [`Marks::admit`] in Lua. KEYS: the scope; ARGV: the mark (JSON), window start (ms), how
/// many to keep, the key's time to live (ms).
const OBSERVE: &str = r"
local raw = redis.call('GET', KEYS[1])
local marks = {}
if raw then marks = cjson.decode(raw) end
local mark = cjson.decode(ARGV[1])
local from = tonumber(ARGV[2])
local out = {}
for _, m in ipairs(marks) do
  if tonumber(m.at_ms) > from and (mark.key == nil or m.key ~= mark.key) then
    table.insert(out, m)
  end
end
table.insert(out, mark)
local keep = tonumber(ARGV[3])
while #out > keep do table.remove(out, 1) end
local body = cjson.encode(out)
redis.call('SET', KEYS[1], body, 'PX', ARGV[4])
return body
";

/// Detection state in Redis, next to the idempotency records and ledgers.
#[derive(Clone)]
pub struct RedisDetectionStore {
    connections: Connections,
    prefix: String,
    observe: Script,
}

impl std::fmt::Debug for RedisDetectionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisDetectionStore")
            .field("prefix", &self.prefix)
            .field("connections", &self.connections.len())
            .finish_non_exhaustive()
    }
}

impl RedisDetectionStore {
    /// Uses `store`'s connections; keys start with its prefix and `:detect:`.
    pub fn new(store: &RedisStore) -> Self {
        RedisDetectionStore {
            connections: store.connections().clone(),
            prefix: format!("{}:detect", store.prefix()),
            observe: Script::new(OBSERVE),
        }
    }

    fn key(&self, kind: &str, name: &str) -> String {
        format!("{}:{kind}:{name}", self.prefix)
    }
}

impl DetectionStore for RedisDetectionStore {
    fn observe<'a>(
        &'a self,
        scope: &'a str,
        mark: Mark,
        window: Duration,
        keep: usize,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Marks>> {
        Box::pin(async move {
            let from = unix_millis(now).saturating_sub(millis(window));
            let mark = serde_json::to_string(&mark).map_err(err)?;
            let mut conn = self.connections.next();
            let body: String = self
                .observe
                .key(self.key("marks", scope))
                .arg(mark)
                .arg(from)
                .arg(keep.max(1))
                .arg(millis(window).max(1))
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            serde_json::from_str(&body).map_err(err)
        })
    }

    fn claim<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
        _now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut conn = self.connections.next();
            let set: Option<String> = redis::cmd("SET")
                .arg(self.key("claim", key))
                .arg(1)
                .arg("NX")
                .arg("PX")
                .arg(millis(ttl).max(1))
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(set.is_some())
        })
    }

    fn respond<'a>(&'a self, response: &'a SessionResponse) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            let body = serde_json::to_string(response).map_err(err)?;
            let mut conn = self.connections.next();
            let mut cmd = redis::cmd("SET");
            cmd.arg(self.key("response", &response.key())).arg(body);
            if let Some(until) = response.until_ms {
                cmd.arg("PX")
                    .arg(until.saturating_sub(response.since_ms).max(1));
            }
            let _: () = cmd.query_async(&mut conn).await.map_err(err)?;
            Ok(())
        })
    }

    fn response<'a>(
        &'a self,
        session: &'a str,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<SessionResponse>>> {
        Box::pin(async move {
            let mut conn = self.connections.next();
            let raw: Option<String> = redis::cmd("GET")
                .arg(self.key("response", session))
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            let Some(raw) = raw else { return Ok(None) };
            let found: SessionResponse = serde_json::from_str(&raw).map_err(err)?;
            Ok(live(&found, unix_millis(now)).then_some(found))
        })
    }

    fn lift<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut conn = self.connections.next();
            let n: i64 = redis::cmd("DEL")
                .arg(self.key("response", session))
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n > 0)
        })
    }
}
