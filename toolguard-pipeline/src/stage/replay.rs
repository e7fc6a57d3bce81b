//! Replay: a stored outcome answers a call again (`replayed: true`), and a deferred business or
//! policy failure gives way to the stored outcome of the same request under the caller's key.

use std::time::Duration;

use super::core::Core;
use super::trace::{Answer, Exit, Trace};
use super::{Stage, Stop};
use crate::call::Principal;
use crate::outcome::Status;
use crate::spec::KeyReuse;
use crate::spec::ToolSpec;
use crate::store::{RecordState, Reservation, ScopedKey, StoredOutcome};

/// The stored outcome of this request under the caller's own key, replayed (an earlier attempt
/// still holding the key: `in_progress`; one whose holder died mid-execution: `outcome_unknown`);
/// without one, `stop` at `stage`, which is then kept under the key for [`REFUSAL_KEPT`]: an
/// attempt of the same key already past its own checks replays the refusal instead of
/// executing, so that the caller told "nothing was done" is never contradicted by a concurrent
/// attempt.
pub(crate) async fn or_stop<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    principal: &Principal,
    stage: Stage,
    stop: Stop,
    t: &mut Trace,
) -> Exit {
    let digest = t.request_digest.as_deref().unwrap_or_default();
    let attempt = Attempt {
        spec,
        principal,
        key: t.idempotency_key.as_deref(),
        request_digest: digest,
        operation_id: t.operation_id.as_deref(),
    };
    match attempt.earlier_or_refused(core, &stop).await {
        Some(Ok(stored)) => {
            t.at(Stage::Idempotency);
            t.operation_id = stored.operation_id.clone().or(t.operation_id.take());
            Exit::answer(replayed(core, spec, stored).await)
        }
        Some(Err(in_flight)) => {
            t.at(Stage::Idempotency);
            Exit::Stop(in_flight)
        }
        None => {
            t.at(stage);
            Exit::Stop(stop)
        }
    }
}

/// How long a refusal is kept under the caller's key (replayed to later attempts of the key).
pub(crate) const REFUSAL_KEPT: Duration = Duration::from_secs(5);

/// A stored outcome returned again. A pending approval that has meanwhile been closed (expired,
/// or decided by a process that died before it settled the key) answers what it came to
/// ([`super::interrupted::pending_outcome`]).
pub(crate) async fn replayed<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    stored: StoredOutcome,
) -> Answer {
    core.metrics(&spec.name).idempotency_hit();
    // Boxed: the expiry path (a store read, then closing the request) is rare, and its state
    // would otherwise enlarge every call's future that may replay.
    if stored.status == Status::PendingApproval
        && let Some(ticket) = &stored.approval
        && let Some(expired) = Box::pin(super::interrupted::pending_outcome(
            core,
            &ticket.approval_id,
        ))
        .await
    {
        return Answer::replay(expired);
    }
    Answer::replay(stored)
}

/// A refused call's key.
struct Attempt<'a> {
    spec: &'a ToolSpec,
    principal: &'a Principal,
    key: Option<&'a str>,
    request_digest: &'a str,
    operation_id: Option<&'a str>,
}

impl Attempt<'_> {
    /// What an earlier attempt of the same request under the caller's key left, for a call a
    /// later stage refused (a limit its own earlier attempt used up): its stored outcome (`Ok`),
    /// the `outcome_unknown` of an attempt whose holder's lease ran out mid-execution (`Ok`: a
    /// process that died after the effect), or `in_progress` while the attempt still holds the
    /// key (`Err`). `None` without a key, for another request, and when no attempt holds the key
    /// (one that died before it recorded its operation ran nothing and is freed,
    /// `interrupted::abandoned`): the key then keeps `refusal` for [`REFUSAL_KEPT`]. A store
    /// that does not answer gives `unavailable` (`Err`), never the refusal.
    async fn earlier_or_refused<S: Send + Sync + 'static>(
        &self,
        core: &Core<S>,
        refusal: &Stop,
    ) -> Option<Result<StoredOutcome, Stop>> {
        let scoped = ScopedKey {
            tenant: self.principal.tenant.clone(),
            subject: self.principal.subject.clone(),
            tool: self.spec.name.as_str().into(),
            key: self.key?.into(),
        };
        let store = &core.stores.idempotency;
        for _ in 0..2 {
            let now = core.now();
            let digest = self.request_digest;
            let reserved = store
                .reserve(
                    &scoped,
                    digest,
                    self.operation_id,
                    REFUSAL_KEPT,
                    REFUSAL_KEPT,
                    now,
                )
                .await;
            // Without the store's answer, an earlier attempt may have run: the refusal would
            // tell the caller that nothing was done. The call is answered as unavailable, to
            // retry, instead.
            let Ok(reserved) = reserved else {
                return Some(Err(super::idempotency::store_unavailable()));
            };
            let record = match reserved {
                Reservation::Reserved { owner } => {
                    let mut kept = StoredOutcome::new(refusal.status);
                    kept.reason = refusal.reason.clone();
                    kept.message = refusal.message.clone();
                    let done = store
                        .complete(&scoped, &owner, kept, REFUSAL_KEPT, now)
                        .await;
                    if !matches!(done, Ok(true)) {
                        let _ = store.release(&scoped, &owner).await;
                    }
                    return None;
                }
                Reservation::Existing(record) => record,
            };
            let same = record.request_digest == digest || self.spec.key_reuse == KeyReuse::KeyWins;
            if !same {
                return None;
            }
            return Some(match record.state {
                RecordState::Done { outcome } => Ok(outcome),
                RecordState::InFlight { lease_until_ms, .. }
                    if lease_until_ms > crate::clock::unix_millis(now) =>
                {
                    Err(super::idempotency::in_progress())
                }
                RecordState::InFlight { .. } => {
                    let op = record.operation_id;
                    // Boxed: a key left by an interrupted call is rare.
                    match Box::pin(super::interrupted::left_by(core, &scoped, op, self.spec)).await
                    {
                        Some(stored) => Ok(stored),
                        None => continue,
                    }
                }
            });
        }
        None
    }
}
