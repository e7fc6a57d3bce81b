//! The one deadline every store call on a call's path runs under. The dispatcher wraps each
//! store it is given in [`Deadlined`] when it is built, so no stage can reach a store without
//! the deadline: a store that does not answer in time counts as unavailable.
//!
//! Stages call a wrapped store through its inherent `async` methods (same names as the store
//! trait's), whose futures live inside the call's own future: the deadline adds no allocation.
//! The wrapper also implements the store trait (boxing those methods) for code that takes a
//! `dyn` store.

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

    /// The longest wait for one of the store's operations.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The wrapped store.
    pub(crate) fn inner(&self) -> &T {
        &self.inner
    }

    /// `op` under the deadline, counted from its first wait (an operation that answers in its
    /// first poll reads no clock); the future is polled in place (not boxed again), so a stage
    /// calling a store through the inherent methods below pays for the store's own future only.
    pub(crate) async fn timed<R>(
        &self,
        what: &'static str,
        op: BoxFuture<'_, StoreResult<R>>,
    ) -> StoreResult<R> {
        let deadline = self.deadline;
        crate::timeout::limit(deadline, op)
            .await
            .unwrap_or_else(|_| Err(late(what, deadline)))
    }
}

/// The error of an operation `what` that had no answer within `deadline`.
fn late(what: &str, deadline: Duration) -> StoreError {
    StoreError::new(format!(
        "{what}: no answer within {} ms",
        deadline.as_millis()
    ))
}

impl Deadlined<dyn IdempotencyStore> {
    /// [`IdempotencyStore::reserve`] under the deadline.
    pub(crate) async fn reserve(
        &self,
        key: &ScopedKey,
        digest: &str,
        op: Option<&str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> StoreResult<Reservation> {
        self.timed(
            "idempotency reserve",
            self.inner.reserve(key, digest, op, lease, ttl, now),
        )
        .await
    }
    /// [`IdempotencyStore::complete`] under the deadline.
    pub(crate) async fn complete(
        &self,
        key: &ScopedKey,
        owner: &str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> StoreResult<bool> {
        self.timed(
            "idempotency complete",
            self.inner.complete(key, owner, outcome, ttl, now),
        )
        .await
    }
    /// [`IdempotencyStore::complete_with_record`] under the deadline, which covers both writes.
    /// The store's future is made at once (taking the outcome and the record), so that this
    /// future holds them once, in the store's.
    #[allow(clippy::too_many_arguments, reason = "the store method's arguments")]
    pub(crate) fn complete_with_record<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
        record: OperationRecord,
        operations: &'a dyn OperationStore,
    ) -> impl Future<Output = (StoreResult<()>, StoreResult<bool>)> + Send + 'a {
        let writes = self
            .inner
            .complete_with_record(key, owner, outcome, ttl, now, record, operations);
        let deadline = self.deadline;
        async move {
            crate::timeout::limit(deadline, writes)
                .await
                .unwrap_or_else(|_| {
                    let late = late("idempotency complete with the operation record", deadline);
                    (Err(late.clone()), Err(late))
                })
        }
    }
    /// [`IdempotencyStore::release`] under the deadline.
    pub(crate) async fn release(&self, key: &ScopedKey, owner: &str) -> StoreResult<bool> {
        self.timed("idempotency release", self.inner.release(key, owner))
            .await
    }
    /// [`IdempotencyStore::renew`] under the deadline.
    pub(crate) async fn renew(
        &self,
        key: &ScopedKey,
        owner: &str,
        lease: Duration,
        now: SystemTime,
    ) -> StoreResult<bool> {
        self.timed(
            "idempotency renew",
            self.inner.renew(key, owner, lease, now),
        )
        .await
    }
    /// [`IdempotencyStore::take_over`] under the deadline.
    pub(crate) async fn take_over(
        &self,
        key: &ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> StoreResult<Option<String>> {
        self.timed(
            "idempotency take-over",
            self.inner.take_over(key, lease, now),
        )
        .await
    }
    /// [`IdempotencyStore::replace`] under the deadline.
    pub(crate) async fn replace(
        &self,
        key: &ScopedKey,
        operation_id: &str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> StoreResult<bool> {
        self.timed(
            "idempotency replace",
            self.inner.replace(key, operation_id, outcome, ttl, now),
        )
        .await
    }
    /// [`IdempotencyStore::remove`] under the deadline.
    pub(crate) async fn remove(&self, key: &ScopedKey, operation_id: &str) -> StoreResult<bool> {
        self.timed("idempotency remove", self.inner.remove(key, operation_id))
            .await
    }
    /// [`IdempotencyStore::get`] under the deadline.
    pub(crate) async fn get(
        &self,
        key: &ScopedKey,
        now: SystemTime,
    ) -> StoreResult<Option<IdempotencyRecord>> {
        self.timed(
            "idempotency get",
            IdempotencyStore::get(&*self.inner, key, now),
        )
        .await
    }
}

impl IdempotencyStore for Deadlined<dyn IdempotencyStore> {
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        digest: &'a str,
        op: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::reserve(
            self, key, digest, op, lease, ttl, now,
        ))
    }
    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::complete(
            self, key, owner, outcome, ttl, now,
        ))
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
        Box::pin(Deadlined::<dyn IdempotencyStore>::complete_with_record(
            self, key, owner, outcome, ttl, now, record, operations,
        ))
    }
    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::release(self, key, owner))
    }
    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::renew(
            self, key, owner, lease, now,
        ))
    }
    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::take_over(
            self, key, lease, now,
        ))
    }
    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::replace(
            self,
            key,
            operation_id,
            outcome,
            ttl,
            now,
        ))
    }
    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::remove(
            self,
            key,
            operation_id,
        ))
    }
    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        Box::pin(Deadlined::<dyn IdempotencyStore>::get(self, key, now))
    }
}

