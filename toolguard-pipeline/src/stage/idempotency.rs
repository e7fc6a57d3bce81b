//! Idempotency: one execution per (tenant, subject, tool, key). A stored outcome is replayed, a
//! reused key with other arguments conflicts, a key still executing is `in_progress`, and a key
//! whose holder vanished mid-execution is `outcome_unknown` until reconciled.
//!
//! In one process, calls with the same key and request share one attempt ([`super::flight`]):
//! only the first goes to the store; the others are `in_progress` at once or, if they wait,
//! replay its outcome. A hot key costs the store one reservation, not one per call.

use std::time::{Duration, Instant, SystemTime};

use arcstr::ArcStr;
use serde_json::Value;

use super::Stop;
use super::core::{Core, Registered};
use super::flight::{Boarding, Followed, Landing, Pilot};
pub(crate) use super::settle::Held;
use super::trace::{Exit, Trace};
use crate::call::{Principal, ToolCall};
use crate::outcome::Status;
use crate::spec::{KeyReuse, Risk, ToolSpec};
use crate::store::deadline::Deadlined;
use crate::store::{IdempotencyStore, RecordState, Reservation, ScopedKey, StoredOutcome};

/// How often a caller that waits for an in-flight call with its key looks again.
pub(crate) const WAIT_POLL: Duration = Duration::from_millis(10);

/// Extra lease time beyond the tool's deadline.
pub(crate) const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// Whether the call goes on, and holding which key.
#[derive(Debug, Clone, PartialEq)]
enum Admission {
    /// The call goes on; `None` when it has no key.
    Proceed(Option<Held>),
    /// A stored outcome is returned; nothing executes.
    Replay(StoredOutcome),
    /// The key is in flight under a holder whose lease ran out (operation `0`): it died, maybe
    /// mid-execution (`outcome_unknown`); what its operation record says settles the rest (see
    /// `interrupted::abandoned`).
    Abandoned(Option<String>),
}

/// The idempotency stage: reserves the call's key, waiting for a holder still executing when
/// the caller asked to. A stored outcome of the same request answers the call (replayed);
/// otherwise the call goes on holding the key (`None` without a key).
pub(crate) async fn admit<S: Send + Sync + 'static>(
    core: &Core<S>,
    call: &ToolCall,
    tool: &Registered<S>,
    principal: &Principal,
    t: &mut Trace,
) -> Result<Option<Held>, Exit> {
    let spec = tool.spec();
    let digest = t.request_digest.as_deref().unwrap_or_default();
    let args = t.arguments_for_operation.as_deref().unwrap_or(&Value::Null);
    let keys = core.keys.as_deref();
    let same = |stored: &str| {
        stored == digest || crate::digest::digest_matches(keys, stored, spec, args, principal)
    };
    // `None` inside: a wait too long to represent, i.e. no deadline.
    let wait_until = call.wait_in_progress.map(|w| Instant::now().checked_add(w));
    let waiting = || wait_until.is_some_and(|until| until.is_none_or(|u| Instant::now() < u));
    let reservation = Ask {
        spec,
        tool: t.tool_name(spec),
        principal,
        key: t.idempotency_key.as_ref(),
        request_digest: digest,
        same_request: &same,
        operation_id: t.operation_id.as_deref(),
        ttl: tool.idempotency_ttl,
        fail_open: core.fail_open_read_only,
    };
    // In this process, one call per key and request goes to the store (single flight).
    let pilot = match reservation.scoped() {
        Some(scoped) => match board(core, &scoped, digest, wait_until).await {
            Ok(pilot) => Some(pilot),
            Err(Some(stored)) => return Err(replay(core, spec, stored, t).await),
            Err(None) => return Err(Exit::Stop(in_progress())),
        },
        None => None,
    };
    // While waiting for a holder seen in flight, a poll the store does not answer in time is
    // polled again (until the wait runs out): the waiter never fails for the holder's load.
    let mut holder_seen = false;
    let mut freed = 0;
    let (admission, asked) = loop {
        let asked = Instant::now();
        match reserve(&core.stores.idempotency, &reservation, core.now()).await {
            Err(stop) if stop.status == Status::InProgress && waiting() => {
                holder_seen = true;
                tokio::time::sleep(WAIT_POLL).await;
            }
            Err(stop) if stop.status == Status::Unavailable && holder_seen && waiting() => {
                tokio::time::sleep(WAIT_POLL).await;
            }
            Ok(Admission::Abandoned(op)) => {
                let Some(scoped) = reservation.scoped() else {
                    break (Admission::Abandoned(op), asked);
                };
                let named = op.clone();
                // Boxed: a key left by an interrupted call is rare.
                match Box::pin(super::interrupted::left_by(core, &scoped, op, spec)).await {
                    Some(stored) => break (Admission::Replay(stored), asked),
                    // Reserved again (twice at most: each time someone else may win).
                    None if freed < 2 => freed += 1,
                    None => break (Admission::Abandoned(named), asked),
                }
            }
            other => break (other?, asked),
        }
    };
    let stored = match admission {
        Admission::Proceed(held) => {
            // Landed when the call settles its key (`settle::held`).
            t.pilot = pilot;
            // The lease runs from the reservation (see `interrupted::fenced`).
            t.lease_from = held.is_some().then_some(asked);
            return Ok(held);
        }
        Admission::Replay(stored) => stored,
        Admission::Abandoned(operation_id) => lease_expired(operation_id.map(ArcStr::from)),
    };
    if let Some(pilot) = pilot {
        pilot.land(Landing::Outcome(stored.clone()));
    }
    Err(replay(core, spec, stored, t).await)
}

