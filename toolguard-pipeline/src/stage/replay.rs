//! Replay: a stored outcome answers a call again (`replayed: true`), and a deferred business or
//! policy failure gives way to the stored outcome of the same request under the caller's key.

use std::time::SystemTime;

use arcstr::ArcStr;

use super::core::Core;
use super::trace::{Answer, Exit, Trace};
use super::{Stage, Stop};
use crate::call::Principal;
use crate::outcome::Status;
use crate::spec::KeyReuse;
use crate::spec::ToolSpec;
use crate::store::{RecordState, ScopedKey, StoredOutcome};

/// The stored outcome of this request under the caller's own key, replayed (an earlier attempt
/// still holding the key: `in_progress`; one whose holder died mid-execution: `outcome_unknown`);
/// without one, `stop` at `stage`.
pub(crate) async fn or_stop<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    principal: &Principal,
    stage: Stage,
    stop: Stop,
    t: &mut Trace,
) -> Exit {
    let digest = t.request_digest.as_deref().unwrap_or_default();
    let earlier = earlier_attempt(
        core,
        spec,
        principal,
        t.idempotency_key.as_deref(),
        digest,
        core.now(),
    )
    .await;
    match earlier {
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

/// What an earlier attempt of the same request under the caller's key left, for a call a later
/// stage refused (a limit its own earlier attempt used up): its stored outcome (`Ok`), the
/// `outcome_unknown` of an attempt whose holder's lease ran out mid-execution (`Ok`: a process
/// that died after the effect), or `in_progress` while the attempt still holds the key (`Err`).
/// `None` without a key, a record, or for another request, and for an attempt that died before
/// it recorded its operation (nothing ran; its key is freed, [`super::interrupted::abandoned`]).
pub(crate) async fn earlier_attempt<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    principal: &Principal,
    key: Option<&str>,
    request_digest: &str,
    now: SystemTime,
) -> Option<Result<StoredOutcome, Stop>> {
    let key = key?;
    let scoped = ScopedKey {
        tenant: principal.tenant.clone(),
        subject: principal.subject.clone(),
        tool: spec.name.as_str().into(),
        key: key.into(),
    };
    let record = core.stores.idempotency.get(&scoped, now).await.ok()??;
    let same = record.request_digest == request_digest || spec.key_reuse == KeyReuse::KeyWins;
    if !same {
        return None;
    }
    Some(match record.state {
        RecordState::Done { outcome } => Ok(outcome),
        RecordState::InFlight { lease_until_ms, .. }
            if lease_until_ms > crate::clock::unix_millis(now) =>
        {
            Err(super::idempotency::in_progress())
        }
        RecordState::InFlight { .. } => {
            use super::interrupted::{Left, abandoned};
            let left = match &record.operation_id {
                Some(op) => abandoned(core, &scoped, op, spec).await,
                None => Left::Unknown,
            };
            match left {
                Left::Freed => return None,
                Left::Outcome(stored) => Ok(stored),
                Left::Unknown => Ok(super::idempotency::lease_expired(
                    record.operation_id.map(ArcStr::from),
                )),
            }
        }
    })
}
