//! Approval: a call that needs a human becomes an [`ApprovalRequest`] bound by digest to the exact
//! action, with a preview of the normalized arguments that will execute, and its amount reserved
//! in the session ledger until it is decided or expires (a `Deny` limit it does not fit refuses
//! the call before anything is stored). A decision loads the request, checks it is open and
//! sealed, its binding and everything current configuration decides (revisions, eligible roles,
//! approvers required, amount) unchanged and the approver eligible, and closes it (rejected,
//! expired or refused, releasing the reservation; or executing once enough approvers agreed,
//! where the execution commits it).

use std::time::SystemTime;

use serde_json::Value;

use super::Stop;
use super::core::Core;
use super::trace::{Answer, Exit};
use crate::call::{Principal, ToolCall};
use crate::clock::unix_millis;
use crate::digest::{approval_binding, approval_binding_is, canonical_json};
use crate::keys::HostKeys;
use crate::notify::{
    ApprovalEvent,
    ApprovalEventKind::{Approved, Opened},
    Notifiers,
};
use crate::outcome::{ApprovalTicket, Status};
use crate::risk::RiskPolicy;
use crate::spec::ToolSpec;
use crate::store::{
    ApprovalDecision, ApprovalRequest, ApprovalState, ApprovalStore, ScopeLimit, ScopedKey,
    SessionLedger, StoredOutcome,
};

/// The binding digest of a dispatcher without host keys: a plain SHA-256 over the document of
/// [`crate::digest::approval_binding`] (approval id, tool, tenant, requester and session, provider
/// path, operation and call ids, idempotency scope, request digest, tool and policy revisions,
/// amount, eligible roles, approvers required, creation, expiry, cause) and, for a decision, the
/// approver. Anyone with write access to the approval store can recompute it; with host keys the
/// dispatcher uses the keyed binding instead.
pub fn binding_digest(request: &ApprovalRequest, approver: Option<&str>) -> String {
    approval_binding(None, request, approver)
}

/// A human-readable preview of exactly what will execute (sensitive fields redacted).
pub(crate) fn preview(spec: &ToolSpec, redacted_args: &Value, requester: &Principal) -> String {
    let mut out = format!(
        "{} requested by {} (tenant {})",
        spec.name, requester.subject, requester.tenant
    );
    if let Value::Object(map) = redacted_args {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for k in keys {
            if Some(k) == spec.idempotency_key_field.as_ref() {
                continue;
            }
            out.push_str(&format!("\n  {k}: {}", canonical_json(&map[k])));
        }
    }
    out
}

/// Everything needed to open a request.
pub(crate) struct Pending<'a> {
    /// The tool.
    pub spec: &'a ToolSpec,
    /// The call.
    pub call: &'a ToolCall,
    /// The requester.
    pub principal: &'a Principal,
    /// Normalized (sanitized) arguments that will execute.
    pub arguments: &'a Value,
    /// Them, redacted, for the preview.
    pub redacted: &'a Value,
    /// Request digest.
    pub request_digest: &'a str,
    /// Operation id.
    pub operation_id: &'a str,
    /// Idempotency scope.
    pub idempotency: Option<ScopedKey>,
    /// Why approval is needed.
    pub cause: &'a str,
    /// The rule that held the call, as a sentence for the reviewer.
    pub cause_message: Option<String>,
    /// Amount measured.
    pub amount: Option<u64>,
    /// What the request holds in the ledger while it waits (see
    /// [`crate::risk::approval_holds`]).
    pub holds: &'a [ScopeLimit],
    /// The provenance sources in the model's context when the call was proposed.
    pub sources: &'a [crate::provenance::Source],
    /// Where each argument came from (in a session with sources).
    pub origins: &'a [crate::provenance::ArgumentOrigin],
}

/// The session ledger and approval store a request is opened in.
pub(crate) struct Backing<'a> {
    /// Where the pending amount is reserved.
    pub ledger: &'a dyn SessionLedger,
    /// Where the request is stored.
    pub approvals: &'a dyn ApprovalStore,
}

