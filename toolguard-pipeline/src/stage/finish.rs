//! The terminal step of every entry point: the answer becomes the [`ToolOutcome`], exactly one
//! terminal audit entry is written, and then what the call settles (its key, its approval
//! request) and the operation record of an admitted call get its outcome (a panicking store or
//! sink is contained and logged). The entry comes first: a process that dies after it leaves a
//! key in flight, which is reported `outcome_unknown` and reconciled; one that dies before it
//! leaves no settled outcome that a retry could replay without an entry of the execution.

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use arcstr::ArcStr;

use super::Stage;
use super::core::Core;
use super::execute::{CatchUnwind, Panicked};
use super::trace::{Answer, Trace};
use crate::audit::{AuditEvent, AuditRecord};
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::mapped::{Mapped, mapped};
use crate::outcome::{Status, ToolOutcome};
use crate::store::OperationState;
use crate::tool::BoxFuture;

/// Longest untrusted tool name or call id, in characters, written to audit entries and spans.
pub const MAX_LABEL_CHARS: usize = 128;

/// `id` as an audit record holds it: shared when it fits in [`MAX_LABEL_CHARS`] characters,
/// else a capped copy.
fn capped_shared(id: ArcStr) -> ArcStr {
    match id.char_indices().nth(MAX_LABEL_CHARS) {
        Some(_) => capped(&id).into(),
        None => id,
    }
}

/// `s` cut to [`MAX_LABEL_CHARS`] characters.
pub(crate) fn capped(s: &str) -> String {
    match s.char_indices().nth(MAX_LABEL_CHARS) {
        Some((end, _)) => s[..end].to_owned(),
        None => s.to_owned(),
    }
}

/// Whom and what an entry is about. The call id and tool name are owned where the entry point
/// owns its call (`dispatch`): they move into the outcome without a copy.
pub(crate) struct Subject<'a> {
    pub(crate) event: AuditEvent,
    pub(crate) call_id: Cow<'a, str>,
    pub(crate) tool: Cow<'a, str>,
    pub(crate) principal: &'a Principal,
    pub(crate) started: Instant,
}

/// Records the outcome of the operation, writes the audit entry, metrics and span status.
///
/// A function returning an `async move` block rather than an `async fn`: an `async fn` keeps
/// its by-value arguments twice in its state (as passed and as moved into its body), and this
/// future is part of every call's.
#[allow(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold its by-value arguments twice in this future"
)]
pub(crate) fn finish<'a, S: Send + Sync + 'static>(
    core: &'a Core<S>,
    about: Subject<'a>,
    mut t: Trace,
    mut answer: Answer,
) -> impl Future<Output = ToolOutcome> + Send + 'a {
    async move {
        // The call's tool, looked up once (none for a call that named no registered tool).
        let registered = t.tool.as_deref().and_then(|name| core.tools.get(name));
        let spec = registered.map(|r| r.spec());
        if let Some(spec) = super::provenance::answered_by(core, spec, &answer) {
            super::provenance::record_answer(
                core,
                spec,
                about.principal,
                &about.call_id,
                &t,
                &mut answer,
            )
            .await;
        }
        let operation = spec.and_then(|spec| operation_record(core, spec, &about, &t, &answer));
        let settlement = t.settlement.take();
        let mut outcome = outcome(
            about.call_id.into_owned(),
            about.tool.into_owned(),
            answer,
            &t,
        );
        // The real not-found class stays in the audit trail; outside, every not_found is alike.
        let audit_reason = outcome.reason.clone();
        if outcome.status == Status::NotFound {
            outcome.reason = None;
        }
        let record = AuditRecord {
            event: about.event,
            time_ms: unix_millis(core.now()),
            tenant: about.principal.tenant.clone(),
            subject: about.principal.subject.clone(),
            session: about.principal.session_id.clone(),
            // A registered tool's name is the registry's; an unknown one is copied, capped.
            tool: match &t.tool {
                Some(name) => name.clone(),
                None => capped(&outcome.tool).into(),
            },
            // The handler's context shares the call id it was given, when the call got that far.
            call_id: match t.call_id {
                Some(id) => capped_shared(id),
                None => capped(&outcome.call_id).into(),
            },
            operation_id: t.operation_id,
            idempotency_key: t.idempotency_key,
            stage: t.stage,
            status: Some(outcome.status),
            reason: audit_reason,
            request_digest: t.request_digest,
            arguments: t.arguments,
            modifications: t.modifications,
            approval_id: t
                .approval_id
                .or_else(|| outcome.approval.as_ref().map(|a| a.approval_id.clone())),
            approver: t.approver,
            replayed: outcome.replayed,
            duration_us: u64::try_from(about.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            sources: t.sources.into_iter().map(|s| s.id).collect(),
            origins: t.origins,
        };
        let seen = core.detector.as_ref().and_then(|_| {
            Some(crate::stage::detect::Observation::of(
                &record,
                spec?,
                core.now(),
            ))
        });
        let read_only = spec.is_some_and(|s| s.read_only);
        let executed = !read_only && !outcome.replayed && t.stage >= Stage::Execute;
        outcome.audit_seq = append(core, record, read_only, "").await;
        if outcome.audit_seq.is_none() {
            // No terminal entry: the call is left as a process that died here leaves it (its
            // key in flight, its operation `executing`), for a status query to settle.
            unrecorded(&mut outcome, executed);
        } else if let Some(after) = after_audit(core, settlement, operation) {
            after.await;
        }
        registered
            .map_or(&core.unknown_metrics, |r| &r.metrics)
            .call_finished(outcome.status);
        tracing::Span::current().record("toolguard.status", outcome.status.as_str());
        if let Some(mut seen) = seen {
            seen.audit_seq = outcome.audit_seq;
            // Boxed: only a dispatcher with a detector gets here, and the detection's state would
            // otherwise enlarge every call's future.
            Box::pin(crate::stage::detect::observe(core, seen)).await;
        }
        outcome
    }
}

