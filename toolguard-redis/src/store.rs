//! Redis backend (feature `redis`): idempotency records and session ledgers shared by many agent
//! replicas.
//!
//! A reservation is one `SET key value NX PX ttl`; completing, releasing, renewing and taking
//! over run as Lua scripts that first compare the owner token, so a replica whose lease expired
//! cannot overwrite the record of the owner that took over. Expiry is checked against the
//! caller's clock (`now`) as well as left to Redis (`PX`), so a record is never used past its
//! time. Session ledgers are sorted sets (score = time in ms) and admission over all scopes is one
//! Lua script. Every key starts with the configured prefix.
//!
//! A ledger reservation is a string key `prefix:hold:<entry>` (`amount`, end, scopes as JSON)
//! plus the member `amount:entry` in the sorted set `prefix:holds:<scope>` of every scope it
//! holds, scored by its end; admission, reservation and commit are each one Lua script. Release
//! and commit derive the scope keys from the reservation, so all keys under one prefix must be
//! reachable from one script (a standalone Redis or one cluster slot).
//!
//! Record value layout (tab-separated, so that scripts can read it without JSON):
//! `state owner lease_until_ms expires_at_ms digest_json operation_id_json outcome_json`, with
//! state `F` (in flight) or `D` (done). The JSON parts never contain a raw tab.

use std::time::{Duration, SystemTime};

use crate::connections::Connection;
use redis::Script;

use crate::RedisConfig;
use crate::connections::Connections;

use toolguard_pipeline::clock::unix_millis;
use toolguard_pipeline::store::encode::{millis, new_token};
pub(crate) use toolguard_pipeline::store::*;
use toolguard_pipeline::store::{IdempotencyStore, SessionLedger, StoreError, StoreResult};
use toolguard_pipeline::tool::BoxFuture;

pub(crate) fn err(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
    StoreError::caused_by("redis", e)
}

/// Lua helper that splits a record value.
const PARSE: &str = r#"
local function parse(v)
  return string.match(v, '^(%a)\t([^\t]*)\t(%d+)\t(%d+)\t([^\t]*)\t([^\t]*)\t(.*)$')
end
"#;

const RESERVE_EXPIRED: &str = r#"
local v = redis.call('GET', KEYS[1])
if v then
  local st, ow, lease, exp = parse(v)
  -- A value that does not parse is returned as is (the caller fails closed), never replaced.
  if not exp or tonumber(exp) > tonumber(ARGV[1]) then return {0, v} end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return {1, ''}
"#;

