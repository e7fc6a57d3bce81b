//! A store that passes every operation on to a backend's stores, with a hook that watches or
//! refuses chosen ones: faults that depend on what is written, and the crash harness's crash
//! points, without writing the store traits out again for each.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use toolguard::BoxFuture;
use toolguard::store::{
    ApprovalRequest, ApprovalStore, HoldCommit, IdempotencyRecord, IdempotencyStore,
    OperationRecord, OperationStore, Reservation, ScopeLimit, ScopedKey, SessionLedger,
    StoreResult, StoredOutcome,
};

/// What a [`Delegate`] tells its hook, and where the hook may refuse an operation. Every method
/// does nothing by default.
pub trait Hook: Send + Sync + 'static {
    /// A reservation was granted.
    fn reserved(&self) {}
    /// An idempotency record is about to be completed (alone or with its operation record).
    fn completing(&self) {}
    /// An approval request is about to be written: an error answers the write instead.
    fn updating(&self, _request: &ApprovalRequest) -> StoreResult<()> {
        Ok(())
    }
    /// An approval request was written (`true`), or not, since it had changed (`false`).
    fn updated(&self, _request: &ApprovalRequest, _written: bool) {}
    /// An operation record is about to be written: an error answers the write instead.
    fn putting(&self, _record: &OperationRecord) -> StoreResult<()> {
        Ok(())
    }
}

/// No hook: the stores as they are, as one value.
impl Hook for () {}

/// A backend's four stores as one value, each operation passed on to its store after `hook` had
/// its say. A completion with its operation record goes to the idempotency store's own
/// `complete_with_record`, so a backend that writes both in one step still does.
pub struct Delegate<H = ()> {
    /// Where idempotency operations go.
    pub idempotency: Arc<dyn IdempotencyStore>,
    /// Where session-ledger operations go.
    pub ledger: Arc<dyn SessionLedger>,
    /// Where approval operations go.
    pub approvals: Arc<dyn ApprovalStore>,
    /// Where operation records go.
    pub operations: Arc<dyn OperationStore>,
    /// What watches the operations.
    pub hook: H,
}

impl Delegate {
    /// Every operation passed on to `store`.
    pub fn of<S>(store: Arc<S>) -> Self
    where
        S: IdempotencyStore + SessionLedger + ApprovalStore + OperationStore,
    {
        Delegate {
            idempotency: store.clone(),
            ledger: store.clone(),
            approvals: store.clone(),
            operations: store,
            hook: (),
        }
    }
}

impl<H> Delegate<H> {
    /// The same stores, watched by `hook`.
    pub fn hook<G: Hook>(self, hook: G) -> Delegate<G> {
        Delegate {
            idempotency: self.idempotency,
            ledger: self.ledger,
            approvals: self.approvals,
            operations: self.operations,
            hook,
        }
    }
}

/// `answer` unless the hook refused the operation with `refused`.
fn unless<'a, T: Send + 'a>(
    refused: StoreResult<()>,
    answer: impl FnOnce() -> BoxFuture<'a, StoreResult<T>>,
) -> BoxFuture<'a, StoreResult<T>> {
    match refused {
        Ok(()) => answer(),
        Err(e) => Box::pin(std::future::ready(Err(e))),
    }
}

impl<H: Hook> IdempotencyStore for Delegate<H> {
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
            let answer = self
                .idempotency
                .reserve(key, request_digest, operation_id, lease, ttl, now)
                .await;
            if let Ok(Reservation::Reserved { .. }) = &answer {
                self.hook.reserved();
            }
            answer
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
        self.hook.completing();
        self.idempotency.complete(key, owner, outcome, ttl, now)
    }

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
        self.hook.completing();
        self.idempotency
            .complete_with_record(key, owner, outcome, ttl, now, record, operations)
    }

    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.idempotency.release(key, owner)
    }

    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.idempotency.renew(key, owner, lease, now)
    }

    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        self.idempotency.take_over(key, lease, now)
    }

    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.idempotency
            .replace(key, operation_id, outcome, ttl, now)
    }

    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.idempotency.remove(key, operation_id)
    }

    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        self.idempotency.get(key, now)
    }
}

impl<H: Hook> ApprovalStore for Delegate<H> {
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        self.approvals.create(request)
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        self.approvals.get(id)
    }

    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        self.approvals.pending(tenant)
    }

    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        unless(self.hook.updating(request), || {
            Box::pin(async move {
                let written = self.approvals.update(request, expected_version).await;
                if let Ok(written) = &written {
                    self.hook.updated(request, *written);
                }
                written
            })
        })
    }
}

impl<H: Hook> SessionLedger for Delegate<H> {
    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.ledger.admit(entry, amount, limits, now)
    }

    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.ledger.record(entry, amount, scopes, now)
    }

    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.ledger.retract(entry, scopes)
    }

    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        self.ledger.total(scope, window, now)
    }

    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.ledger.hit(scope, max, window, now)
    }

    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.ledger.reserve(entry, amount, limits, until, now)
    }

    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        self.ledger.release(entry)
    }

    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        self.ledger.commit(entry, amount, now)
    }
}

impl<H: Hook> OperationStore for Delegate<H> {
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>> {
        unless(self.hook.putting(&record), || self.operations.put(record))
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        self.operations.get(id)
    }
}