/// Boards the flight of `scoped` and `digest` until this call is its pilot, or answers it with
/// the outcome a pilot stored (`Err(Some)`). A follower that does not wait, or whose wait runs
/// out, is `in_progress` (`Err(None)`); it never touches the store.
async fn board<S: Send + Sync + 'static>(
    core: &Core<S>,
    scoped: &ScopedKey,
    digest: &str,
    wait_until: Option<Option<Instant>>,
) -> Result<Pilot, Option<StoredOutcome>> {
    loop {
        let follower = match core.flights.board(scoped, digest) {
            Boarding::Pilot(pilot) => return Ok(pilot),
            Boarding::Follower(follower) => follower,
        };
        match follower.follow(wait_until).await {
            Followed::Landed(stored) => return Err(Some(stored)),
            Followed::Retry => {}
            Followed::InProgress => return Err(None),
        }
    }
}

/// A stored outcome answering the call (replayed), naming the original operation.
async fn replay<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    stored: StoredOutcome,
    t: &mut Trace,
) -> Exit {
    t.operation_id = stored.operation_id.clone().or(t.operation_id.take());
    Exit::answer(super::replay::replayed(core, spec, stored).await)
}

/// A call with the key is still executing.
pub(crate) fn in_progress() -> Stop {
    Stop::new(
        Status::InProgress,
        "in_progress",
        "a call with this idempotency key is still executing",
    )
}

/// What a reservation asks for.
struct Ask<'a> {
    spec: &'a ToolSpec,
    /// The tool's name, shared with the registry.
    tool: ArcStr,
    principal: &'a Principal,
    key: Option<&'a ArcStr>,
    request_digest: &'a str,
    /// Whether a stored digest is this request's (under any accepted key).
    same_request: &'a (dyn Fn(&str) -> bool + Sync),
    operation_id: Option<&'a str>,
    ttl: Duration,
    fail_open: bool,
}

impl Ask<'_> {
    /// The key in its namespace; `None` for a call without a key.
    fn scoped(&self) -> Option<ScopedKey> {
        Some(ScopedKey {
            tenant: self.principal.tenant.clone(),
            subject: self.principal.subject.clone(),
            tool: self.tool.clone(),
            key: self.key?.clone(),
        })
    }
}

/// Whether a host-supplied key is acceptable.
pub(crate) fn valid_host_key(key: &str) -> bool {
    (1..=200).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
}

