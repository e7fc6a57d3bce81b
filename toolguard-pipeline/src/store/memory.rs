use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use hashbrown::HashTable;

use super::types::*;
use super::{
    ApprovalStore, IdempotencyStore, OperationStore, SessionLedger, StoreError, StoreResult,
};
use crate::clock::unix_millis;
use crate::store::encode::{millis, new_token};
use crate::tool::BoxFuture;

const SHARDS: usize = 16;

/// Fewest idempotency records a shard holds before a new key makes it drop its expired ones.
const SWEEP_FLOOR: usize = 1_024;

/// In-memory implementation of every store; for tests, demos and single-process use. Nothing
/// survives a restart.
///
/// Idempotency records are sharded by key scope, each shard behind its own lock, so unrelated
/// keys do not contend. A key is hashed once per operation (keyed SipHash, as `HashMap`'s, since
/// callers choose the keys): the same hash picks the shard and the slot. Idempotency and
/// operation records are boxed, so a table that grows moves a pointer and a hash per record, not
/// the record.
///
/// Expired idempotency records do not pile up: a shard that has doubled since it last looked
/// drops every record whose time to live has passed (what a lookup of that key would drop) before
/// it takes a new key, so a stream of calls with fresh keys holds at most about twice the keys
/// still live, and the sweep costs a constant per key on average. [`MemoryStore::purge`] also
/// removes expired reservations of the session ledger and its entries older than a given age, as
/// the SQL stores' `purge` does.
#[derive(Debug)]
pub struct MemoryStore {
    idempotency: Vec<Mutex<Shard>>,
    approvals: Mutex<HashMap<String, ApprovalRequest>>,
    ledger: Mutex<LedgerState>,
    operations: Mutex<HashTable<Slot<OperationRecord>>>,
    sources: Mutex<HashMap<String, Vec<crate::provenance::Source>>>,
    hashing: std::hash::RandomState,
}

/// One lock's share of the idempotency records, and the number of records at which it next drops
/// its expired ones.
#[derive(Debug)]
struct Shard {
    table: HashTable<Slot<Keyed>>,
    sweep_at: usize,
}

impl Shard {
    fn new() -> Self {
        Shard {
            table: HashTable::new(),
            sweep_at: SWEEP_FLOOR,
        }
    }

    /// Drops the records expired at `now_ms`; how many.
    fn drop_expired(&mut self, now_ms: u64) -> usize {
        let before = self.table.len();
        self.table.retain(|s| s.value.record.expires_at_ms > now_ms);
        self.sweep_at = SWEEP_FLOOR.max(self.table.len().saturating_mul(2));
        before - self.table.len()
    }

    /// Before a new key is filed: drops the expired records once the shard has doubled since
    /// the last time.
    fn make_room(&mut self, now_ms: u64) {
        if self.table.len() >= self.sweep_at {
            self.drop_expired(now_ms);
        }
    }
}

/// A table slot: a record and the hash it was filed under (a growing table moves the pair and
/// does not hash again).
#[derive(Debug)]
struct Slot<T> {
    hash: u64,
    value: Box<T>,
}

/// An idempotency record with its key, kept as the key's shared parts (no copy of their text).
/// Two scoped keys are the same key exactly when their storage keys
/// ([`ScopedKey::storage_key`], length-prefixed parts) are equal, that is when their parts are.
#[derive(Debug)]
struct Keyed {
    key: ScopedKey,
    record: IdempotencyRecord,
}

/// Ledger entries per scope and live reservations, behind one lock so that admissions,
/// reservations and commits are atomic together.
#[derive(Debug, Default)]
struct LedgerState {
    scopes: HashMap<String, VecDeque<LedgerEntry>>,
    holds: HashMap<String, Hold>,
}

/// A reservation: `amount` held in `scopes` while `now < until_ms`.
#[derive(Debug, Clone)]
struct Hold {
    amount: u64,
    scopes: Vec<String>,
    until_ms: u64,
}

impl LedgerState {
    /// Total of `scope` within `window` plus its live reservations.
    fn counted(&mut self, scope: &str, window: Duration, now_ms: u64) -> u64 {
        let held: u64 = self
            .holds
            .values()
            .filter(|h| h.until_ms > now_ms && h.scopes.iter().any(|s| s == scope))
            .map(|h| h.amount)
            .fold(0, u64::saturating_add);
        let booked = match self.scopes.get_mut(scope) {
            Some(entries) => MemoryStore::window_total(entries, window, now_ms),
            None => 0,
        };
        booked.saturating_add(held)
    }