impl Deadlined<dyn ApprovalStore> {
    /// [`ApprovalStore::create`] under the deadline.
    pub(crate) async fn create(&self, request: &ApprovalRequest) -> StoreResult<()> {
        self.timed("approval create", self.inner.create(request))
            .await
    }
    /// [`ApprovalStore::get`] under the deadline.
    pub(crate) async fn get(&self, id: &str) -> StoreResult<Option<ApprovalRequest>> {
        self.timed("approval get", ApprovalStore::get(&*self.inner, id))
            .await
    }
    /// [`ApprovalStore::pending`] under the deadline.
    pub(crate) async fn pending(&self, tenant: &str) -> StoreResult<Vec<ApprovalRequest>> {
        self.timed("approval pending", self.inner.pending(tenant))
            .await
    }
    /// [`ApprovalStore::update`] under the deadline.
    pub(crate) async fn update(
        &self,
        request: &ApprovalRequest,
        expected_version: u64,
    ) -> StoreResult<bool> {
        self.timed(
            "approval update",
            self.inner.update(request, expected_version),
        )
        .await
    }
}

impl ApprovalStore for Deadlined<dyn ApprovalStore> {
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(Deadlined::<dyn ApprovalStore>::create(self, request))
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        Box::pin(Deadlined::<dyn ApprovalStore>::get(self, id))
    }
    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        Box::pin(Deadlined::<dyn ApprovalStore>::pending(self, tenant))
    }
    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn ApprovalStore>::update(
            self,
            request,
            expected_version,
        ))
    }
}

impl Deadlined<dyn SessionLedger> {
    /// [`SessionLedger::admit`] under the deadline.
    pub(crate) async fn admit(
        &self,
        entry: &str,
        amount: u64,
        limits: &[ScopeLimit],
        now: SystemTime,
    ) -> StoreResult<bool> {
        self.timed("ledger admit", self.inner.admit(entry, amount, limits, now))
            .await
    }
    /// [`SessionLedger::record`] under the deadline.
    pub(crate) async fn record(
        &self,
        entry: &str,
        amount: u64,
        scopes: &[String],
        now: SystemTime,
    ) -> StoreResult<()> {
        self.timed(
            "ledger record",
            self.inner.record(entry, amount, scopes, now),
        )
        .await
    }
    /// [`SessionLedger::retract`] under the deadline.
    pub(crate) async fn retract(&self, entry: &str, scopes: &[String]) -> StoreResult<()> {
        self.timed("ledger retract", self.inner.retract(entry, scopes))
            .await
    }
    /// [`SessionLedger::total`] under the deadline.
    pub(crate) async fn total(
        &self,
        scope: &str,
        window: Duration,
        now: SystemTime,
    ) -> StoreResult<u64> {
        self.timed("ledger total", self.inner.total(scope, window, now))
            .await
    }
    /// [`SessionLedger::hit`] under the deadline.
    pub(crate) async fn hit(
        &self,
        scope: &str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> StoreResult<bool> {
        self.timed("ledger hit", self.inner.hit(scope, max, window, now))
            .await
    }
    /// [`SessionLedger::reserve`] under the deadline.
    pub(crate) async fn reserve(
        &self,
        entry: &str,
        amount: u64,
        limits: &[ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> StoreResult<bool> {
        self.timed(
            "ledger reserve",
            self.inner.reserve(entry, amount, limits, until, now),
        )
        .await
    }
    /// [`SessionLedger::release`] under the deadline.
    pub(crate) async fn release(&self, entry: &str) -> StoreResult<bool> {
        self.timed("ledger release", self.inner.release(entry))
            .await
    }
    /// [`SessionLedger::commit`] under the deadline.
    pub(crate) async fn commit(
        &self,
        entry: &str,
        amount: u64,
        now: SystemTime,
    ) -> StoreResult<HoldCommit> {
        self.timed("ledger commit", self.inner.commit(entry, amount, now))
            .await
    }
}

impl SessionLedger for Deadlined<dyn SessionLedger> {
    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn SessionLedger>::admit(
            self, entry, amount, limits, now,
        ))
    }
    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(Deadlined::<dyn SessionLedger>::record(
            self, entry, amount, scopes, now,
        ))
    }
    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(Deadlined::<dyn SessionLedger>::retract(self, entry, scopes))
    }
    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(Deadlined::<dyn SessionLedger>::total(
            self, scope, window, now,
        ))
    }
    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn SessionLedger>::hit(
            self, scope, max, window, now,
        ))
    }
    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn SessionLedger>::reserve(
            self, entry, amount, limits, until, now,
        ))
    }
    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(Deadlined::<dyn SessionLedger>::release(self, entry))
    }
    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        Box::pin(Deadlined::<dyn SessionLedger>::commit(
            self, entry, amount, now,
        ))
    }
}