/// Stores a new approval request and returns its ticket.
pub(crate) async fn open(
    keys: Option<&HostKeys>,
    backing: Backing<'_>,
    policy: &RiskPolicy,
    notifiers: &Notifiers,
    p: Pending<'_>,
    now: SystemTime,
) -> Result<ApprovalTicket, Stop> {
    let created = unix_millis(now);
    let ttl_ms = u64::try_from(policy.current_approval_ttl().as_millis()).unwrap_or(u64::MAX);
    let expires = created.saturating_add(ttl_ms);
    let mut request = ApprovalRequest {
        id: format!("apr_{}", uuid::Uuid::new_v4().simple()),
        version: 0,
        state: ApprovalState::Pending,
        requester: p.principal.clone(),
        tool: p.spec.name.clone(),
        call_id: p.call.call_id.clone(),
        operation_id: p.operation_id.to_owned(),
        idempotency: p.idempotency,
        provider: p.call.provider.clone(),
        request_digest: p.request_digest.to_owned(),
        binding_digest: String::new(),
        arguments: p.arguments.clone(),
        preview: crate::provenance::with_origins(
            crate::provenance::with_sources(preview(p.spec, p.redacted, p.principal), p.sources),
            p.origins,
        ),
        eligible_roles: policy.eligible_roles(&p.spec.name),
        approvals_required: p.spec.approvals.max(1),
        decisions: Vec::new(),
        tool_revision: p.spec.revision,
        policy_revision: policy.current_revision(),
        amount: p.amount,
        cause: p.cause.to_owned(),
        cause_message: p.cause_message,
        created_at_ms: created,
        expires_at_ms: expires,
        seal: None,
        provenance: p
            .sources
            .iter()
            .map(crate::provenance::Source::without_values)
            .collect(),
        origins: p.origins.to_vec(),
    };
    request.binding_digest = approval_binding(keys, &request, None);
    let request = with_seal(keys, request);
    let amount = p.amount.unwrap_or(0);
    reserve(backing.ledger, &request, amount, p.holds, now).await?;
    if backing.approvals.create(&request).await.is_err() {
        release_hold(backing.ledger, &request).await;
        return Err(Stop::new(
            Status::Unavailable,
            "approval_store_unavailable",
            "approvals are unavailable; nothing was done",
        ));
    }
    crate::metrics::approval_pending(&request.tool, &request.requester.tenant, 1.0);
    notifiers.emit(ApprovalEvent::of(Opened, &request, None, created));
    Ok(ApprovalTicket {
        approval_id: request.id,
        preview: request.preview,
        expires_at_ms: expires,
    })
}

/// The ledger entry the request's reservation is held under: its operation id (the entry the
/// booked amount keeps), else its approval id.
pub(crate) fn hold_entry(request: &ApprovalRequest) -> &str {
    if request.operation_id.is_empty() {
        &request.id
    } else {
        &request.operation_id
    }
}

/// Holds `amount` for `request` in every scope of `holds` until the request expires. A
/// `Deny`-mode limit the amount does not fit refuses the call (`policy_denied`, reason
/// `session_limit` or `subject_limit`) before any request is stored; a ledger that does not
/// answer, or cannot hold amounts, makes it `unavailable`.
async fn reserve(
    ledger: &dyn SessionLedger,
    request: &ApprovalRequest,
    amount: u64,
    holds: &[ScopeLimit],
    now: SystemTime,
) -> Result<(), Stop> {
    let until = std::time::UNIX_EPOCH + std::time::Duration::from_millis(request.expires_at_ms);
    let entry = hold_entry(request);
    match ledger.reserve(entry, amount, holds, until, now).await {
        Ok(true) => Ok(()),
        Ok(false) => {
            let code = refused_limit(ledger, amount, holds, now).await;
            let message = format!(
                "{}, counting the amounts that wait for approval; nothing was done",
                crate::risk::limit_message(code)
            );
            Err(Stop::new(Status::PolicyDenied, code, message))
        }
        Err(_) => Err(crate::risk::unavailable()),
    }
}