    fn fits(&mut self, amount: u64, limits: &[ScopeLimit], now_ms: u64) -> bool {
        limits.iter().all(|l| {
            self.counted(&l.scope, l.window, now_ms)
                .saturating_add(amount)
                <= l.limit
        })
    }

    fn book(&mut self, entry: &str, amount: u64, scopes: &[String], at_ms: u64) {
        for s in scopes {
            self.scopes
                .entry(s.clone())
                .or_default()
                .push_back(LedgerEntry {
                    id: entry.to_owned(),
                    amount,
                    at_ms,
                });
        }
    }
}

#[derive(Debug, Clone)]
struct LedgerEntry {
    id: String,
    amount: u64,
    at_ms: u64,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore {
            idempotency: (0..SHARDS).map(|_| Mutex::new(Shard::new())).collect(),
            approvals: Mutex::new(HashMap::new()),
            ledger: Mutex::new(LedgerState::default()),
            operations: Mutex::new(HashTable::new()),
            sources: Mutex::new(HashMap::new()),
            hashing: std::hash::RandomState::new(),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn ready<'a, T: Send + 'a>(v: T) -> BoxFuture<'a, T> {
    Box::pin(std::future::ready(v))
}

impl MemoryStore {
    /// Runs `f` on the provenance sources of every session (see [`crate::provenance`]).
    pub(crate) fn with_sources<R>(
        &self,
        f: impl FnOnce(&mut HashMap<String, Vec<crate::provenance::Source>>) -> R,
    ) -> R {
        f(&mut lock(&self.sources))
    }

    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes what has expired at `now`: idempotency records whose time to live has passed,
    /// session-ledger reservations that ended, and ledger entries (amounts and rate hits) booked
    /// `keep` or longer before `now`. Returns how many were removed.
    ///
    /// Expired idempotency records are also dropped on their own as the store takes new keys
    /// (see the type's documentation); the ledger keeps its entries until this is called, so
    /// `keep` must cover the longest window of the limits that read it:
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use toolguard_pipeline::store::MemoryStore;
    ///
    /// let store = MemoryStore::new();
    /// let day = Duration::from_secs(24 * 60 * 60);
    /// assert_eq!(store.purge(SystemTime::now(), day), 0);
    /// ```
    pub fn purge(&self, now: SystemTime, keep: Duration) -> usize {
        let now_ms = unix_millis(now);
        let mut removed = 0;
        for shard in &self.idempotency {
            removed += lock(shard).drop_expired(now_ms);
        }
        let before = now_ms.saturating_sub(millis(keep));
        let mut ledger = lock(&self.ledger);
        let holds = ledger.holds.len();
        ledger.holds.retain(|_, h| h.until_ms > now_ms);
        removed += holds - ledger.holds.len();
        ledger.scopes.retain(|_, entries| {
            let booked = entries.len();
            entries.retain(|e| e.at_ms > before);
            removed += booked - entries.len();
            !entries.is_empty()
        });
        removed
    }

    /// Gives mutable access to the stored approval requests, as an attacker with write access to
    /// the storage would have (tests of the approval seal).
    pub fn with_approvals<R>(
        &self,
        f: impl FnOnce(&mut HashMap<String, ApprovalRequest>) -> R,
    ) -> R {
        f(&mut lock(&self.approvals))
    }

