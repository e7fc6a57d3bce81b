//! The console's only door to the approval workflow. Every read and decision goes through
//! [`Dispatcher::approvals`]; the console adds no decision logic. (Argument order of the
//! approvals API lives here alone.)

use toolguard_pipeline::store::{ApprovalRequest, StoreError};
use toolguard_pipeline::{Dispatcher, Principal, ToolOutcome};

/// Pending requests of the viewer's tenant, oldest first.
pub(crate) async fn pending<S: Send + Sync + 'static>(
    d: &Dispatcher<S>,
    viewer: &Principal,
) -> Result<Vec<ApprovalRequest>, StoreError> {
    d.approvals().pending(viewer).await
}

/// Request `id` if it is in the viewer's tenant.
pub(crate) async fn get<S: Send + Sync + 'static>(
    d: &Dispatcher<S>,
    viewer: &Principal,
    id: &str,
) -> Result<Option<ApprovalRequest>, StoreError> {
    d.approvals().get(viewer, id).await
}

/// Approves `id` as `reviewer`.
pub(crate) async fn approve<S: Send + Sync + 'static>(
    d: &Dispatcher<S>,
    reviewer: &Principal,
    id: &str,
) -> ToolOutcome {
    d.approvals().approve(reviewer, id).await
}

/// Rejects `id` as `reviewer` for `reason`.
pub(crate) async fn reject<S: Send + Sync + 'static>(
    d: &Dispatcher<S>,
    reviewer: &Principal,
    id: &str,
    reason: &str,
) -> ToolOutcome {
    d.approvals().reject(reviewer, id, reason).await
}
