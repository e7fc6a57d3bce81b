//! Stores the dispatcher keeps state in: idempotency records, approval requests, session ledgers
//! for the risk policy, and operation records. The traits are async and shaped for real backends
//! (atomic reserve-if-absent with an owner token and lease; compare-and-set on approvals); the
//! in-memory [`MemoryStore`] implements all of them.

pub(crate) mod deadline;
#[doc(hidden)]
pub mod encode;
#[cfg(feature = "testing")]
pub mod fault;
mod memory;
mod types;

#[cfg(feature = "testing")]
pub use fault::{FaultyStore, StoreOp};
pub use memory::MemoryStore;
pub use types::*;

use std::time::{Duration, SystemTime};

use crate::tool::BoxFuture;

/// How long an idempotency record lives unless the tool says otherwise (24 h).
pub const DEFAULT_IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 3600);

/// A backend that keeps every store and the audit trail (SQLite, PostgreSQL), for
/// [`DispatcherBuilder::durable`](crate::DispatcherBuilder::durable).
pub trait DurableBackend:
    IdempotencyStore + ApprovalStore + SessionLedger + OperationStore + 'static
{
    /// Opens the backend's audit sink, sealed and checkpointed by `anchor` when the host gave
    /// keys.
    fn open_audit(
        &self,
        anchor: Option<crate::audit::AuditAnchor>,
    ) -> Result<std::sync::Arc<dyn crate::audit::AuditSink>, StoreError>;
}

/// A store could not answer. Tools that are not read-only fail closed (`unavailable`).
///
/// The message names the backend and what failed; the backend's own error, when there is one,
/// is kept as the [`source`](std::error::Error::source).
#[derive(Debug, Clone, thiserror::Error)]
#[error("store unavailable: {message}")]
pub struct StoreError {
    message: String,
    #[source]
    source: Option<std::sync::Arc<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// An error with `message` and no underlying cause.
    pub fn new(message: impl Into<String>) -> Self {
        StoreError {
            message: message.into(),
            source: None,
        }
    }

    /// An error of `backend` caused by `source` (kept as the error's source).
    pub fn caused_by(
        backend: &str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError {
            message: format!("{backend}: {source}"),
            source: Some(std::sync::Arc::new(source)),
        }
    }

    /// What failed, without the `store unavailable` prefix.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for StoreError {}

/// Result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// Default longest wait for one store operation on a call's path (idempotency records, session
/// ledger, approval requests, operation records), on every entry point: calls, approval
/// decisions, status queries, reconciliation. A store that does not answer in time counts as
/// unavailable: state-changing tools fail closed instead of hanging. Set it with
/// [`DispatcherBuilder::store_deadline`](crate::DispatcherBuilder::store_deadline).
pub const STORE_DEADLINE: Duration = Duration::from_secs(2);

/// How long the store operation being polled on this thread can still wait at most, when a
/// time limit of the dispatcher's covers it: the store deadline on a call's path (or a
/// handler's deadline, for a store a handler uses); `None` outside every such limit.
///
/// A backend that bounds each command with a timer of its own, against a connection that may
/// never answer a command, can leave that timer out when this is no longer than its own bound:
/// the limit drops the operation first. The answer holds for the futures polled inside the
/// limited one on this thread, not for tasks they spawn.
///
/// ```
/// use std::time::Duration;
/// use toolguard_pipeline::store::deadline_in_force;
///
/// /// One command of a backend: its own one-minute timer only where no shorter limit covers it.
/// async fn command() -> bool {
///     let timer_needed = deadline_in_force().is_none_or(|d| d > Duration::from_secs(60));
///     timer_needed
/// }
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert!(rt.block_on(command()), "called directly, no deadline covers it");
/// ```
pub fn deadline_in_force() -> Option<Duration> {
    crate::timeout::in_force()
}

/// Idempotency records, namespaced by (tenant, subject, tool, key).
pub trait IdempotencyStore: Send + Sync + 'static {
    /// Atomically records an in-flight marker owned by a fresh token if no live record exists
    /// for `key`; otherwise returns the existing record. Expired records count as absent.
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        request_digest: &'a str,
        operation_id: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Reservation>>;

