//! Work whose process died part-way, found and settled by whoever comes next. Several replicas
//! share the stores and any of them can be killed at any instant; what one leaves half done,
//! the next call, replay or status query that meets it settles, so that no key stays in flight
//! and no approval request stays open for good:
//!
//! - a key reserved by a call that died before its operation record was written: nothing ran
//!   (the record is written before the handler, and a holder never runs its handler once its
//!   lease could have run out, [`fenced`]); the key is freed for the next attempt; a key whose
//!   holder died after its record held the outcome gets it ([`abandoned`]);
//! - a key that still answers `pending_approval` for a request that was decided by a process
//!   that died: the request's operation record tells what became of it ([`pending_outcome`]);
//! - a reconciled operation that an approval executed: its request is closed
//!   ([`reconciled`]).

use std::time::{Duration, Instant};

use super::Stop;
use super::core::Core;
use super::idempotency::{Held, LEASE_MARGIN};
use crate::clock::unix_millis;
use crate::outcome::Status;
use crate::spec::ToolSpec;
use crate::store::encode::millis;
use crate::store::{ApprovalRequest, ApprovalState, OperationState, ScopedKey, StoredOutcome};

/// Lets a call run its tool only while it still holds its lease. A call's lease runs for the
/// tool's deadline plus [`LEASE_MARGIN`] from when it asked for its key; the handler runs under
/// the deadline. A call that wrote its `executing` record within half the margin finishes before
/// anyone can find its lease expired. One that took longer renews its lease first, which fails
/// if another attempt has meanwhile found no record and taken the key over (and then the call
/// does not run). An approved action, which holds no key, must have reached this point within
/// the margin of its decision ([`pending_outcome`] counts its decider alive that long).
pub(crate) async fn fenced<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    held: Option<&Held>,
    lease_from: Option<Instant>,
) -> Result<(), Stop> {
    let Some(from) = lease_from else {
        return Ok(());
    };
    let spent = from.elapsed();
    if spent < LEASE_MARGIN / 2 {
        return Ok(());
    }
    let kept = match held {
        Some(held) => {
            let lease = spec.timeout.saturating_add(LEASE_MARGIN);
            let store = &core.stores.idempotency;
            let renewed = store.renew(&held.key, &held.owner, lease, core.now()).await;
            renewed.unwrap_or(false)
        }
        None => spent < LEASE_MARGIN,
    };
    if kept {
        return Ok(());
    }
    Err(Stop::new(
        Status::Unavailable,
        "lease_spent",
        "the call took too long to reach its tool and no longer holds its key; nothing was \
         done, retry",
    ))
}

/// What a key left in flight by a holder whose lease ran out comes to, by its operation record.
enum Left {
    /// Nothing ran (no record, or a failure a retry may run again): the key is free.
    Freed,
    /// The record holds the outcome (the holder died before it settled the key): it is stored
    /// under the key now, and replayed.
    Outcome(StoredOutcome),
    /// The operation may have taken effect: `outcome_unknown`, for the status query to
    /// reconcile (also when a store does not answer).
    Unknown,
}

/// What the in-flight record of `key`, left by operation `operation_id` whose lease ran out,
/// comes to. A holder that died before it recorded its operation ran nothing: the key is taken
/// over while its lease is still expired (which fails if the holder renewed it, being alive
/// after all), then released. One that died after its record held the outcome (or the
/// `pending_approval` of the request it opened) left the rest to settle: the key gets it.
async fn abandoned<S: Send + Sync + 'static>(
    core: &Core<S>,
    key: &ScopedKey,
    operation_id: &str,
    spec: &ToolSpec,
) -> Left {
    let record = match core.stores.operations.get(operation_id).await {
        Ok(record) => record,
        Err(_) => return Left::Unknown,
    };
    let Some(record) = record else {
        return if free(core, key, spec).await {
            tracing::warn!(tool = %key.tool, operation = %operation_id, "a key abandoned before its operation was recorded was freed");
            Left::Freed
        } else {
            Left::Unknown
        };
    };
    let settled = matches!(
        record.state,
        OperationState::Ok
            | OperationState::Failed
            | OperationState::Rejected
            | OperationState::Pending
    );
    match record.outcome {
        Some(outcome) if settled => {
            let id = record.id.as_str();
            super::settle::key_of_operation(core, &record.tool, Some(key), id, &outcome).await;
            if super::settle::is_stored(outcome.status) {
                Left::Outcome(outcome)
            } else {
                Left::Freed
            }
        }
        _ => Left::Unknown,
    }
}

/// What a retry of `key` answers once its holder's lease ran out (operation `operation_id`):
/// `None` when the key was freed and may be reserved again, else the outcome to replay (the one
/// its record holds, or `outcome_unknown` naming the operation).
pub(crate) async fn left_by<S: Send + Sync + 'static>(
    core: &Core<S>,
    key: &ScopedKey,
    operation_id: Option<String>,
    spec: &ToolSpec,
) -> Option<StoredOutcome> {
    let left = match &operation_id {
        Some(op) => abandoned(core, key, op, spec).await,
        None => Left::Unknown,
    };
    match left {
        Left::Freed => None,
        Left::Outcome(stored) => Some(stored),
        Left::Unknown => Some(super::idempotency::lease_expired(
            operation_id.map(arcstr::ArcStr::from),
        )),
    }
}