    /// Stores the outcome under `key` if `owner` holds it; whether it did.
    fn completed(
        &self,
        key: &ScopedKey,
        owner: &str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> bool {
        let now_ms = unix_millis(now);
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        match Self::find(map, hash, key) {
            Some(rec) if matches!(&rec.state, RecordState::InFlight { owner: o, .. } if o == owner) =>
            {
                rec.state = RecordState::Done { outcome };
                rec.expires_at_ms = now_ms.saturating_add(millis(ttl));
                true
            }
            _ => false,
        }
    }

    /// Inserts or replaces operation record `record`.
    fn keep(&self, record: OperationRecord) {
        let hash = self.hashing.hash_one(record.id.as_str());
        let mut table = lock(&self.operations);
        // The record it replaces is dropped outside the lock.
        let replaced = match table.find_mut(hash, |s| s.value.id == record.id) {
            Some(slot) => Some(std::mem::replace(&mut *slot.value, record)),
            None => {
                let value = Box::new(record);
                table.insert_unique(hash, Slot { hash, value }, |s| s.hash);
                None
            }
        };
        drop(table);
        drop(replaced);
    }

    /// The hash of `key`: its parts, each after its length, as its storage key spells them.
    fn key_hash(&self, key: &ScopedKey) -> u64 {
        let mut h = self.hashing.build_hasher();
        for part in [&key.tenant, &key.subject, &key.tool, &key.key] {
            h.write_usize(part.len());
            h.write(part.as_bytes());
        }
        h.finish()
    }

    /// The shard of `key` (locked) and the key's hash. The shard comes from bits of the hash
    /// that a table's slot index and its control byte do not use.
    fn shard(&self, key: &ScopedKey) -> (MutexGuard<'_, Shard>, u64) {
        let hash = self.key_hash(key);
        let shard = lock(&self.idempotency[((hash >> 40) as usize) % SHARDS]);
        (shard, hash)
    }

    /// The live record of `key`; an expired one is removed (and `None` answered).
    fn live<'m>(
        map: &'m mut HashTable<Slot<Keyed>>,
        hash: u64,
        key: &ScopedKey,
        now_ms: u64,
    ) -> Option<&'m mut IdempotencyRecord> {
        match map.find_entry(hash, |s| s.value.key == *key) {
            Ok(slot) if slot.get().value.record.expires_at_ms <= now_ms => {
                slot.remove();
                None
            }
            Ok(slot) => Some(&mut slot.into_mut().value.record),
            Err(_) => None,
        }
    }

    /// The record of `key`, live or not.
    fn find<'m>(
        map: &'m mut HashTable<Slot<Keyed>>,
        hash: u64,
        key: &ScopedKey,
    ) -> Option<&'m mut IdempotencyRecord> {
        map.find_mut(hash, |s| s.value.key == *key)
            .map(|s| &mut s.value.record)
    }

    /// Removes the record of `key` if `owned` says so of it; answers whether it did.
    fn remove_if(
        map: &mut HashTable<Slot<Keyed>>,
        hash: u64,
        key: &ScopedKey,
        owned: impl FnOnce(&IdempotencyRecord) -> bool,
    ) -> bool {
        match map.find_entry(hash, |s| s.value.key == *key) {
            Ok(slot) if owned(&slot.get().value.record) => {
                slot.remove();
                true
            }
            _ => false,
        }
    }

    fn window_total(entries: &VecDeque<LedgerEntry>, window: Duration, now_ms: u64) -> u64 {
        let from = now_ms.saturating_sub(millis(window));
        entries
            .iter()
            // Entries booked under a later clock (a task that read it after this caller and
            // took the lock first) count too.
            .filter(|e| e.at_ms > from)
            .map(|e| e.amount)
            .sum()
    }
}

