//! Settle: a call's outcome is stored under its idempotency key (so retries replay it) or the
//! key is freed (a handler error: a retry executes again). The direct path settles the key it
//! holds; approval decisions and reconciliation settle the record of their operation, together
//! with its operation record.
//!
//! Every settlement that follows an execution waits for the call's terminal audit entry
//! ([`Settlement`], applied by `finish` once the entry is written): a process that dies between
//! the two leaves the key in flight, so that the call is reported `outcome_unknown` and
//! reconciled, never replayed as done with its execution in no entry.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arcstr::ArcStr;

use super::core::Core;
use super::flight::{Landing, Pilot};
use super::trace::{Answer, Trace};
use crate::outcome::Status;
use crate::store::deadline::Deadlined;
use crate::store::{ApprovalRequest, IdempotencyStore, OperationRecord, ScopedKey, StoredOutcome};
use crate::tool::BoxFuture;

/// What an entry point settles after its terminal audit entry is written.
pub(crate) enum Settlement {
    /// The key a dispatched call holds: its outcome stored (or the key released), then the
    /// calls waiting for it in this process land.
    Held {
        held: Held,
        stored: StoredOutcome,
        ttl: Duration,
        pilot: Option<Pilot>,
    },
    /// An approval decision whose action ran (or was refused at its recheck): the request
    /// closed and the outcome stored under the call's key.
    Decided {
        request: Box<ApprovalRequest>,
        answer: Box<Answer>,
    },
    /// A reconciled operation: its outcome under its key and in its operation record, and its
    /// approval request (if it had one) closed.
    Reconciled {
        tool: ArcStr,
        key: Option<ScopedKey>,
        operation_id: ArcStr,
        approval_id: Option<String>,
        stored: StoredOutcome,
    },
}

impl Settlement {
    /// Applies the settlement (after the entry point's audit entry), writing the call's final
    /// operation `record` first: a key's outcome is never stored before the record that says
    /// the same. A dispatched call's key whose outcome is stored is completed with its record
    /// in one step of the store ([`IdempotencyStore::complete_with_record`]).
    ///
    /// Boxed, each path with only the state it needs: only a call that held a key (or a
    /// decision, a reconciliation) settles, and this state would otherwise enlarge every call's
    /// future.
    pub(crate) fn apply<S: Send + Sync + 'static>(
        self,
        core: &Core<S>,
        record: Option<OperationRecord>,
    ) -> BoxFuture<'_, ()> {
        match self {
            Settlement::Held {
                held,
                stored,
                ttl,
                pilot,
            } => match record {
                Some(record) if is_stored(stored.status) => {
                    Box::pin(completed(core, held, stored, ttl, pilot, record))
                }
                record => Box::pin(async move {
                    record_first(core, record).await;
                    let landing = landing(&stored);
                    let (store, now) = (&core.stores.idempotency, core.now());
                    settle_held(store, held, &stored, ttl, now).await;
                    land(pilot, landing);
                }),
            },
            Settlement::Decided { request, answer } => Box::pin(async move {
                let recorded = record_first(core, record).await;
                super::approval::executed(core, *request, &answer, recorded).await;
            }),
            Settlement::Reconciled {
                tool,
                key,
                operation_id,
                approval_id,
                stored,
            } => Box::pin(async move {
                record_first(core, record).await;
                operation(core, &tool, key.as_ref(), &operation_id, &stored).await;
                if let Some(id) = approval_id {
                    super::interrupted::reconciled(core, &id, stored.status).await;
                }
            }),
        }
    }
}

/// Writes the call's final operation `record`, if it has one, before its settlement: a key's
/// outcome is never stored before the record that says the same. `false` when the record is
/// still being written in the background (the store did not answer in time).
async fn record_first<S: Send + Sync + 'static>(
    core: &Core<S>,
    record: Option<OperationRecord>,
) -> bool {
    match record {
        Some(record) => super::record::write_after(core, record).await,
        None => true,
    }
}

/// A dispatched call's key completed with its final operation `record` in one step of the
/// store; then the calls waiting in this process for the key replay the outcome.
#[allow(
    clippy::manual_async_fn,
    reason = "an `async fn` would hold its by-value arguments twice in this future"
)]
fn completed<S: Send + Sync + 'static>(
    core: &Core<S>,
    held: Held,
    stored: StoredOutcome,
    ttl: Duration,
    pilot: Option<Pilot>,
    record: OperationRecord,
) -> impl Future<Output = ()> + Send + '_ {
    async move {
        let landing = landing(&stored);
        let operations = core.stores.operations.inner();
        let (written, completed) = core
            .stores
            .idempotency
            .complete_with_record(
                &held.key,
                &held.owner,
                stored,
                ttl,
                core.now(),
                record,
                operations,
            )
            .await;
        if let Err(err) = written {
            tracing::error!(error = %err, tool = %held.key.tool, "operation record could not be written");
        }
        log_settled(&held.key, completed);
        land(pilot, landing);
    }
}

/// What the calls waiting in this process for a settled key are told: replay the stored
/// outcome, or (an outcome that is not stored) board again.
fn landing(stored: &StoredOutcome) -> Landing {
    if is_stored(stored.status) {
        Landing::Outcome(stored.clone())
    } else {
        Landing::Retry
    }
}

