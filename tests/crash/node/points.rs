//! Crash points: the process aborts (no destructor, no flush: as abrupt as SIGKILL for every
//! store) the n-th time it reaches a named point, as told by `TOOLGUARD_CRASH_POINT` and
//! `TOOLGUARD_CRASH_AT`. Each point sits on a seam the pipeline offers: a custom stage, a store
//! wrapper's hook, an audit sink wrapper, or the handler itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use toolguard::audit::{AuditError, AuditRecord, AuditSink};
use toolguard::store::{ApprovalRequest, ApprovalState};
use toolguard::{BoxFuture, CustomStage, Refusal, StageInput};
use toolguard_tests::delegate::Hook;

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

/// The points on the stores' seams, as a hook of a [`Delegate`](toolguard_tests::delegate::Delegate)
/// around the idempotency and approval stores: after a granted reservation, before a completion,
/// right after a decision marked a request executing.
pub(crate) struct StorePoints(pub(crate) Arc<Points>);

impl Hook for StorePoints {
    fn reserved(&self) {
        self.0.hit(Point::AfterReserve);
    }

    fn completing(&self) {
        self.0.hit(Point::BeforeRecord);
    }

    fn updated(&self, request: &ApprovalRequest, written: bool) {
        if request.state == ApprovalState::Executing && written {
            self.0.hit(Point::InDecision);
        }
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