impl IdempotencyStore for MemoryStore {
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        request_digest: &'a str,
        operation_id: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>> {
        let now_ms = unix_millis(now);
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        if let Some(existing) = Self::live(map, hash, key, now_ms) {
            return ready(Ok(Reservation::Existing(existing.clone())));
        }
        let owner = new_token();
        let record = IdempotencyRecord {
            request_digest: request_digest.to_owned(),
            operation_id: operation_id.map(str::to_owned),
            state: RecordState::InFlight {
                owner: owner.clone(),
                lease_until_ms: now_ms.saturating_add(millis(lease)),
            },
            // Never before the lease ends: a short TTL must not free a key mid-flight.
            expires_at_ms: now_ms.saturating_add(millis(ttl.max(lease))),
        };
        let value = Box::new(Keyed {
            key: key.clone(),
            record,
        });
        shard.make_room(now_ms);
        shard
            .table
            .insert_unique(hash, Slot { hash, value }, |s| s.hash);
        ready(Ok(Reservation::Reserved { owner }))
    }

    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        ready(Ok(self.completed(key, owner, outcome, ttl, now)))
    }

    /// When `operations` is this store, both at once, answered by one future.
    fn complete_with_record<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
        record: OperationRecord,
        operations: &'a dyn OperationStore,
    ) -> BoxFuture<'a, (StoreResult<()>, StoreResult<bool>)> {
        if !std::ptr::addr_eq(operations, self) {
            return Box::pin(super::record_then_complete(
                self, key, owner, outcome, ttl, now, record, operations,
            ));
        }
        self.keep(record);
        ready((Ok(()), Ok(self.completed(key, owner, outcome, ttl, now))))
    }

    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        let owned = Self::remove_if(
            map,
            hash,
            key,
            |r| matches!(&r.state, RecordState::InFlight { owner: o, .. } if o == owner),
        );
        ready(Ok(owned))
    }

    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        let ok = match Self::find(map, hash, key) {
            Some(IdempotencyRecord {
                state:
                    RecordState::InFlight {
                        owner: o,
                        lease_until_ms,
                    },
                expires_at_ms,
                ..
            }) if o == owner => {
                *lease_until_ms = unix_millis(now).saturating_add(millis(lease));
                *expires_at_ms = (*expires_at_ms).max(*lease_until_ms);
                true
            }
            _ => false,
        };
        ready(Ok(ok))
    }

    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        let now_ms = unix_millis(now);
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        let token = match Self::live(map, hash, key, now_ms) {
            Some(IdempotencyRecord {
                state:
                    RecordState::InFlight {
                        owner,
                        lease_until_ms,
                    },
                expires_at_ms,
                ..
            }) if *lease_until_ms <= now_ms => {
                let t = new_token();
                *owner = t.clone();
                *lease_until_ms = now_ms.saturating_add(millis(lease));
                *expires_at_ms = (*expires_at_ms).max(*lease_until_ms);
                Some(t)
            }
            _ => None,
        };
        ready(Ok(token))
    }

    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let now_ms = unix_millis(now);
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        let ok = match Self::find(map, hash, key) {
            Some(rec) if rec.operation_id.as_deref() == Some(operation_id) => {
                rec.state = RecordState::Done { outcome };
                rec.expires_at_ms = now_ms.saturating_add(millis(ttl));
                true
            }
            _ => false,
        };
        ready(Ok(ok))
    }

    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        let owned = Self::remove_if(map, hash, key, |r| {
            r.operation_id.as_deref() == Some(operation_id)
        });
        ready(Ok(owned))
    }

    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        let (mut shard, hash) = self.shard(key);
        let map = &mut shard.table;
        ready(Ok(Self::live(map, hash, key, unix_millis(now)).cloned()))
    }
}

impl ApprovalStore for MemoryStore {
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        let mut map = lock(&self.approvals);
        if map.contains_key(&request.id) {
            return ready(Err(StoreError::new(format!(
                "approval request `{}` already exists",
                request.id
            ))));
        }
        map.insert(request.id.clone(), request.clone());
        crate::tool::passed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        ready(Ok(lock(&self.approvals).get(id).cloned()))
    }

    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        let mut out: Vec<ApprovalRequest> = lock(&self.approvals)
            .values()
            .filter(|r| r.requester.tenant == tenant && r.state == ApprovalState::Pending)
            .cloned()
            .collect();
        out.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        ready(Ok(out))
    }

    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let mut map = lock(&self.approvals);
        let ok = match map.get_mut(&request.id) {
            Some(stored) if stored.version == expected_version => {
                let mut next = request.clone();
                next.version = expected_version.saturating_add(1);
                *stored = next;
                true
            }
            _ => false,
        };
        ready(Ok(ok))
    }
}

impl SessionLedger for MemoryStore {
    fn provenance(self: std::sync::Arc<Self>) -> Option<crate::provenance::SharedProvenance> {
        Some(self)
    }

    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let now_ms = unix_millis(now);
        let mut ledger = lock(&self.ledger);
        if !ledger.fits(amount, limits, now_ms) {
            return ready(Ok(false));
        }
        let scopes: Vec<String> = limits.iter().map(|l| l.scope.clone()).collect();
        ledger.book(entry, amount, &scopes, now_ms);
        ready(Ok(true))
    }

    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        lock(&self.ledger).book(entry, amount, scopes, unix_millis(now));
        crate::tool::passed()
    }

    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        let mut ledger = lock(&self.ledger);
        for s in scopes {
            if let Some(entries) = ledger.scopes.get_mut(s) {
                entries.retain(|e| e.id != entry);
            }
        }
        crate::tool::passed()
    }

    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        let total = lock(&self.ledger).counted(scope, window, unix_millis(now));
        ready(Ok(total))
    }

    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let now_ms = unix_millis(now);
        let mut ledger = lock(&self.ledger);
        ledger.holds.retain(|_, h| h.until_ms > now_ms);
        if ledger.holds.contains_key(entry) {
            return ready(Ok(true));
        }
        if !ledger.fits(amount, limits, now_ms) {
            return ready(Ok(false));
        }
        let hold = Hold {
            amount,
            scopes: limits.iter().map(|l| l.scope.clone()).collect(),
            until_ms: unix_millis(until),
        };
        ledger.holds.insert(entry.to_owned(), hold);
        ready(Ok(true))
    }

    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        ready(Ok(lock(&self.ledger).holds.remove(entry).is_some()))
    }

    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        let now_ms = unix_millis(now);
        let mut ledger = lock(&self.ledger);
        let hold = match ledger.holds.get(entry) {
            Some(h) if h.until_ms > now_ms => h.clone(),
            _ => return ready(Ok(HoldCommit::Missing)),
        };
        if amount > hold.amount {
            return ready(Ok(HoldCommit::Exceeds {
                reserved: hold.amount,
            }));
        }
        ledger.holds.remove(entry);
        ledger.book(entry, amount, &hold.scopes, now_ms);
        ready(Ok(HoldCommit::Committed))
    }

    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let now_ms = unix_millis(now);
        let from = now_ms.saturating_sub(millis(window));
        let mut ledger = lock(&self.ledger);
        let entries = ledger.scopes.entry(format!("rate|{scope}")).or_default();
        while entries.front().is_some_and(|e| e.at_ms <= from) {
            entries.pop_front();
        }
        let counted = entries.iter().filter(|e| e.at_ms > from).count();
        if counted >= max as usize {
            return ready(Ok(false));
        }
        entries.push_back(LedgerEntry {
            id: String::new(),
            amount: 1,
            at_ms: now_ms,
        });
        ready(Ok(true))
    }
}

