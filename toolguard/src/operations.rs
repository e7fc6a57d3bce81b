//! The operation-status query: what became of a state-changing call, especially one whose outcome
//! was unknown. It re-authorizes the caller, never re-executes, and may reconcile.

use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::audit::AuditEvent;
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::dispatcher::{Answer, Dispatcher, Trace, redact};
use crate::error::NotFoundClass;
use crate::outcome::Status;
use crate::stage::idempotency::LEASE_MARGIN;
use crate::stage::{Stage, Stop};
use crate::store::encode::millis;
use crate::store::{OperationRecord, OperationState, StoredOutcome};
use crate::tool::Reconciled;

/// What the operation-status query found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
pub enum OperationError {
    /// No such operation for this caller (missing and foreign look the same).
    #[error("operation not found")]
    NotFound,
    /// The caller may not use the tool any more.
    #[error("forbidden")]
    Forbidden,
    /// The operation store is unavailable.
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
        let mut t = Trace {
            stage: Stage::Authorize,
            operation_id: Some(operation_id.to_owned()),
            ..Trace::default()
        };
        let result = self.query_operation(principal, operation_id, &mut t).await;
        let answer = match &result {
            Ok(report) => Answer {
                status: report
                    .outcome
                    .as_ref()
                    .map(|o| o.status)
                    .unwrap_or(Status::InProgress),
                reason: Some(format!("{:?}", report.state).to_lowercase()),
                message: None,
                output: None,
                approval: None,
                replayed: true,
                errors: Vec::new(),
            },
            Err((_, stop)) => Answer::from_result(Err(stop.clone())),
        };
        let tool = t.tool.clone().unwrap_or_default();
        self.finish(
            AuditEvent::OperationStatus,
            "",
            &tool,
            principal,
            t,
            answer,
            started,
        )
        .await;
        result.map_err(|(e, _)| e)
    }

    async fn query_operation(
        &self,
        principal: &Principal,
        operation_id: &str,
        t: &mut Trace,
    ) -> Result<OperationReport, (OperationError, Stop)> {
        let inner = &*self.inner;
        let not_found = |class: NotFoundClass| {
            (
                OperationError::NotFound,
                Stop::new(Status::NotFound, class.as_str(), "operation not found"),
            )
        };
        let record = match inner.operations.get(operation_id).await {
            Ok(Some(r)) => r,
            Ok(None) => return Err(not_found(NotFoundClass::Missing)),
            Err(_) => {
                return Err((
                    OperationError::Unavailable,
                    Stop::new(
                        Status::Unavailable,
                        "operation_store_unavailable",
                        "unavailable",
                    ),
                ));
            }
        };
        if record.tenant != principal.tenant {
            return Err(not_found(NotFoundClass::ForeignTenant));
        }
        if record.subject != principal.subject {
            return Err(not_found(NotFoundClass::ForeignSubject));
        }
        t.tool = Some(record.tool.clone());
        let Some(reg) = inner.tools.get(&record.tool) else {
            return Err(not_found(NotFoundClass::Missing));
        };
        let spec = reg.tool.spec();
        self.authorize_tool(principal, spec)
            .map_err(|s| (OperationError::Forbidden, s))?;
        t.arguments = Some(redact(spec, &record.arguments));
        let mut record = record;
        if crashed(&record, spec.timeout, inner.clock.now()) {
            // The process executing it died: past its deadline and lease, nothing will settle
            // it any more, so it may or may not have taken effect.
            let mut o = StoredOutcome::new(Status::OutcomeUnknown);
            o.reason = Some("lease_expired".to_owned());
            o.message = Some(
                "the operation was interrupted while executing; it may have taken effect"
                    .to_owned(),
            );
            o.operation_id = Some(record.id.clone());
            record.state = OperationState::OutcomeUnknown;
            record.outcome = Some(o);
        }
        if record.state != OperationState::OutcomeUnknown {
            return Ok(report(record, false));
        }
        t.stage = Stage::Execute;
        let Ok(decoded) = reg.tool.decode(record.arguments.clone()) else {
            return Ok(report(record, false));
        };
        let ctx = self.context(principal, &record.call_id, Some(record.id.clone()));
        let resolved = match decoded.reconcile(&ctx).await {
            Ok(Reconciled::Completed(value)) if reg.output.is_valid(&value) => {
                let mut o = StoredOutcome::new(Status::Ok);
                o.output = Some(value);
                o.reason = Some("reconciled".to_owned());
                Some((OperationState::Ok, o))
            }
            Ok(Reconciled::NotExecuted) => {
                let mut o = StoredOutcome::new(Status::Failed);
                o.reason = Some("not_executed".to_owned());
                o.message = Some("the operation did not take effect; it may be retried".to_owned());
                Some((OperationState::Failed, o))
            }
            _ => None,
        };
        let Some((state, mut outcome)) = resolved else {
            return Ok(report(record, false));
        };
        outcome.operation_id = Some(record.id.clone());
        let now = inner.clock.now();
        if let Some(key) = &record.idempotency {
            let stored = match state {
                OperationState::Ok => {
                    inner
                        .idempotency
                        .replace(
                            key,
                            &record.id,
                            outcome.clone(),
                            self.idempotency_ttl(spec),
                            now,
                        )
                        .await
                }
                _ => inner.idempotency.remove(key, &record.id).await,
            };
            match stored {
                Ok(true) => {}
                Ok(false) => tracing::warn!(
                    "the idempotency key now belongs to a newer call; its record was left alone"
                ),
                Err(err) => tracing::error!(error = %err, "reconciled outcome could not be stored"),
            }
        }
        record.state = state;
        record.outcome = Some(outcome);
        record.updated_at_ms = unix_millis(now);
        if let Err(err) = inner.operations.put(&record).await {
            tracing::error!(error = %err, "reconciled operation could not be stored");
        }
        Ok(report(record, true))
    }
}

/// Whether `record` was left `executing` by a process that died: its last update plus the tool's
/// deadline and the idempotency lease margin lies before `now`.
fn crashed(record: &OperationRecord, timeout: Duration, now: SystemTime) -> bool {
    let limit = record
        .updated_at_ms
        .saturating_add(millis(timeout.saturating_add(LEASE_MARGIN)));
    record.state == OperationState::Executing && limit <= unix_millis(now)
}

fn report(record: OperationRecord, reconciled: bool) -> OperationReport {
    OperationReport {
        operation_id: record.id,
        tool: record.tool,
        state: record.state,
        outcome: record.outcome,
        reconciled,
    }
}