/// Which bounded scope of `holds` has no room for `amount` (for the reason code).
async fn refused_limit(
    ledger: &dyn SessionLedger,
    amount: u64,
    holds: &[ScopeLimit],
    now: SystemTime,
) -> &'static str {
    let bounded = holds.iter().filter(|h| h.limit != u64::MAX);
    for hold in bounded.clone() {
        let total = ledger.total(&hold.scope, hold.window, now).await;
        if total.is_ok_and(|t| t.saturating_add(amount) > hold.limit) {
            return crate::risk::limit_code(&hold.scope);
        }
    }
    bounded
        .map(|h| crate::risk::limit_code(&h.scope))
        .next()
        .unwrap_or("session_limit")
}

/// Drops the reservation of `request` (rejected, expired, refused, or its action did not run);
/// nothing when it was committed. A reservation that cannot be dropped stops counting when the
/// request expires.
pub(crate) async fn release_hold(ledger: &dyn SessionLedger, request: &ApprovalRequest) {
    if let Err(err) = ledger.release(hold_entry(request)).await {
        tracing::warn!(approval = %request.id, error = %err, "approval reservation not released");
    }
}

/// A human's decision.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Verb<'r> {
    /// Approve the action.
    Approve,
    /// Reject it, for this reason.
    Reject(&'r str),
}

/// The load step of a decision: request `id`, if it belongs to `viewer`'s tenant.
pub(crate) async fn load<S: Send + Sync + 'static>(
    core: &Core<S>,
    viewer: &Principal,
    id: &str,
) -> Result<ApprovalRequest, Stop> {
    match core.stores.approvals.get(id).await {
        Ok(Some(r)) if r.requester.tenant == viewer.tenant => Ok(r),
        Ok(_) => Err(Stop::new(
            Status::NotFound,
            "missing",
            "approval request not found",
        )),
        Err(_) => Err(unavailable()),
    }
}

/// The check step: the request is still open and not expired. An expired request is closed now
/// and answers `approval_expired`.
pub(crate) async fn check_open<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
) -> Result<(), Exit> {
    let (status, reason, message) = match request.state {
        ApprovalState::Pending => {
            if unix_millis(core.now()) < request.expires_at_ms {
                return Ok(());
            }
            let closed = close(
                core,
                request.clone(),
                ApprovalState::Expired,
                expired_outcome,
            );
            return Err(Exit::answer(Answer::settled(
                closed.await.unwrap_or_else(|(_, o)| o),
            )));
        }
        ApprovalState::Executing => (
            Status::InProgress,
            "executing",
            "the approved action is executing",
        ),
        ApprovalState::Expired => (
            Status::ApprovalExpired,
            "expired",
            "this approval request expired; nothing was done",
        ),
        ApprovalState::Rejected => (
            Status::ApprovalRejected,
            "rejected",
            "this approval request was rejected; nothing was done",
        ),
        ApprovalState::Executed => (
            Status::PreconditionFailed,
            "already_decided",
            "this approval request was already decided",
        ),
    };
    Err(Exit::Stop(Stop::new(status, reason, message)))
}

/// The check step for the approver: not the requester, holding an eligible role, and not
/// deciding twice.
pub(crate) fn check_approver(request: &ApprovalRequest, approver: &Principal) -> Result<(), Stop> {
    if approver.subject == request.requester.subject {
        return Err(Stop::new(
            Status::Forbidden,
            "self_approval",
            "the requester cannot decide on their own request",
        ));
    }
    if !request.eligible_roles.iter().any(|r| approver.has_role(r)) {
        return Err(Stop::new(
            Status::Forbidden,
            "not_eligible",
            "the approver holds no eligible role",
        ));
    }
    if request
        .decisions
        .iter()
        .any(|d| d.approver == approver.subject)
    {
        return Err(Stop::new(
            Status::Forbidden,
            "duplicate_approver",
            "this approver already decided",
        ));
    }
    Ok(())
}