impl OperationStore for MemoryStore {
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>> {
        self.keep(record);
        crate::tool::passed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        let hash = self.hashing.hash_one(id);
        let found = lock(&self.operations)
            .find(hash, |s| s.value.id == id)
            .map(|s| (*s.value).clone());
        ready(Ok(found))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(subject: &str, tool: &str, k: &str) -> ScopedKey {
        ScopedKey {
            tenant: "acme".into(),
            subject: subject.into(),
            tool: tool.into(),
            key: k.into(),
        }
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000)
    }

    async fn reserve(store: &MemoryStore, key: &ScopedKey, at: SystemTime) -> Reservation {
        let (lease, ttl) = (Duration::from_secs(5), Duration::from_secs(60));
        IdempotencyStore::reserve(store, key, "digest", Some("op"), lease, ttl, at)
            .await
            .expect("the memory store answers")
    }

    impl MemoryStore {
        /// Idempotency records held, live or not.
        fn idempotency_records(&self) -> usize {
            self.idempotency.iter().map(|s| lock(s).table.len()).sum()
        }
    }

    #[tokio::test]
    async fn expired_keys_do_not_pile_up_under_fresh_keys() {
        let store = MemoryStore::new();
        let (second, hour) = (Duration::from_secs(1), Duration::from_secs(3_600));
        let n = 20_000;
        for i in 0..n {
            let k = key("alice", "transfer", &format!("old-{i}"));
            IdempotencyStore::reserve(&store, &k, "d", None, second, second, now())
                .await
                .unwrap();
        }
        // Nothing had expired when the shards first grew: every old key is still held.
        assert_eq!(store.idempotency_records(), n);
        let later = now() + Duration::from_secs(2);
        for i in 0..n {
            let k = key("alice", "transfer", &format!("new-{i}"));
            IdempotencyStore::reserve(&store, &k, "d", None, second, hour, later)
                .await
                .unwrap();
        }
        // Every shard doubled while taking the new keys and dropped all the expired old ones;
        // the new ones, live, are all kept.
        assert_eq!(store.idempotency_records(), n);
        let live = key("alice", "transfer", "new-0");
        assert!(matches!(
            reserve(&store, &live, later).await,
            Reservation::Existing(_)
        ));
        let gone = key("alice", "transfer", "old-0");
        assert!(matches!(
            reserve(&store, &gone, later).await,
            Reservation::Reserved { .. }
        ));
    }