    /// Replaces the in-flight marker owned by `owner` with the final outcome. Returns `false` if
    /// `owner` no longer holds the record (its lease was taken over).
    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// Writes the call's final operation `record` to `operations`, then completes the reservation
    /// as [`complete`](Self::complete) does: a reader never finds the outcome under the key
    /// while the record still says the operation is in flight. The dispatcher settles a call
    /// that executed this way, once its audit entry is written.
    ///
    /// The default does the two in that order, each waiting for the other. A backend that also
    /// keeps the operation records overrides it to write both in one step when `operations` is
    /// itself (the PostgreSQL store writes them in one statement), so that a call waits for one
    /// round trip instead of two. A wrapper around a store passes the call on, as it does
    /// [`complete`](Self::complete), so that the store it wraps can recognize itself.
    ///
    /// Returns what writing the record gave, then what the completion gave.
    #[allow(
        clippy::too_many_arguments,
        reason = "complete's arguments and the record"
    )]
    fn complete_with_record<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
        record: OperationRecord,
        operations: &'a dyn OperationStore,
    ) -> BoxFuture<'a, (StoreResult<()>, StoreResult<bool>)> {
        Box::pin(record_then_complete(
            self, key, owner, outcome, ttl, now, record, operations,
        ))
    }

    /// Removes the in-flight marker owned by `owner` (the call did not execute, or failed in a way
    /// that a retry may safely execute again).
    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// Extends the lease held by `owner`. Returns `false` if it no longer holds it.
    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// Takes over an in-flight record whose lease expired, for a new owner token.
    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<String>>>;

    /// Overwrites the stored outcome of the record of operation `operation_id`, whatever its
    /// state (approval decisions and reconciliation). Returns `false`, changing nothing, if the
    /// record is gone or belongs to another operation (a newer call re-reserved the key after it
    /// expired).
    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// Deletes the record of operation `operation_id`. Returns `false`, deleting nothing, if the
    /// record is gone or belongs to another operation.
    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// The live record of `key`.
    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<IdempotencyRecord>>>;
}

/// What [`IdempotencyStore::complete_with_record`] does unless a store overrides it: `record`
/// written through `operations`, then `store`'s [`complete`](IdempotencyStore::complete),
/// each waiting for the other. An override calls it when `operations` is not a store it can
/// write together with its own completion.
#[allow(
    clippy::too_many_arguments,
    reason = "complete's arguments and the record"
)]
pub async fn record_then_complete<S: IdempotencyStore + ?Sized>(
    store: &S,
    key: &ScopedKey,
    owner: &str,
    outcome: StoredOutcome,
    ttl: Duration,
    now: SystemTime,
    record: OperationRecord,
    operations: &dyn OperationStore,
) -> (StoreResult<()>, StoreResult<bool>) {
    let written = operations.put(record).await;
    (written, store.complete(key, owner, outcome, ttl, now).await)
}

/// Approval requests and their decisions.
pub trait ApprovalStore: Send + Sync + 'static {
    /// Stores a new request. An existing request with the same id is an error and stays as it
    /// is (a decided request is never reset).
    fn create<'a>(&'a self, request: &'a ApprovalRequest) -> BoxFuture<'a, StoreResult<()>>;
    /// The request with id `id`.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<ApprovalRequest>>>;
    /// Pending requests of `tenant`, oldest first.
    fn pending<'a>(&'a self, tenant: &'a str) -> BoxFuture<'a, StoreResult<Vec<ApprovalRequest>>>;
    /// Writes `request` if the stored version is `expected_version` (compare-and-set); the
    /// written request carries `expected_version + 1`. Returns `false` on a lost race.
    fn update<'a>(
        &'a self,
        request: &'a ApprovalRequest,
        expected_version: u64,
    ) -> BoxFuture<'a, StoreResult<bool>>;
}