/// Lands the key's flight, if this call piloted one.
fn land(pilot: Option<Pilot>, landing: Landing) {
    if let Some(pilot) = pilot {
        pilot.land(landing);
    }
}

/// The settlement of the key a dispatched call holds, for `finish` to apply after the call's
/// audit entry: its outcome is kept for `ttl` (the tool's, decided at build).
pub(crate) fn held(held: Option<Held>, ttl: Duration, answer: &Answer, t: &mut Trace) {
    let Some(held) = held else { return };
    t.settlement = Some(Settlement::Held {
        held,
        stored: answer.stored(t.operation_id.as_ref()),
        ttl,
        pilot: t.pilot.take(),
    });
}

/// Settles operation `operation_id` after its call ended: the outcome in its operation record,
/// then under its key (if it has one). A key's outcome is never stored before the record that
/// says the same: a record still unwritten after the store deadline (written in the background)
/// leaves the key as it is, so that a retry does not replay an outcome the record does not
/// hold; the next status query finds the record settled, or reconciles again, and settles the
/// key.
pub(crate) async fn operation<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &str,
    key: Option<&ScopedKey>,
    operation_id: &str,
    stored: &StoredOutcome,
) {
    if super::record::settle(core, operation_id, stored).await {
        key_of_operation(core, tool, key, operation_id, stored).await;
    } else if key.is_some() {
        tracing::warn!(operation = %operation_id, "the operation's key is left unsettled until its record is written");
    }
}

/// Settles the key of operation `operation_id` (if it has one) after its call ended.
pub(crate) async fn key_of_operation<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &str,
    key: Option<&ScopedKey>,
    operation_id: &str,
    stored: &StoredOutcome,
) {
    if let (Some(key), Some(spec)) = (key, core.spec(tool)) {
        let ttl = core.idempotency_ttl(spec);
        let store = &core.stores.idempotency;
        settle_operation(store, key, operation_id, stored, ttl, core.now()).await;
    }
}

/// A reservation the call holds until it settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    /// The key's scope.
    pub(crate) key: ScopedKey,
    /// Owner token.
    pub(crate) owner: String,
}

/// Whether an outcome is stored under the key (and replayed) rather than released.
pub(crate) fn is_stored(status: Status) -> bool {
    matches!(
        status,
        Status::Ok
            | Status::PendingApproval
            | Status::ApprovalRejected
            | Status::ApprovalExpired
            | Status::OutcomeUnknown
    )
}

/// Settles a reservation the call holds: stores a final outcome, or releases the key so a retry
/// executes.
pub(crate) async fn settle_held(
    store: &Deadlined<dyn IdempotencyStore>,
    held: Held,
    outcome: &StoredOutcome,
    ttl: Duration,
    now: SystemTime,
) {
    let result = if is_stored(outcome.status) {
        store
            .complete(&held.key, &held.owner, outcome.clone(), ttl, now)
            .await
    } else {
        store.release(&held.key, &held.owner).await
    };
    log_settled(&held.key, result);
}

/// Settles the record of operation `operation_id` under `key` after the call that reserved it
/// has ended (an approval decision, a reconciliation): stores the outcome, or removes the record
/// so a retry executes, retrying through a store fault ([`super::retry`], then in the
/// background). Acts only on this operation's own record, never on that of a newer call that
/// re-reserved the key after it expired.
pub(crate) async fn settle_operation(
    store: &Arc<Deadlined<dyn IdempotencyStore>>,
    key: &ScopedKey,
    operation_id: &str,
    outcome: &StoredOutcome,
    ttl: Duration,
    now: SystemTime,
) {
    let deadline = store.deadline();
    let (store, owned_key) = (store.clone(), key.clone());
    let (operation_id, outcome) = (operation_id.to_owned(), outcome.clone());
    let result = super::retry::now_or_later("idempotency record", deadline, move |retried| {
        let (store, key) = (store.clone(), owned_key.clone());
        let (operation_id, outcome) = (operation_id.clone(), outcome.clone());
        async move { write_operation(&store, &key, &operation_id, &outcome, ttl, now, retried).await }
    });
    log_settled(key, result.await);
}

/// One attempt of [`settle_operation`]'s write.
async fn write_operation(
    store: &Deadlined<dyn IdempotencyStore>,
    key: &ScopedKey,
    operation_id: &str,
    outcome: &StoredOutcome,
    ttl: Duration,
    now: SystemTime,
    retried: bool,
) -> crate::store::StoreResult<bool> {
    let settled = if is_stored(outcome.status) {
        store
            .replace(key, operation_id, outcome.clone(), ttl, now)
            .await
    } else {
        store.remove(key, operation_id).await
    };
    // A retry that finds nothing of this operation's to remove: the attempt whose answer was
    // lost removed it.
    settled.map(|done| done || retried)
}

fn log_settled(key: &ScopedKey, result: crate::store::StoreResult<bool>) {
    match result {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(tool = %key.tool, "the idempotency record changed hands before the call settled; it was left alone")
        }
        Err(err) => {
            tracing::error!(tool = %key.tool, error = %err, "idempotency record could not be settled")
        }
    }
}