/// KEYS: the record; ARGV: owner, outcome, expires_at_ms, px. Only the owner's in-flight record
/// is completed; its digest and operation id (the fifth and sixth fields) are kept as they are,
/// found by their tabs rather than by parsing the whole record.
const COMPLETE: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local head = 'F\t' .. ARGV[1] .. '\t'
if string.sub(v, 1, #head) ~= head then
  -- Sent again after its connection dropped (ARGV[5]), and done with this very outcome (JSON
  -- holds no raw tab): the first send applied it.
  if ARGV[5] == '1' and string.sub(v, 1, 3) == 'D\t\t'
      and string.sub(v, -(#ARGV[2] + 1)) == '\t' .. ARGV[2] then
    return 1
  end
  return 0
end
local from = string.find(v, '\t', #head + 1, true)
from = from and string.find(v, '\t', from + 1, true)
local to = from and string.find(v, '\t', from + 1, true)
to = to and string.find(v, '\t', to + 1, true)
if not to then return 0 end
redis.call('SET', KEYS[1], 'D\t\t0\t' .. ARGV[3] .. string.sub(v, from, to) .. ARGV[2], 'PX', ARGV[4])
return 1
"#;

const RELEASE: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local st, ow = parse(v)
if st ~= 'F' or ow ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"#;

/// Sets an in-flight record with lease end `until`; the record never expires before it (`ms`:
/// the lease length, for Redis's own expiry).
const SET_LEASE: &str = r#"
local function set_lease(ow, lu, ms, exp, dg, op, out)
  if tonumber(lu) > tonumber(exp) then
    redis.call('SET', KEYS[1], 'F\t' .. ow .. '\t' .. lu .. '\t' .. lu .. '\t' .. dg .. '\t' .. op .. '\t' .. out, 'PX', ms)
  else
    redis.call('SET', KEYS[1], 'F\t' .. ow .. '\t' .. lu .. '\t' .. exp .. '\t' .. dg .. '\t' .. op .. '\t' .. out, 'KEEPTTL')
  end
end
"#;

/// ARGV: owner, lease_until_ms, lease_ms.
const RENEW: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local st, ow, lease, exp, dg, op, out = parse(v)
if st ~= 'F' or ow ~= ARGV[1] then return 0 end
set_lease(ow, ARGV[2], ARGV[3], exp, dg, op, out)
return 1
"#;

/// ARGV: now, new owner, lease_until_ms, lease_ms.
const TAKE_OVER: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local st, ow, lease, exp, dg, op, out = parse(v)
local now = tonumber(ARGV[1])
if st ~= 'F' or tonumber(lease) > now or tonumber(exp) <= now then return 0 end
set_lease(ARGV[2], ARGV[3], ARGV[4], exp, dg, op, out)
return 1
"#;

/// ARGV: outcome, expires_at_ms, px, operation id (JSON).
const REPLACE: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local st, ow, lease, exp, dg, op = parse(v)
if not st or op ~= ARGV[4] then return 0 end
redis.call('SET', KEYS[1], 'D\t\t0\t' .. ARGV[2] .. '\t' .. dg .. '\t' .. op .. '\t' .. ARGV[1], 'PX', ARGV[3])
return 1
"#;

/// ARGV: operation id (JSON).
const REMOVE: &str = r#"
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
local st, ow, lease, exp, dg, op = parse(v)
if not st or op ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
"#;

/// Lua helpers summing a scope's booked entries within a window and its live reservations
/// (members `amount:...`); both trim what no longer counts. Entries scored after the caller's
/// `now` count too: another replica read its clock later and booked first, and a limit check
/// that left its amount out would let both through.
const SUMS: &str = r#"
local function sum(members)
  local t = 0
  for _, m in ipairs(members) do
    t = t + (tonumber(string.match(m, '^(%d+):')) or 0)
  end
  return t
end
local function booked(k, from, now)
  redis.call('ZREMRANGEBYSCORE', k, '-inf', from)
  return sum(redis.call('ZRANGEBYSCORE', k, '(' .. from, '+inf'))
end
local function held(hk, now)
  redis.call('ZREMRANGEBYSCORE', hk, '-inf', now)
  return sum(redis.call('ZRANGEBYSCORE', hk, '(' .. now, '+inf'))
end
"#;

/// KEYS: n scope keys, then their n hold keys; ARGV: now, amount, member, then (limit, from,
/// window_ms) per scope. Entries outside the window are trimmed, and a set expires a window after
/// its last admission.
const ADMIT: &str = r#"
local n = #KEYS / 2
local amount = tonumber(ARGV[2])
for i = 1, n do
  local limit = tonumber(ARGV[1 + 3 * i])
  local total = booked(KEYS[i], ARGV[2 + 3 * i], ARGV[1]) + held(KEYS[n + i], ARGV[1])
  if total + amount > limit then return 0 end
end
for i = 1, n do
  local k = KEYS[i]
  redis.call('ZADD', k, ARGV[1], ARGV[3])
  local window = tonumber(ARGV[3 + 3 * i])
  if redis.call('PTTL', k) < window then
    redis.call('PEXPIRE', k, window)
  end
end
return 1
"#;

/// KEYS: the reservation key, n scope keys, their n hold keys; ARGV: now, amount, entry, until,
/// ttl_ms, scopes (JSON), then (limit, from) per scope. The reservation key holds
/// `amount\tuntil\tscopes`; each hold set gets the member `amount:entry` scored `until`.
const RESERVE: &str = r#"
local n = (#KEYS - 1) / 2
local now = tonumber(ARGV[1])
local v = redis.call('GET', KEYS[1])
if v then
  local until_ms = string.match(v, '^%d+\t(%d+)\t')
  if until_ms and tonumber(until_ms) > now then return 1 end
end
local amount = tonumber(ARGV[2])
for i = 1, n do
  local limit = tonumber(ARGV[5 + 2 * i])
  local total = booked(KEYS[1 + i], ARGV[6 + 2 * i], ARGV[1]) + held(KEYS[1 + n + i], ARGV[1])
  if total + amount > limit then return 0 end
end
redis.call('SET', KEYS[1], ARGV[2] .. '\t' .. ARGV[4] .. '\t' .. ARGV[6], 'PX', ARGV[5])
for i = 1, n do
  local hk = KEYS[1 + n + i]
  redis.call('ZADD', hk, ARGV[4], ARGV[2] .. ':' .. ARGV[3])
  if redis.call('PTTL', hk) < tonumber(ARGV[5]) then
    redis.call('PEXPIRE', hk, ARGV[5])
  end
end
return 1
"#;

/// Takes the reservation in KEYS[1] apart: its amount, end and scopes (nil if absent).
const HOLD: &str = r#"
local function take(now)
  local v = redis.call('GET', KEYS[1])
  if not v then return nil end
  local amount, until_ms, scopes = string.match(v, '^(%d+)\t(%d+)\t(.*)$')
  if not amount then return nil end
  return tonumber(amount), tonumber(until_ms), cjson.decode(scopes)
end
"#;

/// KEYS: the reservation key; ARGV: key prefix, entry.
const RELEASE_HOLD: &str = r#"
local amount, until_ms, scopes = take(0)
if not amount then return 0 end
for _, s in ipairs(scopes) do
  redis.call('ZREM', ARGV[1] .. ':holds:' .. s, amount .. ':' .. ARGV[2])
end
redis.call('DEL', KEYS[1])
return 1
"#;

/// KEYS: the reservation key; ARGV: key prefix, entry, now, amount, ledger member. Returns
/// {1, reserved} when booked, {0, 0} when there is no live reservation, {2, reserved} when the
/// amount exceeds it.
const COMMIT: &str = r#"
local reserved, until_ms, scopes = take(0)
if not reserved or until_ms <= tonumber(ARGV[3]) then return {0, 0} end
if tonumber(ARGV[4]) > reserved then return {2, reserved} end
for _, s in ipairs(scopes) do
  redis.call('ZREM', ARGV[1] .. ':holds:' .. s, reserved .. ':' .. ARGV[2])
  local k = ARGV[1] .. ':ledger:' .. s
  redis.call('ZADD', k, ARGV[3], ARGV[5])
  -- The booked entry must outlive any window: admissions set the expiry again.
  redis.call('PERSIST', k)
end
redis.call('DEL', KEYS[1])
return {1, reserved}
"#;

/// KEYS: scope keys; ARGV: at, member.
const RECORD: &str = r#"
for _, k in ipairs(KEYS) do
  redis.call('ZADD', k, ARGV[1], ARGV[2])
end
return 1
"#;

/// KEYS: scope keys; ARGV: entry.
const RETRACT: &str = r#"
for _, k in ipairs(KEYS) do
  for _, m in ipairs(redis.call('ZRANGE', k, 0, -1)) do
    if string.match(m, '^%d+:[^:]*:(.*)$') == ARGV[1] then
      redis.call('ZREM', k, m)
    end
  end
end
return 1
"#;

/// KEYS: rate key; ARGV: now, from, max, member, window_ms.
const HIT: &str = r#"
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
local n = redis.call('ZCOUNT', KEYS[1], '(' .. ARGV[2], '+inf')
if n >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1
"#;

pub(crate) struct Scripts {
    reserve_expired: Script,
    complete: Script,
    release: Script,
    renew: Script,
    take_over: Script,
    replace: Script,
    remove: Script,
    admit: Script,
    reserve: Script,
    release_hold: Script,
    commit: Script,
    record: Script,
    retract: Script,
    hit: Script,
    pub(crate) add_source: Script,
}

impl Scripts {
    fn new() -> Self {
        let with_parse = |body: &str| Script::new(&format!("{PARSE}{body}"));
        Scripts {
            reserve_expired: with_parse(RESERVE_EXPIRED),
            complete: Script::new(COMPLETE),
            release: with_parse(RELEASE),
            renew: Script::new(&format!("{PARSE}{SET_LEASE}{RENEW}")),
            take_over: Script::new(&format!("{PARSE}{SET_LEASE}{TAKE_OVER}")),
            replace: with_parse(REPLACE),
            remove: with_parse(REMOVE),
            admit: Script::new(&format!("{SUMS}{ADMIT}")),
            reserve: Script::new(&format!("{SUMS}{RESERVE}")),
            release_hold: Script::new(&format!("{HOLD}{RELEASE_HOLD}")),
            commit: Script::new(&format!("{HOLD}{COMMIT}")),
            record: Script::new(RECORD),
            retract: Script::new(RETRACT),
            hit: Script::new(HIT),
            add_source: Script::new(crate::provenance::ADD_SOURCE),
        }
    }
}

/// Idempotency records and session ledgers in Redis.
///
/// Use it with [`toolguard_pipeline::DispatcherBuilder::idempotency_store`] and
/// [`toolguard_pipeline::DispatcherBuilder::session_ledger`]; approvals and operation records need a durable
/// store (SQLite or PostgreSQL).
///
/// ```no_run
/// # async fn run() -> Result<(), toolguard_pipeline::store::StoreError> {
/// use std::sync::Arc;
/// use toolguard_redis::RedisStore;
///
/// let redis = Arc::new(RedisStore::connect("redis://127.0.0.1:6379", "myapp:toolguard").await?);
/// let builder = toolguard_pipeline::Dispatcher::builder(())
///     .idempotency_store(redis.clone())
///     .session_ledger(redis);
/// # let _ = builder; Ok(()) }
/// ```
pub struct RedisStore {
    connections: Connections,
    prefix: String,
    pub(crate) scripts: Scripts,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.prefix)
            .field("connections", &self.connections.len())
            .finish_non_exhaustive()
    }
}

struct Parsed {
    done: bool,
    owner: String,
    lease_until_ms: u64,
    expires_at_ms: u64,
    digest: String,
    operation_id: Option<String>,
    outcome: Option<StoredOutcome>,
}

fn encode(
    owner: &str,
    lease_until_ms: u64,
    expires_at_ms: u64,
    digest: &str,
    op: Option<&str>,
) -> StoreResult<String> {
    let digest = serde_json::to_string(digest).map_err(err)?;
    let op = serde_json::to_string(&op).map_err(err)?;
    Ok(format!(
        "F\t{owner}\t{lease_until_ms}\t{expires_at_ms}\t{digest}\t{op}\t"
    ))
}

fn parse(v: &str) -> StoreResult<Parsed> {
    let mut parts = v.splitn(7, '\t');
    let mut next = || {
        parts
            .next()
            .ok_or_else(|| StoreError::new("redis: malformed idempotency record".to_owned()))
    };
    let state = next()?;
    let owner = next()?.to_owned();
    let lease_until_ms = next()?.parse().map_err(err)?;
    let expires_at_ms = next()?.parse().map_err(err)?;
    let digest: String = serde_json::from_str(next()?).map_err(err)?;
    let operation_id: Option<String> = serde_json::from_str(next()?).map_err(err)?;
    let outcome_text = next()?;
    let done = state == "D";
    let outcome = if done {
        Some(serde_json::from_str(outcome_text).map_err(err)?)
    } else {
        None
    };
    Ok(Parsed {
        done,
        owner,
        lease_until_ms,
        expires_at_ms,
        digest,
        operation_id,
        outcome,
    })
}

fn record_of(p: Parsed) -> IdempotencyRecord {
    let state = match p.outcome {
        Some(outcome) if p.done => RecordState::Done { outcome },
        _ => RecordState::InFlight {
            owner: p.owner,
            lease_until_ms: p.lease_until_ms,
        },
    };
    IdempotencyRecord {
        request_digest: p.digest,
        operation_id: p.operation_id,
        state,
        expires_at_ms: p.expires_at_ms,
    }
}

/// A member of a ledger sorted set: `amount:nonce:entry`.
fn member(amount: u64, entry: &str) -> String {
    format!("{amount}:{}:{entry}", new_token())
}

fn member_amount(m: &str) -> u64 {
    m.split(':')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(0)
}

impl RedisStore {
    /// Connects to `url` over [`DEFAULT_CONNECTIONS`](crate::DEFAULT_CONNECTIONS) connections;
    /// every key starts with `prefix` and a colon ([`RedisStore::connect_with`] takes a
    /// [`RedisConfig`]).
    ///
    /// How long a command may take is the dispatcher's store deadline
    /// (`DispatcherBuilder::store_deadline`). The connection's own bound is far above it
    /// ([`DEFAULT_REPLY_TIMEOUT`](crate::DEFAULT_REPLY_TIMEOUT), in place of the client's half
    /// a second), so that a loaded server or a connection shared by thousands of waiting calls
    /// does not answer `unavailable` before the deadline the host chose, while a command whose
    /// reply can no longer come still fails ([`RedisConfig::reply_timeout`]).
    pub async fn connect(url: &str, prefix: impl Into<String>) -> StoreResult<Self> {
        Self::connect_with(&RedisConfig::new(url, prefix)).await
    }

    /// Connects as `config` says: its URL, key prefix, number of connections (all opened now, so
    /// that an unreachable server is an error here and not on the first call) and reply
    /// timeout. Each connection reconnects by itself after the server restarts or the link
    /// drops.
    pub async fn connect_with(config: &RedisConfig) -> StoreResult<Self> {
        Ok(RedisStore {
            connections: Connections::open(config).await?,
            prefix: config.prefix.clone(),
            scripts: Scripts::new(),
        })
    }

    /// A handle on the next connection in turn (shared; cheap to clone).
    pub(crate) fn connection(&self) -> Connection {
        self.connections.next()
    }

    /// The store's connections (shared with the detection store).
    pub(crate) fn connections(&self) -> &Connections {
        &self.connections
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    fn idem_key(&self, key: &ScopedKey) -> String {
        format!("{}:idem:{}", self.prefix, key.storage_key())
    }

    fn scope_key(&self, scope: &str) -> String {
        format!("{}:ledger:{scope}", self.prefix)
    }

    fn holds_key(&self, scope: &str) -> String {
        format!("{}:holds:{scope}", self.prefix)
    }

    fn hold_key(&self, entry: &str) -> String {
        format!("{}:hold:{entry}", self.prefix)
    }

    /// Deletes every key under the prefix (for tests and teardown). Returns how many.
    pub async fn clear(&self) -> StoreResult<u64> {
        let mut conn = self.connection();
        let pattern = format!("{}:*", self.prefix);
        let mut cursor: u64 = 0;
        let mut removed = 0;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            if !keys.is_empty() {
                let n: u64 = redis::cmd("DEL")
                    .arg(&keys)
                    .query_async(&mut conn)
                    .await
                    .map_err(err)?;
                removed += n;
            }
            if next == 0 {
                return Ok(removed);
            }
            cursor = next;
        }
    }

    /// Writes `value` under `key` without any check (for tests that simulate tampering or a
    /// foreign writer).
    pub async fn raw_set(&self, key: &str, value: &str) -> StoreResult<()> {
        let mut conn = self.connection();
        redis::cmd("SET")
            .arg(key)
            .arg(value)
            .query_async::<()>(&mut conn)
            .await
            .map_err(err)
    }
}

/// Most times a command is sent while its connection drops under it.
const TRIES: u32 = 3;

/// Whether `e` is the connection failing (dropped, reset, closed, or the reply not come within
/// the reply timeout), not the server refusing the command.
fn connection_lost(e: &redis::RedisError) -> bool {
    e.is_connection_dropped() || e.is_io_error()
}

/// Runs `command` again while its connection drops under it (the connection reconnects), at
/// most [`TRIES`] times in all; for commands that tell, when sent again (their argument is
/// `true`), that their first send ran.
async fn resent<T, F, Fut>(mut command: F) -> redis::RedisResult<T>
where
    F: FnMut(bool) -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    let mut tried = 1;
    loop {
        match command(tried > 1).await {
            Err(e) if tried < TRIES && connection_lost(&e) => tried += 1,
            done => return done,
        }
    }
}

impl RedisStore {
    /// Sets `value` under `k` unless a record live at `now_ms` holds it: `None` when set, else
    /// the value that holds the key.
    async fn reserve_once(
        &self,
        k: &str,
        value: &str,
        px: u64,
        now_ms: u64,
    ) -> redis::RedisResult<Option<String>> {
        let mut conn = self.connection();
        let set: Option<String> = redis::cmd("SET")
            .arg(k)
            .arg(value)
            .arg("NX")
            .arg("PX")
            .arg(px)
            .query_async(&mut conn)
            .await?;
        if set.is_some() {
            return Ok(None);
        }
        // Taken: the record may still be logically expired for this clock.
        let (won, existing): (i64, String) = self
            .scripts
            .reserve_expired
            .key(k)
            .arg(now_ms)
            .arg(value)
            .arg(px)
            .invoke_async(&mut conn)
            .await?;
        Ok((won != 1).then_some(existing))
    }
}

impl IdempotencyStore for RedisStore {
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        request_digest: &'a str,
        operation_id: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>> {
        Box::pin(async move {
            let k = self.idem_key(key);
            let now_ms = unix_millis(now);
            let owner = new_token();
            // Never before the lease ends: a short TTL must not free a key mid-flight.
            let ttl = ttl.max(lease);
            let px = millis(ttl).max(1);
            let value = encode(
                &owner,
                now_ms.saturating_add(millis(lease)),
                now_ms.saturating_add(millis(ttl)),
                request_digest,
                operation_id,
            )?;
            // Sent again if its connection drops (the first send may have run): it then finds
            // the key held by its own owner token, which no other reservation can carry.
            let existing = resent(|_| self.reserve_once(&k, &value, px, now_ms))
                .await
                .map_err(err)?;
            let Some(existing) = existing else {
                return Ok(Reservation::Reserved { owner });
            };
            let record = record_of(parse(&existing)?);
            if matches!(&record.state, RecordState::InFlight { owner: held, .. } if *held == owner)
            {
                return Ok(Reservation::Reserved { owner });
            }
            Ok(Reservation::Existing(record))
        })
    }

    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let body = serde_json::to_string(&outcome).map_err(err)?;
            let expires = unix_millis(now).saturating_add(millis(ttl));
            let k = self.idem_key(key);
            // Sent again if its connection drops: the script then answers 1 for a key that
            // holds this very outcome, which the first send stored.
            let n: i64 = resent(|again| {
                let mut conn = self.connection();
                let mut complete = self.scripts.complete.key(&k);
                complete
                    .arg(owner)
                    .arg(&body)
                    .arg(expires)
                    .arg(millis(ttl).max(1))
                    .arg(u8::from(again));
                async move { complete.invoke_async(&mut conn).await }
            })
            .await
            .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut conn = self.connection();
            let n: i64 = self
                .scripts
                .release
                .key(self.idem_key(key))
                .arg(owner)
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut conn = self.connection();
            let n: i64 = self
                .scripts
                .renew
                .key(self.idem_key(key))
                .arg(owner)
                .arg(unix_millis(now).saturating_add(millis(lease)))
                .arg(millis(lease).max(1))
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let token = new_token();
            let mut conn = self.connection();
            let n: i64 = self
                .scripts
                .take_over
                .key(self.idem_key(key))
                .arg(now_ms)
                .arg(&token)
                .arg(now_ms.saturating_add(millis(lease)))
                .arg(millis(lease).max(1))
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok((n == 1).then_some(token))
        })
    }

    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let body = serde_json::to_string(&outcome).map_err(err)?;
            let op = serde_json::to_string(&Some(operation_id)).map_err(err)?;
            let mut conn = self.connection();
            let n: i64 = self
                .scripts
                .replace
                .key(self.idem_key(key))
                .arg(body)
                .arg(unix_millis(now).saturating_add(millis(ttl)))
                .arg(millis(ttl).max(1))
                .arg(op)
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let op = serde_json::to_string(&Some(operation_id)).map_err(err)?;
            let mut conn = self.connection();
            let n: i64 = self
                .scripts
                .remove
                .key(self.idem_key(key))
                .arg(op)
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        Box::pin(async move {
            let mut conn = self.connection();
            let v: Option<String> = redis::cmd("GET")
                .arg(self.idem_key(key))
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            let Some(v) = v else { return Ok(None) };
            let p = parse(&v)?;
            if p.expires_at_ms <= unix_millis(now) {
                return Ok(None);
            }
            Ok(Some(record_of(p)))
        })
    }
}