/// Amounts and call counts per scope over sliding windows, for the risk policy.
pub trait SessionLedger: Send + Sync + 'static {
    /// Atomically adds `amount` as entry `entry` to every scope of `limits` if, for each, the
    /// total within its window plus `amount` stays within its limit; otherwise adds nothing.
    fn admit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// Adds `amount` to every scope without a limit check (approved actions).
    fn record<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        scopes: &'a [String],
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<()>>;

    /// Removes entry `entry` from every scope (the action did not execute).
    fn retract<'a>(
        &'a self,
        entry: &'a str,
        scopes: &'a [String],
    ) -> BoxFuture<'a, StoreResult<()>>;

    /// Total amount of `scope` within `window` before `now`. Entries booked at a time after
    /// `now` count too (here and in every limit check of [`admit`](Self::admit),
    /// [`reserve`](Self::reserve) and [`hit`](Self::hit)): replicas read their clocks before
    /// they book, so an entry booked first may carry a later time than a caller still waiting
    /// to book, and a check that left it out would let both through.
    fn total<'a>(
        &'a self,
        scope: &'a str,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<u64>>;

    /// Counts one call in `scope` if fewer than `max` were counted within `window`; returns
    /// whether it was counted.
    fn hit<'a>(
        &'a self,
        scope: &'a str,
        max: u32,
        window: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// Atomically holds `amount` as reservation `entry` in every scope of `limits` until `until`
    /// if, for each, the total within its window plus the live reservations plus `amount` stays
    /// within its limit; otherwise holds nothing and returns `false`. A live reservation counts
    /// in [`admit`](Self::admit), [`total`](Self::total) and `reserve` of every scope it holds,
    /// whatever the window, until it is released, committed or `until` passes. A second
    /// `reserve` of an entry that already holds a live reservation changes nothing and returns
    /// `true`.
    ///
    /// The default refuses (fails closed): a ledger without reservations cannot bound approved
    /// actions.
    fn reserve<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        limits: &'a [ScopeLimit],
        until: SystemTime,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let _ = (entry, amount, limits, until, now);
        Box::pin(std::future::ready(Err(no_holds())))
    }

    /// Drops reservation `entry` (rejected or expired approval). Returns whether one was held.
    fn release<'a>(&'a self, entry: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        let _ = entry;
        Box::pin(std::future::ready(Err(no_holds())))
    }

    /// Atomically turns the live reservation `entry` into booked ledger entries of `amount` at
    /// `now`, in the scopes it held, without a second limit check: the reserved amount was
    /// counted against every limit from the moment it was reserved, so booking it cannot move a
    /// total past a limit. `amount` may be lower than the reserved amount (the rest is freed),
    /// never higher ([`HoldCommit::Exceeds`], nothing changes). Of several racing commits of one
    /// reservation exactly one returns [`HoldCommit::Committed`]; a released, expired or
    /// already committed reservation answers [`HoldCommit::Missing`].
    fn commit<'a>(
        &'a self,
        entry: &'a str,
        amount: u64,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<HoldCommit>> {
        let _ = (entry, amount, now);
        Box::pin(std::future::ready(Err(no_holds())))
    }

    /// The store of the sessions' provenance sources kept with this ledger, so that every
    /// replica sharing the ledger sees them ([`crate::provenance`]); `None` (the default) for a
    /// ledger that keeps none. The dispatcher uses it unless
    /// [`provenance_store`](crate::DispatcherBuilder::provenance_store) names another.
    fn provenance(self: std::sync::Arc<Self>) -> Option<crate::provenance::SharedProvenance> {
        None
    }
}

fn no_holds() -> StoreError {
    StoreError::new("this session ledger does not support reservations".to_owned())
}

/// Records of state-changing operations, for the operation-status query.
pub trait OperationStore: Send + Sync + 'static {
    /// Inserts or replaces the record. The store takes the record: a store that keeps it in
    /// memory keeps this one, with no copy.
    fn put(&self, record: OperationRecord) -> BoxFuture<'_, StoreResult<()>>;
    /// The record with id `id`.
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, StoreResult<Option<OperationRecord>>>;
}
