//! Reconciliation: an operation whose outcome is unknown is offered to the tool's `reconcile`
//! hook; a resolved outcome is settled (under its key and in its operation record) so retries
//! of the call replay it, or execute again when it did not take effect. An operation left
//! `executing` past its deadline and lease margin (its process died) counts as unknown.

use std::time::{Duration, SystemTime};

use super::core::{Core, Registered};
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::outcome::Status;
use crate::store::encode::millis;
use crate::store::{OperationRecord, OperationState, StoredOutcome};
use crate::tool::Reconciled;

/// `record` as it stands now: an operation whose executing process died is `outcome_unknown`.
pub(crate) fn current(
    mut record: OperationRecord,
    timeout: Duration,
    now: SystemTime,
) -> OperationRecord {
    if crashed(&record, timeout, now) {
        let mut o = StoredOutcome::new(Status::OutcomeUnknown);
        o.reason = Some(crate::outcome::Reason::LeaseExpired);
        o.message = Some(
            "the operation was interrupted while executing; it may have taken effect".to_owned(),
        );
        o.operation_id = Some(record.id.clone());
        record.state = OperationState::OutcomeUnknown;
        record.outcome = Some(o);
    }
    record
}

/// Whether `record` was left `executing` by a process that died: its last update plus the tool's
/// deadline and the idempotency lease margin lies before `now`.
fn crashed(record: &OperationRecord, timeout: Duration, now: SystemTime) -> bool {
    let limit = record.updated_at_ms.saturating_add(millis(
        timeout.saturating_add(super::idempotency::LEASE_MARGIN),
    ));
    record.state == OperationState::Executing && limit <= unix_millis(now)
}

/// The reconcile stage: asks the tool what became of an `outcome_unknown` operation. `None`
/// when the tool cannot tell (or its answer is outside the output contract).
pub(crate) async fn run<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &Registered<S>,
    principal: &Principal,
    record: &OperationRecord,
) -> Option<(OperationState, StoredOutcome)> {
    let decoded = tool.tool.decode_ref(&record.arguments).ok()?;
    let ctx = core.context(
        principal,
        record.call_id.as_str().into(),
        Some(record.id.clone()),
    );
    let (state, mut outcome) = match decoded.reconcile(&ctx).await {
        Ok(Reconciled::Completed(value)) if tool.output.is_valid(&value) => {
            let mut o = StoredOutcome::new(Status::Ok);
            o.output = Some(value);
            o.reason = Some(crate::outcome::Reason::ReconciledOutcome);
            (OperationState::Ok, o)
        }
        Ok(Reconciled::NotExecuted) => {
            let mut o = StoredOutcome::new(Status::Failed);
            o.reason = Some(crate::outcome::Reason::NotExecuted);
            o.message = Some("the operation did not take effect; it may be retried".to_owned());
            (OperationState::Failed, o)
        }
        _ => return None,
    };
    outcome.operation_id = Some(record.id.clone());
    Some((state, outcome))
}
