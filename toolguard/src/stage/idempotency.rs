//! Idempotency: one execution per (tenant, subject, tool, key). A stored outcome is replayed, a
//! reused key with other arguments conflicts, a key still executing is `in_progress`, and a key
//! whose holder vanished mid-execution is `outcome_unknown` until reconciled.

use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::Stop;
use crate::call::{Principal, ToolCall};
use crate::outcome::Status;
use crate::spec::{KeyReuse, Risk, ToolSpec};
use crate::store::{IdempotencyStore, RecordState, Reservation, ScopedKey, StoredOutcome};

/// Default lifetime of an idempotency record.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// How often a caller that waits for an in-flight call with its key looks again.
pub const WAIT_POLL: Duration = Duration::from_millis(10);

/// Extra lease time beyond the tool's deadline.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// Longest wait for one store operation (see [`crate::store::STORE_DEADLINE`]).
pub use crate::store::STORE_DEADLINE;
use crate::store::within_deadline;

/// A reservation the call holds until it settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The key's scope.
    pub key: ScopedKey,
    /// Owner token.
    pub owner: String,
}

/// Whether the call goes on, and holding which key.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// The call goes on; `None` when it has no key.
    Proceed(Option<Held>),
    /// A stored outcome is returned; nothing executes.
    Replay(StoredOutcome),
}

/// Whether a host-supplied key is acceptable.
pub fn valid_host_key(key: &str) -> bool {
    (1..=200).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// The key of a call: the host's, else the model's argument field. State-changing tools that are
/// idempotent or of high risk must have one.
pub fn extract_key(spec: &ToolSpec, call: &ToolCall, args: &Value) -> Result<Option<String>, Stop> {
    let from_args = spec
        .idempotency_key_field
        .as_ref()
        .and_then(|f| args.get(f))
        .and_then(|v| v.as_str().map(str::to_owned));
    let key = match &call.idempotency_key {
        Some(k) if !valid_host_key(k) => {
            return Err(Stop::new(
                Status::InvalidArguments,
                "invalid_idempotency_key",
                "the idempotency key is not acceptable",
            ));
        }
        Some(k) => Some(k.clone()),
        None => from_args,
    };
    let needs_key = !spec.read_only && (spec.idempotent || spec.risk >= Risk::High);
    if key.is_none() && needs_key {
        return Err(Stop::new(
            Status::InvalidArguments,
            "missing_idempotency_key",
            "this tool changes state and needs an idempotency key",
        ));
    }
    Ok(key)
}

/// Reserves `key` or decides from its existing record.
#[allow(clippy::too_many_arguments)]
pub async fn reserve(
    store: &dyn IdempotencyStore,
    spec: &ToolSpec,
    principal: &Principal,
    key: Option<String>,
    request_digest: &str,
    operation_id: Option<&str>,
    ttl: Duration,
    now: SystemTime,
    fail_open: bool,
) -> Result<Admission, Stop> {
    let Some(key) = key else {
        return Ok(Admission::Proceed(None));
    };
    let scoped = ScopedKey {
        tenant: principal.tenant.clone(),
        subject: principal.subject.clone(),
        tool: spec.name.clone(),
        key,
    };
    let lease = spec.timeout + LEASE_MARGIN;
    let reservation = match within_deadline(store.reserve(
        &scoped,
        request_digest,
        operation_id,
        lease,
        ttl,
        now,
    ))
    .await
    {
        Ok(r) => r,
        Err(_) if fail_open && spec.read_only => return Ok(Admission::Proceed(None)),
        Err(_) => {
            return Err(Stop::new(
                Status::Unavailable,
                "idempotency_store_unavailable",
                "the idempotency store is unavailable; nothing was done",
            ));
        }
    };
    let record = match reservation {
        Reservation::Reserved { owner } => {
            return Ok(Admission::Proceed(Some(Held { key: scoped, owner })));
        }
        Reservation::Existing(record) => record,
    };
    let same_request = record.request_digest == request_digest;
    if !same_request && spec.key_reuse == KeyReuse::Conflict {
        return Err(Stop::new(
            Status::IdempotencyConflict,
            "idempotency_conflict",
            "this idempotency key was used for a different request",
        ));
    }
    match record.state {
        RecordState::Done { outcome } => Ok(Admission::Replay(outcome)),
        RecordState::InFlight { lease_until_ms, .. }
            if lease_until_ms > crate::clock::unix_millis(now) =>
        {
            Err(Stop::new(
                Status::InProgress,
                "in_progress",
                "a call with this idempotency key is still executing",
            ))
        }
        RecordState::InFlight { .. } => {
            let mut out = StoredOutcome::new(Status::OutcomeUnknown);
            out.reason = Some("lease_expired".to_owned());
            out.message = Some(
                "an earlier attempt may have taken effect; query the operation status".to_owned(),
            );
            out.operation_id = record.operation_id;
            Ok(Admission::Replay(out))
        }
    }
}

/// Whether an outcome is stored under the key (and replayed) rather than released.
pub fn is_stored(status: Status) -> bool {
    matches!(
        status,
        Status::Ok
            | Status::PendingApproval
            | Status::ApprovalRejected
            | Status::ApprovalExpired
            | Status::OutcomeUnknown
    )
}

/// Settles a reservation: stores a final outcome, or releases the key so a retry executes.
pub async fn settle(
    store: &dyn IdempotencyStore,
    held: Option<Held>,
    outcome: &StoredOutcome,
    ttl: Duration,
    now: SystemTime,
) {
    let Some(held) = held else { return };
    let result = if is_stored(outcome.status) {
        within_deadline(store.complete(&held.key, &held.owner, outcome.clone(), ttl, now)).await
    } else {
        within_deadline(store.release(&held.key, &held.owner)).await
    };
    match result {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(tool = %held.key.tool, "idempotency lease was lost before the call settled")
        }
        Err(err) => {
            tracing::error!(tool = %held.key.tool, error = %err, "idempotency record could not be settled")
        }
    }
}

/// The arguments that identify the action: `args` without the idempotency-key field.
pub fn action_arguments(spec: &ToolSpec, args: &Value) -> Value {
    let mut out = args.clone();
    if let (Some(field), Value::Object(map)) = (&spec.idempotency_key_field, &mut out) {
        map.remove(field);
    }
    out
}

/// The stored outcome of this very request under the caller's key, if there is one (read only).
/// A different request under the key gives `None`, unless the tool lets the key win.
pub async fn stored_replay(
    store: &dyn IdempotencyStore,
    spec: &ToolSpec,
    principal: &Principal,
    key: Option<&str>,
    request_digest: &str,
    now: SystemTime,
) -> Option<StoredOutcome> {
    let key = key?;
    let scoped = ScopedKey {
        tenant: principal.tenant.clone(),
        subject: principal.subject.clone(),
        tool: spec.name.clone(),
        key: key.to_owned(),
    };
    let record = within_deadline(store.get(&scoped, now)).await.ok()??;
    let same = record.request_digest == request_digest || spec.key_reuse == KeyReuse::KeyWins;
    match record.state {
        RecordState::Done { outcome } if same => Some(outcome),
        _ => None,
    }
}
