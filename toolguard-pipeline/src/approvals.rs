//! The human side of approvals: list pending requests, approve, reject. Every decision fails
//! closed, is bound by digest to the exact action, and writes an audit entry.
//!
//! A decision is an entry point over the same stages as a call:
//! load(request) → check(open, approver fresh and eligible) → re-normalize(validate, sanitize,
//! digest) and seal → decide → then the stage list from its resume point after the human (see
//! `stage::list`): custom stages → principal(requester, refreshed) → permit → custom stages →
//! policy(ledger) → custom stages → recheck → execute → envelope → settle → audit. Every store call runs under the store deadline.

use std::sync::Arc;
use std::time::Instant;

use crate::audit::AuditEvent;
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::dispatcher::Dispatcher;
use crate::outcome::{Status, ToolOutcome};
use crate::stage::approval::{self, Verb};
use crate::stage::core::Core;
use crate::stage::finish::{Subject, finish};
use crate::stage::trace::{Answer, Exit, Trace};
use crate::stage::{self, Stage, Stop};
use crate::store::{ApprovalRequest, StoreError};

pub use crate::stage::approval::binding_digest;

/// Approval operations of a dispatcher; see [`Dispatcher::approvals`]. Every method takes the
/// acting principal first.
pub struct Approvals<'d, S: Send + Sync + 'static> {
    core: &'d Core<S>,
}

impl<S: Send + Sync + 'static> std::fmt::Debug for Approvals<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals").finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// The approval workflow of this dispatcher.
    pub fn approvals(&self) -> Approvals<'_, S> {
        Approvals { core: &self.core }
    }
}

impl<S: Send + Sync + 'static> Approvals<'_, S> {
    /// Pending requests of `viewer`'s tenant that have not expired, oldest first. Requests whose
    /// time ran out are closed as expired on the way (and their notifiers told). With host keys,
    /// a record whose seal does not verify, or whose sealed requester belongs to another tenant
    /// than the store's index says, is left out (and logged): an approver is never shown an
    /// action the dispatcher would refuse to run.
    pub async fn pending(&self, viewer: &Principal) -> Result<Vec<ApprovalRequest>, StoreError> {
        let now_ms = unix_millis(self.core.now());
        let mut pending = self.core.stores.approvals.pending(&viewer.tenant).await?;
        pending.retain(|r| {
            let tenant = r.requester.tenant == viewer.tenant;
            if !tenant {
                tracing::warn!(approval = %r.id, "pending approval of another tenant left out");
            }
            tenant && approval::seal_intact(self.core, r)
        });
        for due in pending.iter().filter(|r| now_ms >= r.expires_at_ms) {
            stage::approval::expire_if_due(self.core, &due.id).await;
        }
        pending.retain(|r| now_ms < r.expires_at_ms);
        Ok(pending)
    }

    /// The request `id`, if it belongs to `viewer`'s tenant.
    pub async fn get(
        &self,
        viewer: &Principal,
        id: &str,
    ) -> Result<Option<ApprovalRequest>, StoreError> {
        let found = self.core.stores.approvals.get(id).await?;
        Ok(found.filter(|r| r.requester.tenant == viewer.tenant))
    }

    /// Approves request `id` as `approver`. When enough distinct approvers agreed, the action is
    /// rechecked and executed, and its outcome is returned (and replayed to retries of the call).
    pub async fn approve(&self, approver: &Principal, id: &str) -> ToolOutcome {
        self.decide(approver, id, Verb::Approve).await
    }

    /// Rejects request `id` as `approver`; the call's outcome becomes `approval_rejected`.
    pub async fn reject(&self, approver: &Principal, id: &str, reason: &str) -> ToolOutcome {
        self.decide(approver, id, Verb::Reject(reason)).await
    }

    async fn decide(&self, approver: &Principal, id: &str, verb: Verb<'_>) -> ToolOutcome {
        crate::canonical::with_nfc_memo(Box::pin(self.decide_call(approver, id, verb))).await
    }