impl Deadlined<dyn OperationStore> {
    /// [`OperationStore::put`] under the deadline.
    pub(crate) async fn put(&self, record: OperationRecord) -> StoreResult<()> {
        self.timed("operation put", self.inner.put(record)).await
    }
    /// [`OperationStore::get`] under the deadline.
    pub(crate) async fn get(&self, id: &str) -> StoreResult<Option<OperationRecord>> {
        self.timed("operation get", OperationStore::get(&*self.inner, id))
            .await
    }
}

impl OperationStore for Deadlined<dyn OperationStore> {
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>> {
        Box::pin(Deadlined::<dyn OperationStore>::put(self, record))
    }
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>> {
        Box::pin(Deadlined::<dyn OperationStore>::get(self, id))
    }
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use super::*;
    use crate::outcome::Status;
    use crate::store::MemoryStore;
    use crate::store::fault::{FaultyStore, StoreOp};

    /// A store that does not answer the pair within the deadline: both halves are errors that
    /// name the operation and the deadline, and the wait ends at the deadline.
    #[tokio::test]
    async fn a_pair_without_an_answer_is_late_on_both_halves() {
        let memory = Arc::new(MemoryStore::new());
        let faulty = Arc::new(FaultyStore::new(memory.clone()));
        faulty.stall(StoreOp::Complete, Duration::from_secs(30));
        let store: Arc<dyn IdempotencyStore> = faulty;
        let timed = Deadlined::new(store, Duration::from_millis(50));
        let key = ScopedKey {
            tenant: "acme".into(),
            subject: "alice".into(),
            tool: "transfer".into(),
            key: "k-1".into(),
        };
        let (lease, now) = (Duration::from_secs(60), SystemTime::now());
        let reserved = Deadlined::<dyn IdempotencyStore>::reserve(
            &timed, &key, "sha256:d", None, lease, lease, now,
        );
        let Reservation::Reserved { owner } = reserved.await.unwrap() else {
            panic!("a new key is reserved");
        };
        let record = OperationRecord {
            id: "op-1".into(),
            tenant: "acme".into(),
            subject: "alice".into(),
            tool: "transfer".into(),
            call_id: "c".into(),
            state: OperationState::Ok,
            outcome: None,
            arguments: Arc::new(serde_json::Value::Null),
            idempotency: Some(key.clone()),
            approval_id: None,
            updated_at_ms: 1,
        };
        let started = std::time::Instant::now();
        let (written, completed) = timed
            .complete_with_record(
                &key,
                &owner,
                StoredOutcome::new(Status::Ok),
                lease,
                now,
                record,
                &*memory,
            )
            .await;
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "ended at the deadline"
        );
        for err in [written.unwrap_err(), completed.unwrap_err()] {
            assert_eq!(
                err.to_string(),
                "store unavailable: idempotency complete with the operation record: no answer \
                 within 50 ms"
            );
        }
    }
}