impl SessionLedger for RedisStore {
    fn provenance(
        self: std::sync::Arc<Self>,
    ) -> Option<toolguard_pipeline::provenance::SharedProvenance> {
        Some(self)
    }

    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let mut inv = self.scripts.admit.prepare_invoke();
            inv.arg(now_ms).arg(amount).arg(member(amount, entry));
            for l in limits {
                inv.key(self.scope_key(&l.scope));
                inv.arg(l.limit)
                    .arg(now_ms.saturating_sub(millis(l.window)))
                    .arg(millis(l.window).max(1));
            }
            for l in limits {
                inv.key(self.holds_key(&l.scope));
            }
            let mut conn = self.connection();
            let n: i64 = inv.invoke_async(&mut conn).await.map_err(err)?;
            Ok(n == 1)
        })
    }

    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            if scopes.is_empty() {
                return Ok(());
            }
            let mut inv = self.scripts.record.prepare_invoke();
            inv.arg(unix_millis(now)).arg(member(amount, entry));
            for s in scopes {
                inv.key(self.scope_key(s));
            }
            let mut conn = self.connection();
            let _: i64 = inv.invoke_async(&mut conn).await.map_err(err)?;
            Ok(())
        })
    }

    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(async move {
            if scopes.is_empty() {
                return Ok(());
            }
            let mut inv = self.scripts.retract.prepare_invoke();
            inv.arg(entry);
            for s in scopes {
                inv.key(self.scope_key(s));
            }
            let mut conn = self.connection();
            let _: i64 = inv.invoke_async(&mut conn).await.map_err(err)?;
            Ok(())
        })
    }

    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let from = now_ms.saturating_sub(millis(window));
            let mut conn = self.connection();
            let (members, holds): (Vec<String>, Vec<String>) = redis::pipe()
                .atomic()
                .cmd("ZRANGEBYSCORE")
                .arg(self.scope_key(scope))
                .arg(format!("({from}"))
                .arg("+inf")
                .cmd("ZRANGEBYSCORE")
                .arg(self.holds_key(scope))
                .arg(format!("({now_ms}"))
                .arg("+inf")
                .query_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(members
                .iter()
                .chain(&holds)
                .map(|m| member_amount(m))
                .fold(0u64, u64::saturating_add))
        })
    }

    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let until_ms = unix_millis(until);
            let mut scopes: Vec<&str> = limits.iter().map(|l| l.scope.as_str()).collect();
            scopes.sort_unstable();
            scopes.dedup();
            let mut inv = self.scripts.reserve.prepare_invoke();
            inv.key(self.hold_key(entry));
            inv.arg(now_ms)
                .arg(amount)
                .arg(entry)
                .arg(until_ms)
                .arg(until_ms.saturating_sub(now_ms).max(1))
                .arg(serde_json::to_string(&scopes).map_err(err)?);
            for l in limits {
                inv.key(self.scope_key(&l.scope));
                inv.arg(l.limit)
                    .arg(now_ms.saturating_sub(millis(l.window)));
            }
            for l in limits {
                inv.key(self.holds_key(&l.scope));
            }
            // Sent again if its connection drops: a hold the first send took is live and
            // answers 1 without being taken twice.
            let n: i64 = resent(|_| {
                let mut conn = self.connection();
                let inv = &inv;
                async move { inv.invoke_async(&mut conn).await }
            })
            .await
            .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let mut conn = self.connection();
            let n: i64 = self
                .scripts
                .release_hold
                .key(self.hold_key(entry))
                .arg(&self.prefix)
                .arg(entry)
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n == 1)
        })
    }

    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        Box::pin(async move {
            let mut conn = self.connection();
            let (code, reserved): (i64, u64) = self
                .scripts
                .commit
                .key(self.hold_key(entry))
                .arg(&self.prefix)
                .arg(entry)
                .arg(unix_millis(now))
                .arg(amount)
                .arg(member(amount, entry))
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(match code {
                1 => HoldCommit::Committed,
                2 => HoldCommit::Exceeds { reserved },
                _ => HoldCommit::Missing,
            })
        })
    }

    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let now_ms = unix_millis(now);
            let from = now_ms.saturating_sub(millis(window));
            let mut conn = self.connection();
            let n: i64 = self
                .scripts
                .hit
                .key(format!("{}:rate:{scope}", self.prefix))
                .arg(now_ms)
                .arg(from)
                .arg(max)
                .arg(member(1, ""))
                .arg(millis(window).max(1))
                .invoke_async(&mut conn)
                .await
                .map_err(err)?;
            Ok(n == 1)
        })
    }
}