/// Refuses an idempotency key, as the host or the model sent it (before sanitizing), that
/// contains anything a sanitizer step could strip or fold: two distinct keys must never become
/// one (see [`crate::keys::check_idempotency_key`]). Applies whatever pattern or kind the tool
/// declared for its key field. Nothing is reserved or executed for a refused key.
pub(crate) fn check_raw_key(spec: &ToolSpec, call: &ToolCall, raw: &Value) -> Result<(), Stop> {
    let field = spec.idempotency_key_field.as_deref();
    let (source, key) = match (&call.idempotency_key, field) {
        (Some(k), _) => ("the host-supplied idempotency key", k.as_str()),
        (None, Some(f)) => match raw.get(f).and_then(Value::as_str) {
            Some(k) => ("the idempotency key argument", k),
            None => return Ok(()),
        },
        (None, None) => return Ok(()),
    };
    crate::keys::check_idempotency_key(key).map_err(|code| {
        let name = field.unwrap_or("idempotency_key");
        Stop::new(
            Status::InvalidArguments,
            key_reason(code),
            format!(
                "{source} (`{name}`) is not acceptable ({code}): use 1 to {} characters from \
                 A-Z a-z 0-9 . _ ~ = -, at least one a letter or digit, e.g. a UUID; keys are never cleaned",
                crate::keys::MAX_IDEMPOTENCY_KEY_LEN
            ),
        )
    })
}

/// The stable reason code of a refused key.
fn key_reason(code: &str) -> &'static str {
    match code {
        "empty" => "idempotency_key_empty",
        "too_long" => "idempotency_key_too_long",
        "non_ascii" => "idempotency_key_non_ascii",
        "control_char" => "idempotency_key_control_char",
        "whitespace" => "idempotency_key_whitespace",
        "punctuation_only" => "idempotency_key_punctuation_only",
        _ => "idempotency_key_disallowed_char",
    }
}

/// The key of a call: the host's, else the model's argument field. State-changing tools that are
/// idempotent or of high risk must have one.
pub(crate) fn extract_key(
    spec: &ToolSpec,
    call: &ToolCall,
    args: &Value,
) -> Result<Option<String>, Stop> {
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
            "this tool changes state and needs an idempotency key, which the client application \
             sends with the call (over MCP: `_meta[\"toolguard/idempotencyKey\"]`), not the \
             model; nothing was done",
        ));
    }
    Ok(key)
}

/// Reserves the key or decides from its existing record.
async fn reserve(
    store: &Deadlined<dyn IdempotencyStore>,
    r: &Ask<'_>,
    now: SystemTime,
) -> Result<Admission, Stop> {
    let (spec, request_digest) = (r.spec, r.request_digest);
    let Some(scoped) = r.scoped() else {
        return Ok(Admission::Proceed(None));
    };
    let lease = spec.timeout + LEASE_MARGIN;
    let reservation = match store
        .reserve(&scoped, request_digest, r.operation_id, lease, r.ttl, now)
        .await
    {
        Ok(r) => r,
        Err(_) if r.fail_open && spec.read_only => return Ok(Admission::Proceed(None)),
        Err(_) => return Err(store_unavailable()),
    };
    let record = match reservation {
        Reservation::Reserved { owner } => {
            return Ok(Admission::Proceed(Some(Held { key: scoped, owner })));
        }
        Reservation::Existing(record) => record,
    };
    let same_request = (r.same_request)(&record.request_digest);
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
            Err(in_progress())
        }
        RecordState::InFlight { .. } => Ok(Admission::Abandoned(record.operation_id)),
    }
}

/// The idempotency store did not answer: the call stops before doing anything.
pub(crate) fn store_unavailable() -> Stop {
    Stop::new(
        Status::Unavailable,
        "idempotency_store_unavailable",
        "the idempotency store is unavailable; nothing was done",
    )
}

/// The outcome of a key whose holder's lease ran out mid-execution: `outcome_unknown` until
/// reconciled, naming the operation to query.
pub(crate) fn lease_expired(operation_id: Option<ArcStr>) -> StoredOutcome {
    let mut out = StoredOutcome::new(Status::OutcomeUnknown);
    out.reason = Some(crate::outcome::Reason::LeaseExpired);
    out.message =
        Some("an earlier attempt may have taken effect; query the operation status".to_owned());
    out.operation_id = operation_id;
    out
}
