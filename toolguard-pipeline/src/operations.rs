//! The operation-status query: what became of a state-changing call, especially one whose outcome
//! was unknown. It re-authorizes the caller, never re-executes, and may reconcile.
//!
//! An entry point over the same stages as a call: load(operation) → principal(fresh) → permit →
//! [reconcile → settle] → audit. Every store call runs under the store deadline.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::audit::AuditEvent;
use crate::call::Principal;
use crate::dispatcher::Dispatcher;
use crate::error::NotFoundClass;
use crate::outcome::Status;
use crate::stage::core::Core;
use crate::stage::finish::{Subject, finish};
use crate::stage::trace::{Answer, Trace};
use crate::stage::{self, Stage, Stop};
use crate::store::{OperationRecord, OperationState, StoredOutcome};

/// What the operation-status query found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OperationReport {
    /// Operation id.
    pub operation_id: String,
    /// Tool name.
    pub tool: String,
    /// State.
    pub state: OperationState,
    /// Last stored outcome.
    pub outcome: Option<StoredOutcome>,
    /// The state was just resolved by the tool's reconcile function.
    pub reconciled: bool,
}

/// Why the query gave no report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OperationError {
    /// No such operation for this caller (missing and foreign look the same).
    #[error("operation not found")]
    NotFound,
    /// The caller may not use the tool any more (or is not authenticated freshly).
    #[error("forbidden")]
    Forbidden,
    /// The operation store (or the authorizer) is unavailable.
    #[error("operation store unavailable")]
    Unavailable,
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// The state of operation `operation_id`, for its owner. An operation left `executing` past
    /// its deadline and lease margin (its process died) is reported as `outcome_unknown`. An
    /// `outcome_unknown` operation is offered to the tool's reconcile function, and a resolved
    /// outcome is stored (so retries of the call replay it, or execute again when it did not take
    /// effect).
    pub async fn operation_status(
        &self,
        principal: &Principal,
        operation_id: &str,
    ) -> Result<OperationReport, OperationError> {
        let started = Instant::now();
        let core = &*self.core;
        let mut t = Trace {
            stage: Stage::Principal,
            operation_id: Some(operation_id.into()),
            ..Trace::default()
        };
        let run = query(core, principal, operation_id, &mut t);
        let result = stage::execute::contained(run)
            .await
            .unwrap_or_else(|_| Err(stage::panicked(core, &t)));
        let answer = match &result {
            Ok(report) => report_answer(report),
            Err(stop) => Answer::stopped(stop.clone()),
        };
        let tool = t.tool.as_deref().unwrap_or_default().to_owned();
        let about = Subject {
            event: AuditEvent::OperationStatus,
            call_id: "".into(),
            tool: tool.into(),
            principal,
            started,
        };
        finish(core, about, t, answer).await;
        result.map_err(|stop| match stop.status {
            Status::NotFound => OperationError::NotFound,
            Status::Forbidden => OperationError::Forbidden,
            _ => OperationError::Unavailable,
        })
    }
}

fn report_answer(report: &OperationReport) -> Answer {
    let mut stored = report
        .outcome
        .clone()
        .unwrap_or_else(|| StoredOutcome::new(Status::InProgress));
    stored.reason = Some(format!("{:?}", report.state).to_lowercase().into());
    stored.message = None;
    stored.output = None;
    stored.approval = None;
    Answer::replay(stored)
}

/// The stage sequence of a status query.
async fn query<S: Send + Sync + 'static>(
    core: &Core<S>,
    principal: &Principal,
    operation_id: &str,
    t: &mut Trace,
) -> Result<OperationReport, Stop> {
    // The caller is checked before anything is read.
    t.at(Stage::Principal);
    stage::principal::fresh(core, principal)?;
    let record = load(core, principal, operation_id).await?;
    t.tool = Some(record.tool.clone());
    let tool = core
        .tools
        .get(&*record.tool)
        .ok_or_else(|| not_found(NotFoundClass::Missing))?;
    let spec = tool.spec();
    stage::list::status_authority(core, principal, spec, t).await?;
    t.arguments = Some(stage::intent::redacted(spec, &record.arguments));
    let mut record = stage::reconcile::current(record, spec.timeout, core.now());
    if record.state != OperationState::OutcomeUnknown {
        settled_key(core, &record).await;
        return answered(core, spec, principal, t, report(record, false)).await;
    }
    if let Some(outcome) = kept_under_key(core, &record).await {
        // The call ended and its answer is under its key; only its record was left behind.
        stage::record::settle(core, &record.id, &outcome).await;
        record.state = OperationState::from_status(outcome.status);
        record.outcome = Some(outcome);
        return answered(core, spec, principal, t, report(record, false)).await;
    }
    t.at(Stage::Execute);
    let Some((state, outcome)) = stage::reconcile::run(core, tool, principal, &record).await else {
        return Ok(report(record, false));
    };
    // Stored (under the key, in the record, the approval request closed) after the audit entry.
    t.settlement = Some(stage::settle::Settlement::Reconciled {
        tool: record.tool.clone(),
        key: record.idempotency.clone(),
        operation_id: record.id.clone(),
        approval_id: record.approval_id.clone(),
        stored: outcome.clone(),
    });
    record.state = state;
    record.outcome = Some(outcome);
    answered(core, spec, principal, t, report(record, true)).await
}