#[cfg(test)]
mod tests {
    //! A completion sent again after its connection dropped (needs `TOOLGUARD_REDIS_URL`;
    //! skipped without it).

    use super::*;
    use toolguard_pipeline::Status;

    fn key() -> ScopedKey {
        ScopedKey {
            tenant: "acme".into(),
            subject: "alice".into(),
            tool: "transfer".into(),
            key: "k".into(),
        }
    }

    fn outcome(n: u64) -> String {
        let mut outcome = StoredOutcome::new(Status::Ok);
        outcome.output = Some(serde_json::json!({ "n": n }));
        serde_json::to_string(&outcome).unwrap()
    }

    #[tokio::test]
    async fn a_completion_sent_again_is_applied_once_its_outcome_is_stored() {
        let Some(url) = std::env::var("TOOLGUARD_REDIS_URL")
            .ok()
            .filter(|u| !u.is_empty())
        else {
            eprintln!("skipped: TOOLGUARD_REDIS_URL is not set");
            return;
        };
        let prefix = format!("complete_again_{}", std::process::id());
        let store = RedisStore::connect(&url, prefix)
            .await
            .expect("connect redis");
        let hour = Duration::from_secs(3600);
        let now = SystemTime::now();
        let owner =
            match IdempotencyStore::reserve(&store, &key(), "d", None, hour, hour, now).await {
                Ok(Reservation::Reserved { owner }) => owner,
                other => panic!("a fresh key: {other:?}"),
            };
        let send = |body: String, again: bool| {
            let store = &store;
            let owner = owner.clone();
            async move {
                let mut conn = store.connection();
                store
                    .scripts
                    .complete
                    .key(store.idem_key(&key()))
                    .arg(owner)
                    .arg(body)
                    .arg(unix_millis(now) + 3_600_000)
                    .arg(3_600_000)
                    .arg(u8::from(again))
                    .invoke_async::<i64>(&mut conn)
                    .await
                    .unwrap()
            }
        };
        let first = send(outcome(1), false).await;
        let twice = send(outcome(1), false).await;
        let again = send(outcome(1), true).await;
        let other = send(outcome(2), true).await;
        let stored = IdempotencyStore::get(&store, &key(), now).await;
        let _ = store.clear().await;
        assert_eq!(first, 1, "completed");
        assert_eq!(twice, 0, "a done record is not completed twice");
        assert_eq!(again, 1, "sent again, it finds its own outcome stored");
        assert_eq!(other, 0, "another outcome was not stored");
        let stored = stored.unwrap().expect("a live record");
        assert!(
            matches!(&stored.state, RecordState::Done { outcome } if serde_json::to_string(outcome).unwrap() == super::tests::outcome(1)),
            "{stored:?}"
        );
    }
}
