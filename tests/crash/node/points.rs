//! Crash points: the process aborts (no destructor, no flush: as abrupt as SIGKILL for every
//! store) the n-th time it reaches a named point, as told by `TOOLGUARD_CRASH_POINT` and
//! `TOOLGUARD_CRASH_AT`. Each point sits on a seam the pipeline offers: a custom stage, a store
//! wrapper, an audit sink wrapper, or the handler itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use toolguard::audit::{AuditError, AuditRecord, AuditSink};
use toolguard::store::{
    ApprovalRequest, ApprovalState, ApprovalStore, IdempotencyRecord, IdempotencyStore,
    OperationRecord, OperationStore, Reservation, ScopedKey, StoreResult, StoredOutcome,
};
use toolguard::{BoxFuture, CustomStage, Refusal, StageInput};

/// A named point where the process can be told to die.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    /// The last custom stage before the idempotency reservation (`StagePoint::AfterPolicy`).
    BeforeReserve,
    /// Right after the store granted the reservation.
    AfterReserve,
    /// In the handler, before its side effect.
    HandlerBeforeEffect,
    /// In the handler, after its side effect was logged, before it returns.
    HandlerAfterEffect,
    /// After the handler returned, before its outcome is recorded under the key.
    BeforeRecord,
    /// In an approval decision, right after the request was marked executing.
    InDecision,
    /// In an audit append, before the entry reaches the store.
    InAuditAppend,
}

/// Every point, by name.
pub(crate) const POINTS: [(&str, Point); 7] = [
    ("before_reserve", Point::BeforeReserve),
    ("after_reserve", Point::AfterReserve),
    ("handler_before_effect", Point::HandlerBeforeEffect),
    ("handler_after_effect", Point::HandlerAfterEffect),
    ("before_record", Point::BeforeRecord),
    ("in_decision", Point::InDecision),
    ("in_audit_append", Point::InAuditAppend),
];

/// The point this process dies at, if any, and how often it was reached.
#[derive(Debug)]
pub(crate) struct Points {
    armed: Option<(Point, u64)>,
    hits: AtomicU64,
}

impl Points {
    /// From `TOOLGUARD_CRASH_POINT` (a name of [`POINTS`]) and `TOOLGUARD_CRASH_AT` (default 1).
    pub(crate) fn from_env() -> Result<Self, String> {
        let armed = match std::env::var("TOOLGUARD_CRASH_POINT") {
            Ok(name) if !name.is_empty() => {
                let point = POINTS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, p)| *p)
                    .ok_or_else(|| format!("unknown crash point `{name}`"))?;
                let at = std::env::var("TOOLGUARD_CRASH_AT")
                    .ok()
                    .map(|v| {
                        v.parse::<u64>()
                            .map_err(|e| format!("TOOLGUARD_CRASH_AT: {e}"))
                    })
                    .transpose()?
                    .unwrap_or(1)
                    .max(1);
                Some((point, at))
            }
            _ => None,
        };
        Ok(Points {
            armed,
            hits: AtomicU64::new(0),
        })
    }

    /// Aborts the process if `point` is the armed one and this is its n-th hit.
    pub(crate) fn hit(&self, point: Point) {
        let Some((armed, at)) = self.armed else {
            return;
        };
        if armed == point && self.hits.fetch_add(1, Ordering::SeqCst) + 1 == at {
            eprintln!("crash point {point:?} reached: aborting");
            std::process::abort();
        }
    }
}

/// The custom stage at `StagePoint::AfterPolicy`: the last seam before the reservation.
#[derive(Debug)]
pub(crate) struct BeforeReserve(pub(crate) Arc<Points>);

impl CustomStage for BeforeReserve {
    fn check<'a>(&'a self, _input: StageInput<'a>) -> BoxFuture<'a, Result<(), Refusal>> {
        self.0.hit(Point::BeforeReserve);
        Box::pin(std::future::ready(Ok(())))
    }
}

/// An idempotency store that can die after a granted reservation or before a completion.
pub(crate) struct CrashIdempotency {
    pub(crate) inner: Arc<dyn IdempotencyStore>,
    pub(crate) points: Arc<Points>,
}

impl IdempotencyStore for CrashIdempotency {
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
            let r = self
                .inner
                .reserve(key, request_digest, operation_id, lease, ttl, now)
                .await;
            if let Ok(Reservation::Reserved { .. }) = &r {
                self.points.hit(Point::AfterReserve);
            }
            r
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
        self.points.hit(Point::BeforeRecord);
        self.inner.complete(key, owner, outcome, ttl, now)
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
        self.points.hit(Point::BeforeRecord);
        self.inner
            .complete_with_record(key, owner, outcome, ttl, now, record, operations)
    }

    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.inner.release(key, owner)
    }

    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.inner.renew(key, owner, lease, now)
    }

    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>> {
        self.inner.take_over(key, lease, now)
    }

    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.inner.replace(key, operation_id, outcome, ttl, now)
    }

    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        self.inner.remove(key, operation_id)
    }

    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>> {
        self.inner.get(key, now)
    }
}

/// An approval store that can die right after a decision marked a request executing.
pub(crate) struct CrashApprovals {
    pub(crate) inner: Arc<dyn ApprovalStore>,
    pub(crate) points: Arc<Points>,
}

impl ApprovalStore for CrashApprovals {
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>> {
        self.inner.create(request)
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>> {
        self.inner.get(id)
    }

    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>> {
        self.inner.pending(tenant)
    }

    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        Box::pin(async move {
            let written = self.inner.update(request, expected_version).await;
            if request.state == ApprovalState::Executing && matches!(written, Ok(true)) {
                self.points.hit(Point::InDecision);
            }
            written
        })
    }
}

/// An audit sink that can die inside an append, before the entry reaches the store.
pub(crate) struct CrashAudit<A> {
    pub(crate) inner: A,
    pub(crate) points: Arc<Points>,
}

impl<A: AuditSink> AuditSink for CrashAudit<A> {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        self.points.hit(Point::InAuditAppend);
        self.inner.append(record)
    }

    fn durable_unanchored(&self) -> bool {
        self.inner.durable_unanchored()
    }
}
