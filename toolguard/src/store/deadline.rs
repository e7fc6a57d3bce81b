//! The one deadline every store call on a call's path runs under. The dispatcher wraps each
//! store it is given in [`Deadlined`] when it is built, so no stage can reach a store without
//! the deadline: a store that does not answer in time counts as unavailable.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::types::*;
use super::{
    ApprovalStore, IdempotencyStore, OperationStore, SessionLedger, StoreError, StoreResult,
};
use crate::tool::BoxFuture;

/// A store whose every operation answers within `deadline`, or fails with a [`StoreError`].
pub(crate) struct Deadlined<T: ?Sized> {
    inner: Arc<T>,
    deadline: Duration,
}

impl<T: ?Sized> Deadlined<T> {
    /// Wraps `inner`.
    pub(crate) fn new(inner: Arc<T>, deadline: Duration) -> Arc<Self> {
        Arc::new(Deadlined { inner, deadline })
    }

    /// The wrapped store.
    pub(crate) fn inner(&self) -> &T {
        &self.inner
    }

    pub(crate) fn timed<'a, R: Send + 'a>(
        &'a self,
        what: &'static str,
        op: BoxFuture<'a, StoreResult<R>>,
    ) -> BoxFuture<'a, StoreResult<R>> {
        let deadline = self.deadline;
        Box::pin(async move {
            tokio::time::timeout(deadline, op)
                .await
                .unwrap_or_else(|_| {
                    Err(StoreError::new(format!(
                        "{what}: no answer within {} ms",
                        deadline.as_millis()
                    )))
                })
        })
    }
}

impl<T: IdempotencyStore + ?Sized> IdempotencyStore for Deadlined<T> {
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        digest: &'a str,
        op: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>> {
        let run = self.inner.reserve(key, digest, op, lease, ttl, now);
        self.timed("idempotency reserve", run)
    }
    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let run = self.inner.complete(key, owner, outcome, ttl, now);
        self.timed("idempotency complete", run)
    }
    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.timed("idempotency release", self.inner.release(key, owner))
    }
    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let run = self.inner.renew(key, owner, lease, now);
        self.timed("idempotency renew", run)
    }
    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        let run = self.inner.take_over(key, lease, now);
        self.timed("idempotency take-over", run)
    }
    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let run = self.inner.replace(key, operation_id, outcome, ttl, now);
        self.timed("idempotency replace", run)
    }
    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.timed("idempotency remove", self.inner.remove(key, operation_id))
    }
    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        self.timed(
            "idempotency get",
            IdempotencyStore::get(&*self.inner, key, now),
        )
    }
}

impl<T: ApprovalStore + ?Sized> ApprovalStore for Deadlined<T> {
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        self.timed("approval create", self.inner.create(request))
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        self.timed("approval get", ApprovalStore::get(&*self.inner, id))
    }
    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        self.timed("approval pending", self.inner.pending(tenant))
    }
    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.timed(
            "approval update",
            self.inner.update(request, expected_version),
        )
    }
}

impl<T: SessionLedger + ?Sized> SessionLedger for Deadlined<T> {
    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let run = self.inner.admit(entry, amount, limits, now);
        self.timed("ledger admit", run)
    }
    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        let run = self.inner.record(entry, amount, scopes, now);
        self.timed("ledger record", run)
    }
    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.timed("ledger retract", self.inner.retract(entry, scopes))
    }
    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        self.timed("ledger total", self.inner.total(scope, window, now))
    }
    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.timed("ledger hit", self.inner.hit(scope, max, window, now))
    }
    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let run = self.inner.reserve(entry, amount, limits, until, now);
        self.timed("ledger reserve", run)
    }
    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        self.timed("ledger release", self.inner.release(entry))
    }
    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        self.timed("ledger commit", self.inner.commit(entry, amount, now))
    }
}

impl<T: OperationStore + ?Sized> OperationStore for Deadlined<T> {
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>> {
        self.timed("operation put", self.inner.put(record))
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        self.timed("operation get", OperationStore::get(&*self.inner, id))
    }
}