/// The answer of a call whose terminal audit entry could not be written (the sink failed past
/// its own retries): nothing leaves the pipeline that the trail does not hold. An action that
/// may have run is `outcome_unknown`, its result withheld: a status query reconciles its
/// operation, with an entry of its own. A result that changed nothing (a read, a replay) is
/// withheld as `unavailable`, to ask for again. A refusal stands: it did nothing.
fn unrecorded(outcome: &mut ToolOutcome, executed: bool) {
    let status = if executed {
        Status::OutcomeUnknown
    } else if outcome.output.is_some() {
        Status::Unavailable
    } else {
        return;
    };
    outcome.status = status;
    outcome.reason = Some(crate::outcome::Reason::AuditUnavailable);
    outcome.output = None;
    outcome.message = Some(
        if executed {
            "the action may have taken effect, but its audit entry could not be written; \
             query the operation status"
        } else {
            "the result is withheld: its audit entry could not be written; nothing was \
             changed, retry"
        }
        .to_owned(),
    );
}

/// The operation record of an admitted call (none for a replay or a call that was never
/// admitted), written after the audit entry with the key's settlement (see `settle`): the
/// record says what the trail already holds.
fn operation_record<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &crate::spec::ToolSpec,
    about: &Subject<'_>,
    t: &Trace,
    answer: &Answer,
) -> Option<crate::store::OperationRecord> {
    if !t.admitted || answer.replayed {
        return None;
    }
    super::record::of(
        core,
        about.principal,
        spec,
        &about.call_id,
        t,
        OperationState::from_status(answer.status),
        Some(answer.stored(t.operation_id.as_ref())),
    )
}

/// What follows the terminal entry: the operation record, then the key's (or request's)
/// settlement ([`Settlement::apply`](super::settle::Settlement::apply) writes both). The record
/// comes first: a status query settles a key still in flight from a record that already holds
/// the outcome. Each runs contained: a panicking store is logged, the outcome still answers.
///
/// `None` when there is nothing to write (a read, a refusal): no future is made. Otherwise the
/// writes' state is boxed, so that the terminal step of every call holds a pointer, not the
/// state of the writes only some calls make (1.4 KB, copied with that step's future on every
/// call).
fn after_audit<S: Send + Sync + 'static>(
    core: &Core<S>,
    settlement: Option<super::settle::Settlement>,
    operation: Option<crate::store::OperationRecord>,
) -> Option<AfterAudit<'_>> {
    let (writes, panicked): (BoxFuture<'_, ()>, OnPanic) = match (settlement, operation) {
        // Boxed by `apply` already.
        (Some(settlement), operation) => (settlement.apply(core, operation), |done| {
            if done.is_err() {
                tracing::error!(
                    "a store panicked while the call settled; its record or key was not settled"
                );
            }
        }),
        (None, Some(record)) => (
            Box::pin(mapped(super::record::write(core, record), drop)),
            |done| {
                if done.is_err() {
                    tracing::error!("the operation store panicked; the record was not updated");
                }
            },
        ),
        (None, None) => return None,
    };
    Some(mapped(super::execute::contained(writes), panicked))
}

/// The writes that follow a terminal entry, contained, with what to log if a store panics.
type AfterAudit<'a> = Mapped<CatchUnwind<BoxFuture<'a, ()>>, OnPanic>;

/// What logs a panic of the writes after a terminal entry.
type OnPanic = fn(Result<(), Panicked>);

/// Appends the call's terminal entry; its sequence number, or `None` (logged) when the sink
/// failed. A panic is caught in the sink's synchronous part (a sink in memory does all its work
/// there) as in its future. A read-only tool's call changed nothing: its entry need not wait for
/// the disk.
///
/// The sink is called here, not in an `async` block: the record moves into the sink once, not
/// first through the states of this step's futures. `kind` names the entry in the logs
/// (`"detection "`, or `""` for a call's own).
pub(crate) fn append<'a, S: Send + Sync + 'static>(
    core: &'a Core<S>,
    record: crate::audit::AuditRecord,
    read_only: bool,
    kind: &'static str,
) -> impl Future<Output = Option<u64>> + Send + 'a {
    let sink = &core.audit;
    let appending = std::panic::catch_unwind(AssertUnwindSafe(move || {
        if read_only {
            sink.append_unsynced(record)
        } else {
            sink.append_inline(record)
        }
    }));
    async move {
        let appended = match appending {
            Ok(appending) => super::execute::contained(appending).await,
            Err(_) => Err(Panicked),
        };
        match appended {
            Ok(Ok(seq)) => Some(seq),
            Ok(Err(err)) => {
                tracing::error!(error = %err, "{kind}audit entry could not be written");
                None
            }
            Err(_) => {
                tracing::error!("the audit sink panicked; the {kind}entry was not written");
                None
            }
        }
    }
}

fn outcome(call_id: String, tool: String, answer: Answer, t: &Trace) -> ToolOutcome {
    let mut outcome = ToolOutcome::new(call_id, tool, answer.status);
    outcome.reason = answer.reason;
    outcome.message = answer.message;
    outcome.output = answer.output;
    outcome.approval = answer.approval;
    outcome.replayed = answer.replayed;
    outcome.errors = answer.errors;
    outcome.retry_after_ms = answer
        .retry_after
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    outcome.operation_id = t.operation_id.clone();
    outcome
}