    /// [`decide`](Self::decide) inside its call's NFC memo.
    async fn decide_call(&self, approver: &Principal, id: &str, verb: Verb<'_>) -> ToolOutcome {
        let started = Instant::now();
        let core = self.core;
        let mut t = Trace {
            stage: Stage::Approval,
            approval_id: Some(id.to_owned()),
            approver: Some(approver.subject.to_string()),
            ..Trace::default()
        };
        let loaded = stage::execute::contained(approval::load(core, approver, id)).await;
        let request = match loaded.unwrap_or_else(|_| Err(stage::panicked(core, &t))) {
            Ok(request) => request,
            Err(stop) => {
                let about = subject(approver, "", "", started);
                return finish(core, about, t, Answer::stopped(stop)).await;
            }
        };
        t.tool = Some(request.tool.as_str().into());
        t.operation_id = Some(request.operation_id.as_str().into());
        t.idempotency_key = request.idempotency.as_ref().map(|k| k.key.clone());
        t.request_digest = Some(request.request_digest.clone());
        t.arguments = core
            .spec(&request.tool)
            .map(|s| Arc::new(stage::intent::redact(s, &request.arguments)));
        let run = decision(core, request.clone(), approver, verb, &mut t);
        let result = stage::execute::contained(run)
            .await
            .unwrap_or_else(|_| Err(Exit::Stop(stage::panicked(core, &t))));
        // The outcome answers the original call; the audit entry records the decision.
        let about = subject(&request.requester, &request.call_id, &request.tool, started);
        finish(core, about, t, Answer::from_exit(result)).await
    }
}

fn subject<'a>(p: &'a Principal, call_id: &'a str, tool: &'a str, started: Instant) -> Subject<'a> {
    Subject {
        event: AuditEvent::Decision,
        call_id: call_id.into(),
        tool: tool.into(),
        principal: p,
        started,
    }
}

/// The stage sequence of a decision on `request`.
async fn decision<S: Send + Sync + 'static>(
    core: &Core<S>,
    mut request: ApprovalRequest,
    approver: &Principal,
    verb: Verb<'_>,
    t: &mut Trace,
) -> Result<Answer, Exit> {
    // Nothing stored is trusted before the record's seal verifies.
    if !approval::seal_intact(core, &request) {
        return Err(approval::close_mismatched(core, request).await);
    }
    approval::check_open(core, &request).await?;
    stage::principal::fresh(core, approver)?;
    approval::check_approver(&request, approver)?;
    let tool = stage::registry::lookup(core, &request.tool).map_err(|_| {
        Stop::new(
            Status::UnknownTool,
            "unknown_tool",
            "the tool is no longer registered",
        )
    })?;
    let spec = tool.spec();
    // The stored action is normalized again and its digests compared before anything else.
    let intact = stage::normalize::again(core, tool, &request)
        .filter(|clean| approval::sealed(core, &request, spec, &clean.args));
    let Some(clean) = intact else {
        return Err(approval::close_mismatched(core, request).await);
    };
    if !approval::owned(core, &request).await? {
        return Err(approval::close_mismatched(core, request).await);
    }
    // The amount booked is the one measured from the re-normalized action (equal to the bound
    // one, checked above), never a stored field.
    let amount = stage::policy::measure_amount(spec, &clean.args)?;
    let deciding = Instant::now();
    approval::decide(core, &mut request, approver, verb).await?;
    // From here the action may run: its operation record is kept current (`executing` before
    // the tool runs, its outcome after the audit entry), and the decision holds the lease.
    t.lease_from = Some(deciding);
    t.admitted = !spec.read_only;
    t.arguments_for_operation = Some(Arc::new(clean.args.clone()));
    // The action resumes the stage list after the human: custom stages, the requester as they
    // are now, permit, policy, then recheck and execution.
    let approved = stage::list::Approved {
        request: &request,
        tool,
        args: clean.args,
        resolved: clean.resolved,
        amount,
    };
    let executed = stage::list::after_human(core, approved, t);
    let answer = Answer::from_result(executed.await);
    if answer.reason.as_deref() == Some(approval::RESERVATION_MISSING) {
        // Not run now: the record stays the one of the run that happened.
        t.admitted = false;
    }
    // The request is closed and the outcome stored under the key after the audit entry.
    t.settlement = Some(stage::settle::Settlement::Decided {
        request: Box::new(request),
        answer: Box::new(answer.clone()),
    });
    Ok(answer)
}
