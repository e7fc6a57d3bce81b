//! Operation records: what became of a state-changing call, kept for the operation-status query
//! and reconciliation. Written `executing` before the handler runs (a store error then stops the
//! call: nothing runs unrecorded) and with the outcome when the call ends.

use std::sync::Arc;

use serde_json::Value;

use super::Stop;
use super::core::Core;
use super::trace::Trace;
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::mapped::mapped;
use crate::outcome::Status;
use crate::spec::ToolSpec;
use crate::store::{OperationRecord, OperationState, ScopedKey, StoredOutcome};

/// Writes the operation record of the call `t` describes; a store error stops the call.
pub(crate) async fn put<S: Send + Sync + 'static>(
    core: &Core<S>,
    principal: &Principal,
    spec: &ToolSpec,
    call_id: &str,
    t: &Trace,
    state: OperationState,
    outcome: Option<StoredOutcome>,
) -> Result<(), Stop> {
    match of(core, principal, spec, call_id, t, state, outcome) {
        Some(record) => store(core, record).await,
        None => Ok(()),
    }
}

/// The operation record of the call `t` describes (`None` for a call without an operation).
pub(crate) fn of<S: Send + Sync + 'static>(
    core: &Core<S>,
    principal: &Principal,
    spec: &ToolSpec,
    call_id: &str,
    t: &Trace,
    state: OperationState,
    outcome: Option<StoredOutcome>,
) -> Option<OperationRecord> {
    let id = t.operation_id.as_ref()?;
    let tool = t.tool_name(spec);
    Some(OperationRecord {
        id: id.clone(),
        tenant: principal.tenant.clone(),
        subject: principal.subject.clone(),
        tool: tool.clone(),
        call_id: call_id.to_owned(),
        state,
        outcome,
        arguments: t
            .arguments_for_operation
            .clone()
            .unwrap_or_else(|| Arc::new(Value::Null)),
        idempotency: t.idempotency_key.as_ref().map(|k| ScopedKey {
            tenant: principal.tenant.clone(),
            subject: principal.subject.clone(),
            tool,
            key: k.clone(),
        }),
        approval_id: t.approval_id.clone(),
        updated_at_ms: unix_millis(core.now()),
    })
}

/// Writes `record`; a store error stops the call.
pub(crate) fn store<S: Send + Sync + 'static>(
    core: &Core<S>,
    record: OperationRecord,
) -> impl Future<Output = Result<(), Stop>> + Send + '_ {
    mapped(write(core, record), |written| {
        written.map_err(|()| {
            Stop::new(
                Status::Unavailable,
                "operation_store_unavailable",
                "the operation store is unavailable; nothing was done",
            )
        })
    })
}

/// Writes `record` after the call's audit entry, retrying through a store fault
/// ([`super::retry`]; a record is put whole, so writing it twice changes nothing): a store error
/// that outlasts the retries is logged and the write goes on in the background while the call
/// goes on (`false`); a panicking store is logged (`false`).
pub(crate) async fn write_after<S: Send + Sync + 'static>(
    core: &Core<S>,
    record: OperationRecord,
) -> bool {
    let operations = core.stores.operations.clone();
    let (deadline, id) = (operations.deadline(), record.id.clone());
    let written = super::retry::now_or_later("operation record", deadline, move |_| {
        let (operations, record) = (operations.clone(), record.clone());
        async move { operations.put(record).await }
    });
    match super::execute::contained(written).await {
        Ok(Ok(())) => true,
        Ok(Err(err)) => {
            tracing::error!(error = %err, operation = %id, "operation record not written yet; retrying in the background");
            false
        }
        Err(_) => {
            tracing::error!("the operation store panicked; the record was not updated");
            false
        }
    }
}

/// Writes `record` (logging a store error). The record moves into the store's future at once,
/// so that the caller's future holds it once (the store's method is called when it is first
/// polled).
pub(crate) fn write<S: Send + Sync + 'static>(
    core: &Core<S>,
    record: OperationRecord,
) -> impl Future<Output = Result<(), ()>> + Send + '_ {
    let id = record.id.clone();
    mapped(core.stores.operations.put(record), move |put| {
        put.map_err(|err| {
            tracing::error!(error = %err, operation = %id, "operation record could not be written");
        })
    })
}

/// Sets the outcome of the existing record of operation `id` (approval decisions,
/// reconciliations), retrying through a store fault ([`super::retry`]). `false` when the store
/// did not answer in time: the write then goes on in the background.
pub(crate) async fn settle<S: Send + Sync + 'static>(
    core: &Core<S>,
    id: &str,
    stored: &StoredOutcome,
) -> bool {
    let operations = core.stores.operations.clone();
    let at_ms = unix_millis(core.now());
    let deadline = operations.deadline();
    let (owned_id, stored) = (id.to_owned(), stored.clone());
    let settled = super::retry::now_or_later("operation record", deadline, move |_| {
        let (operations, id, stored) = (operations.clone(), owned_id.clone(), stored.clone());
        async move { settle_record(&operations, &id, &stored, at_ms).await }
    });
    if let Err(err) = settled.await {
        tracing::error!(error = %err, operation = %id, "operation record not settled yet; retrying in the background");
        return false;
    }
    true
}

/// One attempt of [`settle`]'s write: the record of `id` given `stored` as its outcome.
async fn settle_record(
    operations: &crate::store::deadline::Deadlined<dyn crate::store::OperationStore>,
    id: &str,
    stored: &StoredOutcome,
    at_ms: u64,
) -> crate::store::StoreResult<()> {
    match operations.get(id).await? {
        Some(mut op) => {
            op.state = OperationState::from_status(stored.status);
            op.outcome = Some(stored.clone());
            op.updated_at_ms = at_ms;
            operations.put(op).await
        }
        None => Ok(()),
    }
}