/// The binding check: the request's binding digest matches its fields (keyed with host keys),
/// and everything that decides whether or how the action executes is what current configuration
/// says for the re-normalized action: tool and policy revisions, eligible roles (as a set),
/// approvers required, and the amount measured from `normalized`. A configuration change since
/// the request opened voids it too (fail closed).
pub(crate) fn sealed<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
    spec: &ToolSpec,
    normalized: &Value,
) -> bool {
    let keys = core.keys.as_deref();
    let amount = crate::spec::measure_amount(spec, normalized).ok();
    approval_binding_is(keys, &request.binding_digest, request, None)
        && spec.revision == request.tool_revision
        && core.policy.current_revision() == request.policy_revision
        && role_set(&core.policy.eligible_roles(&spec.name)) == role_set(&request.eligible_roles)
        && spec.approvals.max(1) == request.approvals_required
        && amount == Some(request.amount)
}

fn role_set(roles: &[String]) -> std::collections::BTreeSet<&str> {
    roles.iter().map(String::as_str).collect()
}

/// `request` sealed under the dispatcher's host keys ([`with_seal`]).
pub(crate) fn with_host_seal<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: ApprovalRequest,
) -> ApprovalRequest {
    with_seal(core.keys.as_deref(), request)
}

/// `request` sealed under the host keys (every field but `version`), as written to the store;
/// unchanged without keys.
fn with_seal(keys: Option<&HostKeys>, request: ApprovalRequest) -> ApprovalRequest {
    match keys {
        Some(keys) => request.sealed(keys),
        None => request,
    }
}

/// Whether the stored record is the one the pipeline wrote: with host keys its seal verifies
/// (a write to the approval store alone cannot change any field that decides whether or how
/// the action executes); without keys there is nothing to verify.
pub(crate) fn seal_intact<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
) -> bool {
    match core.keys.as_deref() {
        Some(keys) => match crate::seal::verify_approval_seal(keys, request) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(approval = %request.id, reason = e.reason(), "approval seal refused");
                false
            }
        },
        None => true,
    }
}

/// Closes a request whose stored action no longer matches its seal (reason `binding_mismatch`).
pub(crate) async fn close_mismatched<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: ApprovalRequest,
) -> Exit {
    let closed = close(core, request, ApprovalState::Rejected, mismatch_outcome).await;
    Exit::answer(Answer::settled(closed.unwrap_or_else(|(_, o)| o)))
}

/// The decide step: records `approver`'s decision. A rejection closes the request; an approval
/// short of the required number answers `pending_approval`; the last required approval moves
/// the request to `executing` (and the call goes on to execute).
pub(crate) async fn decide<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &mut ApprovalRequest,
    approver: &Principal,
    verb: Verb<'_>,
) -> Result<(), Exit> {
    let reason = match verb {
        Verb::Approve => None,
        Verb::Reject(r) => Some(r.to_owned()),
    };
    request.decisions.push(ApprovalDecision {
        approver: approver.subject.to_string(),
        approve: reason.is_none(),
        at_ms: unix_millis(core.now()),
        digest: approval_binding(core.keys.as_deref(), request, Some(&approver.subject)),
        reason: reason.clone(),
    });
    if reason.is_some() {
        let closed = close(
            core,
            request.clone(),
            ApprovalState::Rejected,
            rejected_outcome,
        );
        let stored = closed.await.map_err(|(stop, _)| stop)?;
        return Err(Exit::answer(Answer::settled(stored)));
    }
    let version = request.version;
    let given = request.approvers().len();
    if given < request.approvals_required as usize {
        update(core, request, version).await?;
        let at = unix_millis(core.now());
        core.notifiers
            .emit(ApprovalEvent::of(Approved, request, None, at));
        let ticket = ApprovalTicket {
            approval_id: request.id.clone(),
            preview: request.preview.clone(),
            expires_at_ms: request.expires_at_ms,
        };
        let mut answer = Answer::pending(ticket);
        answer.message = Some(format!(
            "{given} of {} approvals given",
            request.approvals_required
        ));
        return Err(Exit::answer(answer));
    }
    request.state = ApprovalState::Executing;
    update(core, request, version).await?;
    request.version = version + 1;
    crate::metrics::approval_pending(&request.tool, &request.requester.tenant, -1.0);
    Ok(())
}

