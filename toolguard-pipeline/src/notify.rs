//! Approval notifications: the dispatcher tells an [`ApprovalNotifier`] when a request opens,
//! gathers an approval of a dual-control quorum, is decided, or expires.
//!
//! A notifier is called on the decision path and must return at once: it queues the event and
//! delivers it elsewhere (the webhook notifier of `toolguard-console` spawns a task). A panic
//! inside a notifier is contained; notification never changes a call's outcome. A notifier that
//! gives up on an event records it with [`NotifyReport::undeliverable`], which writes an audit
//! entry of kind [`AuditEvent::Notification`].
//!
//! ```
//! use toolguard_pipeline::notify::{ApprovalEvent, ApprovalNotifier, NotifyReport};
//! use toolguard_pipeline::Dispatcher;
//!
//! struct Log;
//! impl ApprovalNotifier for Log {
//!     fn notify(&self, event: ApprovalEvent, _report: NotifyReport) {
//!         println!("{} {:?} {}", event.approval_id, event.kind, event.tool);
//!     }
//! }
//! let dispatcher = Dispatcher::builder(()).notifier(Log).build().unwrap();
//! # let _ = dispatcher;
//! ```

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::audit::Stage;
use crate::audit::{AuditEvent, AuditRecord, AuditSink};
use crate::clock::{Clock, unix_millis};
use crate::kinds::Currency;
use crate::outcome::Status;
use crate::store::{ApprovalRequest, ApprovalState};

/// What happened to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalEventKind {
    /// A request was opened and waits for a reviewer.
    Opened,
    /// One approval of a dual-control quorum was given; the request still waits.
    Approved,
    /// The request was decided: executed (see `status`) or rejected.
    Decided,
    /// The request expired without a decision.
    Expired,
}

/// One notification. It carries no arguments: a receiver looks the request up in the console
/// (the preview can hold customer data that must not travel to a chat channel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalEvent {
    /// What happened.
    pub kind: ApprovalEventKind,
    /// The approval request.
    pub approval_id: String,
    /// Tenant of the requester.
    pub tenant: String,
    /// Tool that waits.
    pub tool: String,
    /// Who asked (subject).
    pub requester: String,
    /// Why approval was needed (`critical`, `approval_over`, `session_limit`, `policy`).
    pub cause: String,
    /// Amount in minor units, when the tool has an amount field.
    pub amount: Option<u64>,
    /// Currency of the amount, when the tool has a `currency` argument.
    pub currency: Option<Currency>,
    /// Distinct approvals given so far.
    pub approvals_given: usize,
    /// Distinct approvals needed.
    pub approvals_required: u8,
    /// Who decided last (for `approved`, `decided`).
    pub approver: Option<String>,
    /// Outcome status of a decided or expired request (`ok`, `approval_rejected`, ...).
    pub status: Option<Status>,
    /// When the request was opened (ms since the epoch).
    pub created_at_ms: u64,
    /// When it expires (ms since the epoch).
    pub expires_at_ms: u64,
    /// When this event happened (ms since the epoch).
    pub at_ms: u64,
}

impl ApprovalEvent {
    /// The event `kind` of `request` at `at_ms`, with the outcome `status` if decided.
    pub fn of(
        kind: ApprovalEventKind,
        request: &ApprovalRequest,
        status: Option<Status>,
        at_ms: u64,
    ) -> Self {
        ApprovalEvent {
            kind,
            approval_id: request.id.clone(),
            tenant: request.requester.tenant.to_string(),
            tool: request.tool.clone(),
            requester: request.requester.subject.to_string(),
            cause: request.cause.clone(),
            amount: request.amount,
            currency: request
                .arguments
                .get("currency")
                .and_then(|c| serde_json::from_value(c.clone()).ok()),
            approvals_given: request.approvers().len(),
            approvals_required: request.approvals_required,
            approver: request.decisions.last().map(|d| d.approver.clone()),
            status,
            created_at_ms: request.created_at_ms,
            expires_at_ms: request.expires_at_ms,
            at_ms,
        }
    }

    /// The event a request closed in `state` gives (`expired` or `decided`).
    pub fn closed(request: &ApprovalRequest, status: Status, at_ms: u64) -> Self {
        let kind = if request.state == ApprovalState::Expired {
            ApprovalEventKind::Expired
        } else {
            ApprovalEventKind::Decided
        };
        ApprovalEvent::of(kind, request, Some(status), at_ms)
    }
}

/// Receives approval events. `notify` runs on the decision path: it must not block (queue or
/// spawn) and should not panic (a panic is contained and logged).
pub trait ApprovalNotifier: Send + Sync + 'static {
    /// Takes `event`; `report` records the event in the audit trail if it cannot be delivered.
    fn notify(&self, event: ApprovalEvent, report: NotifyReport);
}

impl<T: ApprovalNotifier> ApprovalNotifier for Arc<T> {
    fn notify(&self, event: ApprovalEvent, report: NotifyReport) {
        (**self).notify(event, report)
    }
}

/// Lets a notifier record an undeliverable notification in the dispatcher's audit trail.
#[derive(Clone)]
pub struct NotifyReport {
    audit: Arc<dyn AuditSink>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for NotifyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyReport").finish_non_exhaustive()
    }
}

impl NotifyReport {
    /// Appends an audit entry of kind [`AuditEvent::Notification`] for `event`, with reason
    /// code `reason` (like `webhook_undeliverable`). Returns the entry's sequence number.
    pub async fn undeliverable(
        &self,
        event: &ApprovalEvent,
        reason: &str,
    ) -> Result<u64, crate::audit::AuditError> {
        let record = AuditRecord {
            event: AuditEvent::Notification,
            time_ms: unix_millis(self.clock.now()),
            tenant: event.tenant.as_str().into(),
            subject: event.requester.as_str().into(),
            tool: event.tool.as_str().into(),
            stage: Stage::Approval,
            status: event.status,
            reason: Some(reason.chars().take(200).collect::<String>().into()),
            approval_id: Some(event.approval_id.clone()),
            approver: event.approver.clone(),
            ..AuditRecord::default()
        };
        self.audit.append_inline(record).await
    }
}

/// The notifiers of a dispatcher.
#[derive(Clone)]
pub(crate) struct Notifiers {
    list: Vec<Arc<dyn ApprovalNotifier>>,
    report: NotifyReport,
}

impl Notifiers {
    pub(crate) fn new(
        list: Vec<Arc<dyn ApprovalNotifier>>,
        audit: Arc<dyn AuditSink>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Notifiers {
            list,
            report: NotifyReport { audit, clock },
        }
    }

    /// Hands `event` to every notifier; a panicking notifier is logged and skipped.
    pub(crate) fn emit(&self, event: ApprovalEvent) {
        for notifier in &self.list {
            let report = self.report.clone();
            let event = event.clone();
            if catch_unwind(AssertUnwindSafe(|| notifier.notify(event, report))).is_err() {
                tracing::error!("an approval notifier panicked; the event was dropped");
            }
        }
    }

    /// Milliseconds since the epoch, on the dispatcher's clock.
    pub(crate) fn now_ms(&self) -> u64 {
        unix_millis(self.report.clock.now())
    }
}
