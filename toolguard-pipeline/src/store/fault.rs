//! Fault injection: a wrapper store that fails or stalls chosen operations, for testing that
//! every path fails closed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use super::types::*;
use super::{
    ApprovalStore, IdempotencyStore, OperationStore, SessionLedger, StoreError, StoreResult,
};
use crate::tool::BoxFuture;

/// An operation of a store, to fail or stall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    /// [`IdempotencyStore::reserve`].
    Reserve,
    /// [`IdempotencyStore::complete`].
    Complete,
    /// [`IdempotencyStore::release`].
    Release,
    /// [`IdempotencyStore::renew`].
    Renew,
    /// [`IdempotencyStore::take_over`].
    TakeOver,
    /// [`IdempotencyStore::replace`].
    Replace,
    /// [`IdempotencyStore::remove`].
    Remove,
    /// [`IdempotencyStore::get`].
    Get,
    /// [`ApprovalStore::create`].
    ApprovalCreate,
    /// [`ApprovalStore::get`].
    ApprovalGet,
    /// [`ApprovalStore::pending`].
    ApprovalPending,
    /// [`ApprovalStore::update`].
    ApprovalUpdate,
    /// [`SessionLedger::admit`].
    LedgerAdmit,
    /// [`SessionLedger::record`].
    LedgerRecord,
    /// [`SessionLedger::retract`].
    LedgerRetract,
    /// [`SessionLedger::total`].
    LedgerTotal,
    /// [`SessionLedger::hit`].
    LedgerHit,
    /// [`SessionLedger::reserve`].
    LedgerReserve,
    /// [`SessionLedger::release`].
    LedgerRelease,
    /// [`SessionLedger::commit`].
    LedgerCommit,
    /// [`OperationStore::put`].
    OperationPut,
    /// [`OperationStore::get`].
    OperationGet,
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Fail,
    Stall(Duration),
}

/// Wraps a store and fails or stalls the operations it is told to.
#[derive(Debug)]
pub struct FaultyStore<B> {
    inner: Arc<B>,
    faults: Mutex<HashMap<StoreOp, Fault>>,
}

impl<B> FaultyStore<B> {
    /// Wraps `inner`; nothing fails until told to.
    pub fn new(inner: Arc<B>) -> Self {
        FaultyStore {
            inner,
            faults: Mutex::new(HashMap::new()),
        }
    }

    /// Makes `op` fail with a [`StoreError`].
    pub fn fail(&self, op: StoreOp) {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(op, Fault::Fail);
    }

    /// Makes `op` wait `by` before it runs.
    pub fn stall(&self, op: StoreOp, by: Duration) {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(op, Fault::Stall(by));
    }

    /// Lets `op` work again.
    pub fn heal(&self, op: StoreOp) {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&op);
    }

    /// Lets every operation work again.
    pub fn heal_all(&self) {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// The wrapped store.
    pub fn inner(&self) -> &Arc<B> {
        &self.inner
    }

    fn fault(&self, op: StoreOp) -> Option<Fault> {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&op)
            .copied()
    }

    fn guard<'a, T: Send + 'a>(
        &'a self,
        op: StoreOp,
        run: impl FnOnce() -> BoxFuture<'a, StoreResult<T>> + Send + 'a,
    ) -> BoxFuture<'a, StoreResult<T>> {
        let fault = self.fault(op);
        Box::pin(async move {
            match fault {
                Some(Fault::Fail) => Err(StoreError::new(format!("injected failure of {op:?}"))),
                Some(Fault::Stall(by)) => {
                    tokio::time::sleep(by).await;
                    run().await
                }
                None => run().await,
            }
        })
    }
}

impl<B: IdempotencyStore + Sync> IdempotencyStore for FaultyStore<B>
where
    FaultyStore<B>: Send + Sync,
{
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        digest: &'a str,
        op: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>> {
        self.guard(StoreOp::Reserve, move || {
            self.inner.reserve(key, digest, op, lease, ttl, now)
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
        self.guard(StoreOp::Complete, move || {
            self.inner.complete(key, owner, outcome, ttl, now)
        })
    }
    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.guard(StoreOp::Release, move || self.inner.release(key, owner))
    }
    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.guard(StoreOp::Renew, move || {
            self.inner.renew(key, owner, lease, now)
        })
    }
    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        self.guard(StoreOp::TakeOver, move || {
            self.inner.take_over(key, lease, now)
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
        self.guard(StoreOp::Replace, move || {
            self.inner.replace(key, operation_id, outcome, ttl, now)
        })
    }
    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.guard(StoreOp::Remove, move || {
            self.inner.remove(key, operation_id)
        })
    }
    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        self.guard(StoreOp::Get, move || {
            IdempotencyStore::get(&*self.inner, key, now)
        })
    }
}

impl<B: ApprovalStore + Sync> ApprovalStore for FaultyStore<B>
where
    FaultyStore<B>: Send + Sync,
{
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        self.guard(StoreOp::ApprovalCreate, move || self.inner.create(request))
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        self.guard(StoreOp::ApprovalGet, move || {
            ApprovalStore::get(&*self.inner, id)
        })
    }
    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        self.guard(StoreOp::ApprovalPending, move || self.inner.pending(tenant))
    }
    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.guard(StoreOp::ApprovalUpdate, move || {
            self.inner.update(request, expected_version)
        })
    }
}

impl<B: SessionLedger + Sync> SessionLedger for FaultyStore<B>
where
    FaultyStore<B>: Send + Sync,
{
    fn provenance(self: Arc<Self>) -> Option<crate::provenance::SharedProvenance> {
        self.inner().clone().provenance()
    }

    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.guard(StoreOp::LedgerAdmit, move || {
            self.inner.admit(entry, amount, limits, now)
        })
    }
    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.guard(StoreOp::LedgerRecord, move || {
            self.inner.record(entry, amount, scopes, now)
        })
    }
    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.guard(StoreOp::LedgerRetract, move || {
            self.inner.retract(entry, scopes)
        })
    }
    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        self.guard(StoreOp::LedgerTotal, move || {
            self.inner.total(scope, window, now)
        })
    }
    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.guard(StoreOp::LedgerHit, move || {
            self.inner.hit(scope, max, window, now)
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
        self.guard(StoreOp::LedgerReserve, move || {
            self.inner.reserve(entry, amount, limits, until, now)
        })
    }
    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        self.guard(StoreOp::LedgerRelease, move || {
            SessionLedger::release(&*self.inner, entry)
        })
    }
    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        self.guard(StoreOp::LedgerCommit, move || {
            self.inner.commit(entry, amount, now)
        })
    }
}

impl<B: OperationStore + Sync> OperationStore for FaultyStore<B>
where
    FaultyStore<B>: Send + Sync,
{
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>> {
        self.guard(StoreOp::OperationPut, move || self.inner.put(record))
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        self.guard(StoreOp::OperationGet, move || {
            OperationStore::get(&*self.inner, id)
        })
    }
}