/// Writes `request` if its stored version is still `version`.
pub(crate) async fn update<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
    version: u64,
) -> Result<(), Stop> {
    let request = with_seal(core.keys.as_deref(), request.clone());
    match core.stores.approvals.update(&request, version).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(lost_race()),
        Err(_) => Err(unavailable()),
    }
}

/// Writes `request`, sealed and moved to the state its action came to, if its stored version is
/// still `version`, retrying through a store fault ([`super::retry`]); whether it is stored in
/// that state. A retry that finds the version moved on reads the request: an earlier attempt
/// may have written it before its answer was lost. A store that still fails after the deadline
/// gets the write again in the background ([`super::retry::now_or_later`]), so that a request
/// whose action ran is not left `executing` when no one asks about it again.
pub(crate) async fn settle_request<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
    version: u64,
) -> bool {
    let approvals = core.stores.approvals.clone();
    let (deadline, request) = (approvals.deadline(), request.clone());
    let written = super::retry::now_or_later("approval request", deadline, move |retried| {
        let (approvals, request) = (approvals.clone(), request.clone());
        async move { write_settled(&approvals, &request, version, retried).await }
    });
    written.await.unwrap_or(false)
}

/// One attempt of [`settle_request`]'s write.
async fn write_settled(
    approvals: &crate::store::deadline::Deadlined<dyn ApprovalStore>,
    request: &ApprovalRequest,
    version: u64,
    retried: bool,
) -> crate::store::StoreResult<bool> {
    match approvals.update(request, version).await {
        Ok(false) if retried => approvals
            .get(&request.id)
            .await
            .map(|now| now.is_some_and(|now| now.state == request.state)),
        answer => answer,
    }
}

/// Marks an executed request `executed` and settles its outcome under the call's key (the
/// operation record is the decision's own, written by `finish`; `recorded` tells whether it was
/// written in time, without which the key is left as it is).
pub(crate) async fn executed<S: Send + Sync + 'static>(
    core: &Core<S>,
    mut request: ApprovalRequest,
    answer: &Answer,
    recorded: bool,
) {
    let stored = answer.stored(Some(&request.operation_id.as_str().into()));
    let version = request.version;
    request.state = ApprovalState::Executed;
    request = with_seal(core.keys.as_deref(), request);
    if !settle_request(core, &request, version).await {
        tracing::error!(approval = %request.id, "approval request could not be marked executed");
    }
    release_hold(&*core.stores.ledger, &request).await;
    // A request whose reservation was already used (an earlier record put back in the store)
    // did not run now; the outcome stored for the call stays the one of the run that happened.
    // A key's outcome is never stored before the record that says the same: with the record
    // still unwritten (`recorded` false), the key keeps its pending outcome, which a retry
    // resolves from the record once it is written (or reconciles).
    if recorded && answer.reason.as_deref() != Some(RESERVATION_MISSING) {
        let key = request.idempotency.as_ref();
        let (tool, op) = (&request.tool, &request.operation_id);
        super::settle::key_of_operation(core, tool, key, op, &stored).await;
    }
    closed(core, &request, answer.status);
}

/// The reason of an approved action whose ledger reservation is gone: released, expired, or
/// already committed by an earlier run of the same request.
pub(crate) const RESERVATION_MISSING: &str = "reservation_missing";