/// Takes over the expired in-flight record of `key` and releases it.
async fn free<S: Send + Sync + 'static>(core: &Core<S>, key: &ScopedKey, spec: &ToolSpec) -> bool {
    let store = &core.stores.idempotency;
    let lease = spec.timeout.saturating_add(LEASE_MARGIN);
    match store.take_over(key, lease, core.now()).await {
        Ok(Some(owner)) => store.release(key, &owner).await.unwrap_or(false),
        Ok(None) => false,
        Err(err) => {
            tracing::error!(error = %err, "an abandoned key could not be taken over");
            false
        }
    }
}

/// What a key whose stored outcome is `pending_approval` on request `id` answers now: `None`
/// while the request waits for its decision (or its decision is still running); otherwise the
/// outcome it came to, also stored under the key so that later replays read it directly. A
/// request whose time ran out is closed as expired; one whose deciding process died is settled
/// from its operation record (`outcome_unknown`, to reconcile, while the record says
/// `executing`; expired when the action never reached execution).
pub(crate) async fn pending_outcome<S: Send + Sync + 'static>(
    core: &Core<S>,
    id: &str,
) -> Option<StoredOutcome> {
    let request = core.stores.approvals.get(id).await.ok()??;
    let now_ms = unix_millis(core.now());
    let closed = match request.state {
        ApprovalState::Pending if now_ms < request.expires_at_ms => return None,
        ApprovalState::Pending => {
            let closed = super::approval::close(
                core,
                request,
                ApprovalState::Expired,
                super::approval::expired_outcome,
            );
            return Some(closed.await.unwrap_or_else(|(_, o)| o));
        }
        ApprovalState::Expired => super::approval::expired_outcome(&request),
        ApprovalState::Rejected => super::approval::rejected_outcome(&request),
        ApprovalState::Executing if decider_may_live(core, &request, now_ms) => return None,
        ApprovalState::Executing | ApprovalState::Executed => {
            return decided(core, request).await;
        }
    };
    // A request closed by a process that died before it settled the key.
    settle_key(core, &request, &closed).await;
    Some(closed)
}

/// Whether the process deciding `request` may still be running its action: its last decision
/// is younger than the tool's deadline and the lease margin.
fn decider_may_live<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
    now_ms: u64,
) -> bool {
    let timeout = core
        .spec(&request.tool)
        .map_or(Duration::ZERO, |s| s.timeout);
    let decided_ms = request.decisions.iter().map(|d| d.at_ms).max().unwrap_or(0);
    let lease = millis(timeout.saturating_add(LEASE_MARGIN));
    now_ms < decided_ms.saturating_add(lease)
}

/// The outcome of an approved request whose deciding process is gone, from its operation
/// record.
async fn decided<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: ApprovalRequest,
) -> Option<StoredOutcome> {
    let record = core
        .stores
        .operations
        .get(&request.operation_id)
        .await
        .ok()??;
    match record.state {
        OperationState::Executing | OperationState::OutcomeUnknown => {
            Some(super::idempotency::lease_expired(Some(record.id.clone())))
        }
        OperationState::Pending => {
            // The decision died before the action reached its tool: nothing ran.
            let closed = super::approval::close(core, request, ApprovalState::Expired, |r| {
                super::approval::closed_outcome(
                    r,
                    Status::ApprovalExpired,
                    "decision_interrupted",
                    "the approved action was interrupted before it ran; nothing was done, \
                     ask again",
                )
            });
            Some(closed.await.unwrap_or_else(|(_, o)| o))
        }
        OperationState::Ok | OperationState::Failed | OperationState::Rejected => {
            let outcome = record.outcome?;
            settle_key(core, &request, &outcome).await;
            close_executing(core, request, outcome.status).await;
            Some(outcome)
        }
    }
}

/// Closes the approval request `id` of an operation a status query reconciled to `status`:
/// `executed` when it took effect, else `expired` (the approved action never ran; a retry of
/// the call asks again).
pub(crate) async fn reconciled<S: Send + Sync + 'static>(core: &Core<S>, id: &str, status: Status) {
    match core.stores.approvals.get(id).await {
        Ok(Some(request)) => close_executing(core, request, status).await,
        Ok(None) => {}
        Err(err) => tracing::error!(error = %err, approval = %id, "approval request unreadable"),
    }
}

/// Moves a request left `executing` to `executed` (its action ran: `status` is `ok`) or
/// `expired`; a request in any other state is left alone.
async fn close_executing<S: Send + Sync + 'static>(
    core: &Core<S>,
    mut request: ApprovalRequest,
    status: Status,
) {
    if request.state != ApprovalState::Executing {
        return;
    }
    let version = request.version;
    request.state = if status == Status::Ok {
        ApprovalState::Executed
    } else {
        ApprovalState::Expired
    };
    let request = super::approval::with_host_seal(core, request);
    if !super::approval::settle_request(core, &request, version).await {
        tracing::warn!(approval = %request.id, "an interrupted approval request could not be closed");
        return;
    }
    super::approval::release_hold(&*core.stores.ledger, &request).await;
    // The pending gauge and the decision's latency were counted when the request was approved.
    let now_ms = core.notifiers.now_ms();
    let event = crate::notify::ApprovalEvent::closed(&request, status, now_ms);
    core.notifiers.emit(event);
}

/// Stores `outcome` under the key of `request`'s call (only that operation's record).
async fn settle_key<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
    outcome: &StoredOutcome,
) {
    let key = request.idempotency.as_ref();
    super::settle::key_of_operation(core, &request.tool, key, &request.operation_id, outcome).await;
}