/// The outcome the call of an operation whose record was left `executing` stored under its key
/// before its record was written: the call ended (a key's outcome is stored only after the
/// call's terminal audit entry), and its record's write failed or was lost with its process.
/// `None` without a key, or when the key holds no `ok` outcome of this very operation.
async fn kept_under_key<S: Send + Sync + 'static>(
    core: &Core<S>,
    record: &OperationRecord,
) -> Option<StoredOutcome> {
    let key = record.idempotency.as_ref()?;
    let kept = core.stores.idempotency.get(key, core.now()).await.ok()??;
    let crate::store::RecordState::Done { outcome } = kept.state else {
        return None;
    };
    let ours = outcome.operation_id.as_deref() == Some(record.id.as_str());
    (outcome.status == Status::Ok && ours).then_some(outcome)
}

/// A finished operation's outcome (or the `pending_approval` of the request it opened) under its
/// key, in case the process that recorded it died before it settled the key: the key would
/// otherwise stay in flight and answer `outcome_unknown` to every retry.
async fn settled_key<S: Send + Sync + 'static>(core: &Core<S>, record: &OperationRecord) {
    let finished = matches!(
        record.state,
        OperationState::Ok
            | OperationState::Failed
            | OperationState::Rejected
            | OperationState::Pending
    );
    if let (true, Some(key), Some(outcome)) = (finished, &record.idempotency, &record.outcome) {
        let settle =
            stage::settle::key_of_operation(core, &record.tool, Some(key), &record.id, outcome);
        settle.await;
    }
}

/// A report that carries an `ok` result hands it to the caller's session: the result of a tool
/// with untrusted output becomes a source there first (or the report is withheld,
/// `unavailable`), as on every path that hands untrusted content to a session.
async fn answered<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &crate::spec::ToolSpec,
    principal: &Principal,
    t: &Trace,
    report: OperationReport,
) -> Result<OperationReport, Stop> {
    if let Some(outcome) = &report.outcome
        && outcome.status == Status::Ok
        && let Some(output) = &outcome.output
    {
        let call_id = format!("{} (operation status)", report.operation_id);
        stage::provenance::record_output(core, spec, principal, &call_id, t, output).await?;
    }
    Ok(report)
}

/// The load step: the operation, if it is `principal`'s (missing and foreign look the same).
async fn load<S: Send + Sync + 'static>(
    core: &Core<S>,
    principal: &Principal,
    operation_id: &str,
) -> Result<OperationRecord, Stop> {
    let record = match core.stores.operations.get(operation_id).await {
        Ok(Some(r)) => r,
        Ok(None) => return Err(not_found(NotFoundClass::Missing)),
        Err(_) => {
            return Err(Stop::new(
                Status::Unavailable,
                "operation_store_unavailable",
                "unavailable",
            ));
        }
    };
    if record.tenant != principal.tenant {
        return Err(not_found(NotFoundClass::ForeignTenant));
    }
    if record.subject != principal.subject {
        return Err(not_found(NotFoundClass::ForeignSubject));
    }
    Ok(record)
}

fn not_found(class: NotFoundClass) -> Stop {
    Stop::new(Status::NotFound, class.as_str(), "operation not found")
}

fn report(record: OperationRecord, reconciled: bool) -> OperationReport {
    OperationReport {
        operation_id: record.id.to_string(),
        tool: record.tool.to_string(),
        state: record.state,
        outcome: record.outcome,
        reconciled,
    }
}