/// Closes request `id` as expired if its time is up; returns the expired outcome then.
pub(crate) async fn expire_if_due<S: Send + Sync + 'static>(
    core: &Core<S>,
    id: &str,
) -> Option<StoredOutcome> {
    let request = core.stores.approvals.get(id).await.ok()??;
    match request.state {
        ApprovalState::Expired => Some(expired_outcome(&request)),
        ApprovalState::Pending if unix_millis(core.now()) >= request.expires_at_ms => Some(
            close(core, request, ApprovalState::Expired, expired_outcome)
                .await
                .unwrap_or_else(|(_, o)| o),
        ),
        _ => None,
    }
}

/// Moves `request` to a terminal state and settles the outcome for the call's retries. `Err`
/// carries the outcome when it could not be stored: another decision won the race, or the
/// store did not answer.
pub(crate) async fn close<S: Send + Sync + 'static>(
    core: &Core<S>,
    mut request: ApprovalRequest,
    state: ApprovalState,
    outcome: fn(&ApprovalRequest) -> StoredOutcome,
) -> Result<StoredOutcome, (Stop, StoredOutcome)> {
    let version = request.version;
    request.state = state;
    let stored = outcome(&request);
    if let Err(stop) = update(core, &request, version).await {
        return Err((stop, stored));
    }
    release_hold(&*core.stores.ledger, &request).await;
    let key = request.idempotency.as_ref();
    super::settle::operation(core, &request.tool, key, &request.operation_id, &stored).await;
    closed(core, &request, stored.status);
    Ok(stored)
}

/// Metrics and notification of a request that left the pending state with `status`.
pub(crate) fn closed<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
    status: Status,
) {
    let notifiers = &core.notifiers;
    let now_ms = notifiers.now_ms();
    if request.state != ApprovalState::Executed {
        crate::metrics::approval_pending(&request.tool, &request.requester.tenant, -1.0);
    }
    if request.state != ApprovalState::Expired {
        let decision = if request.state == ApprovalState::Rejected {
            "rejected"
        } else {
            "approved"
        };
        let seconds = now_ms.saturating_sub(request.created_at_ms) as f64 / 1000.0;
        crate::metrics::approval_latency(
            &request.tool,
            &request.requester.tenant,
            decision,
            seconds,
        );
    }
    notifiers.emit(ApprovalEvent::closed(request, status, now_ms));
}

/// The ownership check: the call's idempotency record still belongs to the request's
/// operation. A request whose opening call ended without it (the store answered the create
/// after the deadline, and the call released its key) is orphaned and never executes; a
/// retry of the call opens its own request. While the opening call has not yet stored its
/// `pending_approval` under the key (it does so after its audit entry), the decision waits:
/// `in_progress`, decide again shortly.
pub(crate) async fn owned<S: Send + Sync + 'static>(
    core: &Core<S>,
    request: &ApprovalRequest,
) -> Result<bool, Stop> {
    let Some(key) = &request.idempotency else {
        return Ok(true);
    };
    let record = match core.stores.idempotency.get(key, core.now()).await {
        Ok(record) => record,
        Err(_) => return Err(super::idempotency::store_unavailable()),
    };
    let Some(record) =
        record.filter(|r| r.operation_id.as_deref() == Some(request.operation_id.as_str()))
    else {
        return Ok(false);
    };
    match record.state {
        crate::store::RecordState::Done { .. } => Ok(true),
        crate::store::RecordState::InFlight { .. } => Err(Stop::new(
            Status::InProgress,
            "request_opening",
            "the call that opened this request is still settling; decide again shortly",
        )),
    }
}

pub(crate) fn closed_outcome(
    r: &ApprovalRequest,
    status: Status,
    reason: &str,
    message: &str,
) -> StoredOutcome {
    let mut o = StoredOutcome::new(status);
    o.reason = Some(reason.into());
    o.message = Some(message.to_owned());
    o.operation_id = Some(r.operation_id.as_str().into());
    o
}

pub(crate) fn expired_outcome(r: &ApprovalRequest) -> StoredOutcome {
    closed_outcome(
        r,
        Status::ApprovalExpired,
        "expired",
        "the approval request expired; nothing was done",
    )
}

