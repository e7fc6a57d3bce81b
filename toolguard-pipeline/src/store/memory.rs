use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use super::types::*;
use super::{
    ApprovalStore, IdempotencyStore, OperationStore, SessionLedger, StoreError, StoreResult,
};
use crate::clock::unix_millis;
use crate::store::encode::{millis, new_token};
use crate::tool::BoxFuture;

const SHARDS: usize = 16;

/// In-memory implementation of every store; for tests, demos and single-process use. Nothing
/// survives a restart.
///
/// Idempotency records are sharded by key scope, each shard behind its own lock, so unrelated
/// keys do not contend.
#[derive(Debug)]
pub struct MemoryStore {
    idempotency: Vec<Mutex<HashMap<String, IdempotencyRecord>>>,
    approvals: Mutex<HashMap<String, ApprovalRequest>>,
    ledger: Mutex<LedgerState>,
    operations: Mutex<HashMap<arcstr::ArcStr, OperationRecord>>,
    sources: Mutex<HashMap<String, Vec<crate::provenance::Source>>>,
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
            idempotency: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            approvals: Mutex::new(HashMap::new()),
            ledger: Mutex::new(LedgerState::default()),
            operations: Mutex::new(HashMap::new()),
            sources: Mutex::new(HashMap::new()),
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

    /// Gives mutable access to the stored approval requests, as an attacker with write access to
    /// the storage would have (tests of the approval seal).
    pub fn with_approvals<R>(
        &self,
        f: impl FnOnce(&mut HashMap<String, ApprovalRequest>) -> R,
    ) -> R {
        f(&mut lock(&self.approvals))
    }

    fn shard(&self, key: &str) -> MutexGuard<'_, HashMap<String, IdempotencyRecord>> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        lock(&self.idempotency[(h.finish() as usize) % SHARDS])
    }

    fn live<'m>(
        map: &'m mut HashMap<String, IdempotencyRecord>,
        key: &str,
        now_ms: u64,
    ) -> Option<&'m mut IdempotencyRecord> {
        if map.get(key).is_some_and(|r| r.expires_at_ms <= now_ms) {
            map.remove(key);
        }
        map.get_mut(key)
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
        let k = key.storage_key();
        let mut map = self.shard(&k);
        if let Some(existing) = Self::live(&mut map, &k, now_ms) {
            return ready(Ok(Reservation::Existing(existing.clone())));
        }
        let owner = new_token();
        map.insert(
            k,
            IdempotencyRecord {
                request_digest: request_digest.to_owned(),
                operation_id: operation_id.map(str::to_owned),
                state: RecordState::InFlight {
                    owner: owner.clone(),
                    lease_until_ms: now_ms.saturating_add(millis(lease)),
                },
                // Never before the lease ends: a short TTL must not free a key mid-flight.
                expires_at_ms: now_ms.saturating_add(millis(ttl.max(lease))),
            },
        );
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
        let now_ms = unix_millis(now);
        let k = key.storage_key();
        let mut map = self.shard(&k);
        let ok = match map.get_mut(&k) {
            Some(rec) if matches!(&rec.state, RecordState::InFlight { owner: o, .. } if o == owner) =>
            {
                rec.state = RecordState::Done { outcome };
                rec.expires_at_ms = now_ms.saturating_add(millis(ttl));
                true
            }
            _ => false,
        };
        ready(Ok(ok))
    }

    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let k = key.storage_key();
        let mut map = self.shard(&k);
        let owned = matches!(map.get(&k), Some(r) if matches!(&r.state, RecordState::InFlight { owner: o, .. } if o == owner));
        if owned {
            map.remove(&k);
        }
        ready(Ok(owned))
    }

    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let k = key.storage_key();
        let mut map = self.shard(&k);
        let ok = match map.get_mut(&k) {
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
        let k = key.storage_key();
        let mut map = self.shard(&k);
        let token = match Self::live(&mut map, &k, now_ms) {
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
        let k = key.storage_key();
        let mut map = self.shard(&k);
        let ok = match map.get_mut(&k) {
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
        let k = key.storage_key();
        let mut map = self.shard(&k);
        let owned = map
            .get(&k)
            .is_some_and(|r| r.operation_id.as_deref() == Some(operation_id));
        if owned {
            map.remove(&k);
        }
        ready(Ok(owned))
    }

    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        let k = key.storage_key();
        let mut map = self.shard(&k);
        ready(Ok(Self::live(&mut map, &k, unix_millis(now)).cloned()))
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
        // The record it replaces is dropped outside the lock.
        let replaced = lock(&self.operations).insert(record.id.clone(), record);
        drop(replaced);
        crate::tool::passed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        ready(Ok(lock(&self.operations).get(id).cloned()))
    }
}