    #[tokio::test]
    async fn purge_removes_what_expired_and_keeps_what_lives() {
        let store = MemoryStore::new();
        let (minute, hour) = (Duration::from_secs(60), Duration::from_secs(3_600));
        let (short, long) = (key("alice", "transfer", "a"), key("alice", "transfer", "b"));
        for (k, ttl) in [(&short, minute), (&long, 2 * hour)] {
            IdempotencyStore::reserve(&store, k, "d", None, Duration::from_secs(5), ttl, now())
                .await
                .unwrap();
        }
        let limits = [ScopeLimit {
            scope: "subject".into(),
            limit: 1_000,
            window: 3 * hour,
        }];
        let ledger: &dyn SessionLedger = &store;
        assert!(
            ledger
                .reserve("booked", 10, &limits, now() + minute, now())
                .await
                .unwrap()
        );
        assert!(matches!(
            ledger.commit("booked", 10, now()).await.unwrap(),
            HoldCommit::Committed
        ));
        assert!(
            ledger
                .reserve("held", 5, &limits, now() + hour, now())
                .await
                .unwrap()
        );
        assert!(
            ledger
                .reserve("ends", 7, &limits, now() + minute, now())
                .await
                .unwrap()
        );
        assert!(ledger.hit("calls", 10, hour, now()).await.unwrap());
        let total = |at| ledger.total("subject", 3 * hour, at);
        assert_eq!(total(now()).await.unwrap(), 22);

        // Two minutes on: the short key and the reservation that ended go; the ledger's entries
        // are younger than `keep`.
        let t1 = now() + 2 * minute;
        assert_eq!(store.purge(t1, hour), 2);
        assert_eq!(store.idempotency_records(), 1);
        assert_eq!(total(t1).await.unwrap(), 15);
        assert!(matches!(
            reserve(&store, &long, t1).await,
            Reservation::Existing(_)
        ));

        // Three hours on: the long key, the last reservation, the booked amount and the hit.
        let t2 = now() + 3 * hour;
        assert_eq!(store.purge(t2, hour), 4);
        assert_eq!(store.idempotency_records(), 0);
        assert_eq!(total(t2).await.unwrap(), 0);
        assert_eq!(store.purge(t2, hour), 0, "nothing is left to remove");
    }

    #[tokio::test]
    async fn keys_are_told_apart_by_their_parts_and_expire() {
        let store = MemoryStore::new();
        let a = key("al|ice", "transfer", "k:1");
        // Its parts spelled into one string without lengths would read the same.
        let b = key("al", "ice|8:transfer", "k:1");
        let Reservation::Reserved { owner } = reserve(&store, &a, now()).await else {
            panic!("a fresh key is reserved");
        };
        assert!(matches!(
            reserve(&store, &b, now()).await,
            Reservation::Reserved { .. }
        ));
        assert!(matches!(
            reserve(&store, &a, now()).await,
            Reservation::Existing(_)
        ));
        let done = StoredOutcome::new(crate::outcome::Status::Ok);
        let ttl = Duration::from_secs(60);
        assert!(
            !IdempotencyStore::complete(&store, &a, "not the owner", done.clone(), ttl, now())
                .await
                .unwrap()
        );
        assert!(
            IdempotencyStore::complete(&store, &a, &owner, done.clone(), ttl, now())
                .await
                .unwrap()
        );
        let got = IdempotencyStore::get(&store, &a, now()).await.unwrap();
        assert!(
            matches!(got.map(|r| r.state), Some(RecordState::Done { outcome }) if outcome == done)
        );
        // Past its time the record is gone, and the key can be reserved again.
        let later = now() + Duration::from_secs(61);
        assert!(
            IdempotencyStore::get(&store, &a, later)
                .await
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            reserve(&store, &a, later).await,
            Reservation::Reserved { .. }
        ));
        assert!(
            !IdempotencyStore::remove(&store, &b, "another operation")
                .await
                .unwrap()
        );
        assert!(IdempotencyStore::remove(&store, &b, "op").await.unwrap());
        assert!(
            IdempotencyStore::get(&store, &b, now())
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn an_operation_record_is_replaced_under_its_id() {
        let store = MemoryStore::new();
        let record = |id: &str, state| OperationRecord {
            id: id.into(),
            tenant: "acme".into(),
            subject: "alice".into(),
            tool: "transfer".into(),
            call_id: "c".into(),
            state,
            outcome: None,
            arguments: std::sync::Arc::new(serde_json::Value::Null),
            idempotency: None,
            approval_id: None,
            updated_at_ms: 1,
        };
        for i in 0..100 {
            let id = format!("op-{i}");
            OperationStore::put(&store, record(&id, OperationState::Executing))
                .await
                .unwrap();
        }
        OperationStore::put(&store, record("op-7", OperationState::Ok))
            .await
            .unwrap();
        let got = OperationStore::get(&store, "op-7").await.unwrap().unwrap();
        assert_eq!(got.state, OperationState::Ok);
        let other = OperationStore::get(&store, "op-8").await.unwrap().unwrap();
        assert_eq!(other.state, OperationState::Executing);
        assert!(
            OperationStore::get(&store, "op-100")
                .await
                .unwrap()
                .is_none()
        );
    }
}