pub(crate) fn rejected_outcome(r: &ApprovalRequest) -> StoredOutcome {
    closed_outcome(
        r,
        Status::ApprovalRejected,
        "rejected",
        "a human rejected this action; nothing was done",
    )
}

fn mismatch_outcome(r: &ApprovalRequest) -> StoredOutcome {
    closed_outcome(
        r,
        Status::ApprovalRejected,
        "binding_mismatch",
        "a human rejected this action; nothing was done",
    )
}

fn lost_race() -> Stop {
    Stop::new(
        Status::InProgress,
        "concurrent_decision",
        "another decision on this request is in progress",
    )
}

fn unavailable() -> Stop {
    Stop::new(
        Status::Unavailable,
        "approval_store_unavailable",
        "approvals are unavailable",
    )
}

/// The approval stage of a call the policy sends to a human: opens the request (bound to the
/// call's key, digest and operation) and answers `pending_approval`. Without an idempotency key
/// a retry could not find the request and would open another one: `policy_denied`.
pub(crate) async fn ask<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    call: &ToolCall,
    principal: &Principal,
    held: Option<ScopedKey>,
    decision: &crate::risk::PolicyDecision,
    t: &mut super::trace::Trace,
) -> Result<Answer, Stop> {
    let (Some(cause), Some(key)) = (&decision.approval_cause, held) else {
        return Err(Stop::new(
            Status::PolicyDenied,
            "approval_needs_idempotency_key",
            "this call needs a human's approval, which needs an idempotency key; nothing was done",
        ));
    };
    let redacted = t.arguments.as_deref().cloned().unwrap_or(Value::Null);
    let args = t
        .arguments_for_operation
        .as_deref()
        .cloned()
        .unwrap_or(Value::Null);
    let pending = Pending {
        spec,
        call,
        principal,
        arguments: &args,
        redacted: &redacted,
        request_digest: t.request_digest.as_deref().unwrap_or_default(),
        operation_id: t.operation_id.as_deref().unwrap_or_default(),
        idempotency: Some(key),
        cause,
        cause_message: hold_sentence(core, spec, decision, t),
        amount: decision.amount,
        sources: &t.sources,
        origins: &t.origins,
        holds: &decision.holds(principal, &spec.name),
    };
    let backing = Backing {
        ledger: &*core.stores.ledger,
        approvals: &*core.stores.approvals,
    };
    let ticket = open(
        core.keys.as_deref(),
        backing,
        &core.policy,
        &core.notifiers,
        pending,
        core.now(),
    )
    .await?;
    t.approval_id = Some(ticket.approval_id.clone());
    Ok(with_reason(Answer::pending(ticket), decision))
}

/// The sentence a reviewer reads under "why it waits": the risk policy's own (threshold and
/// amount, limit and what is left), the flow policy's (the untrusted content, the field), or
/// the cause's fixed sentence.
fn hold_sentence<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    decision: &crate::risk::PolicyDecision,
    t: &super::trace::Trace,
) -> Option<String> {
    let cause = decision.approval_cause.as_deref()?;
    if cause == crate::provenance::flow::CAUSE {
        let policy = core.policy.current_flow();
        return crate::provenance::flow::hold_reason(
            policy,
            &core.sanitizer,
            spec,
            t.arguments.as_deref(),
            &t.sources,
            &t.origins,
        );
    }
    decision
        .approval_message
        .clone()
        .or_else(|| crate::risk::cause_message(cause).map(str::to_owned))
}

/// A pending answer with the hold's reason: its code and, for the model and the reviewer, the
/// sentence that says which rule held it.
fn with_reason(mut answer: Answer, decision: &crate::risk::PolicyDecision) -> Answer {
    let Some(cause) = decision.approval_cause.as_deref() else {
        return answer;
    };
    answer.reason = Some(cause.into());
    let why = decision
        .approval_message
        .as_deref()
        .or_else(|| crate::risk::cause_message(cause));
    if let (Some(message), Some(why)) = (answer.message.as_mut(), why) {
        message.push_str(": ");
        message.push_str(why);
    }
    answer
}
