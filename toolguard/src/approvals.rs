//! The human side of approvals: list pending requests, approve, reject. Every decision fails
//! closed, is bound by digest to the exact action, and writes an audit entry.

use std::time::Instant;

use crate::audit::AuditEvent;
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::digest::request_digest;
use crate::dispatcher::{Answer, Dispatcher, Trace, redact};
use crate::metrics;
use crate::notify::{ApprovalEvent, ApprovalEventKind::Approved};
use crate::outcome::{Status, ToolOutcome};
use crate::sanitize::{ResolvedUrl, Verdict};
use crate::stage::approval::binding_digest;
use crate::stage::execute::contained;
use crate::stage::idempotency::{action_arguments, is_stored};
use crate::stage::policy::{PolicyDecision, session_scope, subject_scope};
use crate::stage::{self, Stage, Stop};
use crate::store::{
    ApprovalDecision, ApprovalRequest, ApprovalState, OperationState, ScopeLimit, StoreError,
    StoredOutcome,
};

/// Approval operations of a dispatcher; see [`Dispatcher::approvals`].
pub struct Approvals<'d, S: Send + Sync + 'static> {
    d: &'d Dispatcher<S>,
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// The approval workflow of this dispatcher.
    pub fn approvals(&self) -> Approvals<'_, S> {
        Approvals { d: self }
    }
}

enum Verb<'r> {
    Approve,
    Reject(&'r str),
}

impl<S: Send + Sync + 'static> Approvals<'_, S> {
    /// Pending requests of `tenant` that have not expired, oldest first. Requests whose time
    /// ran out are closed as expired on the way (and their notifiers told).
    pub async fn pending(&self, tenant: &str) -> Result<Vec<ApprovalRequest>, StoreError> {
        let now_ms = unix_millis(self.d.inner.clock.now());
        let mut pending = self.d.inner.approvals.pending(tenant).await?;
        for due in pending.iter().filter(|r| now_ms >= r.expires_at_ms) {
            self.expire_if_due(&due.id).await;
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
        Ok(self
            .d
            .inner
            .approvals
            .get(id)
            .await?
            .filter(|r| r.requester.tenant == viewer.tenant))
    }

    /// Approves request `id` as `approver`. When enough distinct approvers agreed, the action is
    /// rechecked and executed, and its outcome is returned (and replayed to retries of the call).
    pub async fn approve(&self, id: &str, approver: &Principal) -> ToolOutcome {
        self.decide(id, approver, Verb::Approve).await
    }

    /// Rejects request `id` as `approver`; the call's outcome becomes `approval_rejected`.
    pub async fn reject(&self, id: &str, approver: &Principal, reason: &str) -> ToolOutcome {
        self.decide(id, approver, Verb::Reject(reason)).await
    }

    /// Closes request `id` as expired if its time is up; returns the expired outcome then.
    pub(crate) async fn expire_if_due(&self, id: &str) -> Option<StoredOutcome> {
        let inner = &*self.d.inner;
        let request = inner.approvals.get(id).await.ok()??;
        let now_ms = unix_millis(inner.clock.now());
        match request.state {
            ApprovalState::Expired => Some(expired_outcome(&request)),
            ApprovalState::Pending if now_ms >= request.expires_at_ms => Some(
                self.close(request, ApprovalState::Expired, expired_outcome)
                    .await
                    .unwrap_or_else(|o| o),
            ),
            _ => None,
        }
    }

    /// Moves `request` to a terminal state and stores the outcome for the call's retries.
    /// `Err` carries the outcome when another decision won the race.
    async fn close(
        &self,
        mut request: ApprovalRequest,
        state: ApprovalState,
        outcome: fn(&ApprovalRequest) -> StoredOutcome,
    ) -> Result<StoredOutcome, StoredOutcome> {
        let inner = &*self.d.inner;
        let version = request.version;
        request.state = state;
        let stored = outcome(&request);
        if !inner
            .approvals
            .update(&request, version)
            .await
            .unwrap_or(false)
        {
            return Err(stored);
        }
        self.store_outcome(&request, &stored).await;
        self.closed(&request, stored.status);
        Ok(stored)
    }

    /// Metrics and notification of a request that left the pending state with `status`.
    fn closed(&self, request: &ApprovalRequest, status: Status) {
        let notifiers = &self.d.inner.notifiers;
        let now_ms = notifiers.now_ms();
        if request.state != ApprovalState::Executed {
            metrics::approval_pending(&request.tool, &request.requester.tenant, -1.0);
        }
        if request.state != ApprovalState::Expired {
            let decision = if request.state == ApprovalState::Rejected {
                "rejected"
            } else {
                "approved"
            };
            let seconds = now_ms.saturating_sub(request.created_at_ms) as f64 / 1000.0;
            metrics::approval_latency(&request.tool, &request.requester.tenant, decision, seconds);
        }
        notifiers.emit(ApprovalEvent::closed(request, status, now_ms));
    }

    async fn store_outcome(&self, request: &ApprovalRequest, stored: &StoredOutcome) {
        let inner = &*self.d.inner;
        let now = inner.clock.now();
        if let (Some(key), Some(spec)) = (&request.idempotency, self.d.spec(&request.tool)) {
            // As on the direct path, a handler error is not stored: the key is freed so that a
            // retry is a new request. Both act only on this request's own record, never on that
            // of a newer call that re-reserved the key after it expired.
            let result = if is_stored(stored.status) {
                inner
                    .idempotency
                    .replace(
                        key,
                        &request.operation_id,
                        stored.clone(),
                        self.d.idempotency_ttl(spec),
                        now,
                    )
                    .await
            } else {
                inner.idempotency.remove(key, &request.operation_id).await
            };
            if let Err(err) = result {
                tracing::error!(error = %err, "approval outcome could not be settled under its idempotency key");
            }
        }
        if let Ok(Some(mut op)) = inner.operations.get(&request.operation_id).await {
            op.state = OperationState::from_status(stored.status);
            op.outcome = Some(stored.clone());
            op.updated_at_ms = unix_millis(now);
            if let Err(err) = inner.operations.put(&op).await {
                tracing::error!(error = %err, "operation record could not be updated");
            }
        }
    }

    async fn decide(&self, id: &str, approver: &Principal, verb: Verb<'_>) -> ToolOutcome {
        let started = Instant::now();
        let mut t = Trace {
            stage: Stage::Approval,
            approval_id: Some(id.to_owned()),
            approver: Some(approver.subject.clone()),
            ..Trace::default()
        };
        let loaded = contained(self.d.inner.approvals.get(id))
            .await
            .unwrap_or_else(|_| Err(StoreError("the approval store panicked".into())));
        let request = match loaded {
            Ok(Some(r)) if r.requester.tenant == approver.tenant => r,
            Ok(_) => {
                let stop = Stop::new(Status::NotFound, "missing", "approval request not found");
                return self
                    .d
                    .finish(
                        AuditEvent::Decision,
                        "",
                        "",
                        approver,
                        t,
                        Answer::from_result(Err(stop)),
                        started,
                    )
                    .await;
            }
            Err(_) => {
                let stop = Stop::new(
                    Status::Unavailable,
                    "approval_store_unavailable",
                    "approvals are unavailable",
                );
                return self
                    .d
                    .finish(
                        AuditEvent::Decision,
                        "",
                        "",
                        approver,
                        t,
                        Answer::from_result(Err(stop)),
                        started,
                    )
                    .await;
            }
        };
        t.tool = Some(request.tool.clone());
        t.operation_id = Some(request.operation_id.clone());
        t.idempotency_key = request.idempotency.as_ref().map(|k| k.key.clone());
        t.request_digest = Some(request.request_digest.clone());
        t.arguments = self
            .d
            .spec(&request.tool)
            .map(|s| redact(s, &request.arguments));
        let result = contained(self.run_decision(request.clone(), approver, verb, &mut t))
            .await
            .unwrap_or_else(|_| Err(self.d.panicked(&t)));
        let answer = Answer::from_result(result);
        // The outcome answers the original call; the audit entry records the decision.
        self.d
            .finish(
                AuditEvent::Decision,
                &request.call_id,
                &request.tool,
                &request.requester,
                t,
                answer,
                started,
            )
            .await
    }

    async fn run_decision(
        &self,
        mut request: ApprovalRequest,
        approver: &Principal,
        verb: Verb<'_>,
        t: &mut Trace,
    ) -> Result<Answer, Stop> {
        let d = self.d;
        let inner = &*d.inner;
        match request.state {
            ApprovalState::Pending => {}
            ApprovalState::Executing => {
                return Err(Stop::new(
                    Status::InProgress,
                    "executing",
                    "the approved action is executing",
                ));
            }
            ApprovalState::Expired => {
                return Err(Stop::new(
                    Status::ApprovalExpired,
                    "expired",
                    "this approval request expired; nothing was done",
                ));
            }
            ApprovalState::Rejected => {
                return Err(Stop::new(
                    Status::ApprovalRejected,
                    "rejected",
                    "this approval request was rejected; nothing was done",
                ));
            }
            ApprovalState::Executed => {
                return Err(Stop::new(
                    Status::PreconditionFailed,
                    "already_decided",
                    "this approval request was already decided",
                ));
            }
        }
        if unix_millis(inner.clock.now()) >= request.expires_at_ms {
            let stored = self
                .close(request, ApprovalState::Expired, expired_outcome)
                .await
                .unwrap_or_else(|o| o);
            return Ok(Answer {
                replayed: false,
                ..Answer::replay(stored)
            });
        }
        stage::principal::check(approver, inner.clock.now(), inner.principal_max_age)?;
        if approver.subject == request.requester.subject {
            return Err(Stop::new(
                Status::Forbidden,
                "self_approval",
                "the requester cannot decide on their own request",
            ));
        }
        if !request.eligible_roles.iter().any(|r| approver.has_role(r)) {
            return Err(Stop::new(
                Status::Forbidden,
                "not_eligible",
                "the approver holds no eligible role",
            ));
        }
        if request
            .decisions
            .iter()
            .any(|dcs| dcs.approver == approver.subject)
        {
            return Err(Stop::new(
                Status::Forbidden,
                "duplicate_approver",
                "this approver already decided",
            ));
        }
        let Some(reg) = inner.tools.get(&request.tool) else {
            return Err(Stop::new(
                Status::UnknownTool,
                "unknown_tool",
                "the tool is no longer registered",
            ));
        };
        let spec = reg.tool.spec();

        // Normalize the stored action again and compare its digests before anything else.
        let mut args = request.arguments.clone();
        let mut resolved = Vec::new();
        let intact = stage::validate::arguments(&reg.input, &args).is_ok()
            && {
                let report = inner.sanitizer.sanitize(spec, &mut args);
                resolved = report.resolved;
                report.verdict == Verdict::Clean
            }
            && stage::validate::sanitized(&reg.input, &args).is_ok()
            && request_digest(
                &spec.name,
                spec.revision,
                &action_arguments(spec, &args),
                &request.requester.tenant,
                &request.requester.subject,
            ) == request.request_digest
            && binding_digest(&request, None) == request.binding_digest
            && spec.revision == request.tool_revision
            && inner.policy.current_revision() == request.policy_revision;
        if !intact {
            let stored = self
                .close(request, ApprovalState::Rejected, mismatch_outcome)
                .await
                .unwrap_or_else(|o| o);
            return Ok(Answer {
                replayed: false,
                ..Answer::replay(stored)
            });
        }

        let now_ms = unix_millis(inner.clock.now());
        let reason = match verb {
            Verb::Approve => None,
            Verb::Reject(r) => Some(r.to_owned()),
        };
        request.decisions.push(ApprovalDecision {
            approver: approver.subject.clone(),
            approve: reason.is_none(),
            at_ms: now_ms,
            digest: binding_digest(&request, Some(&approver.subject)),
            reason: reason.clone(),
        });
        if reason.is_some() {
            let stored = self
                .close(request, ApprovalState::Rejected, rejected_outcome)
                .await
                .map_err(|_| lost_race())?;
            return Ok(Answer {
                replayed: false,
                ..Answer::replay(stored)
            });
        }

        let version = request.version;
        if request.approvers().len() < request.approvals_required as usize {
            if !inner
                .approvals
                .update(&request, version)
                .await
                .map_err(|_| unavailable())?
            {
                return Err(lost_race());
            }
            let (notifiers, at) = (&inner.notifiers, unix_millis(inner.clock.now()));
            notifiers.emit(ApprovalEvent::of(Approved, &request, None, at));
            let ticket = crate::outcome::ApprovalTicket {
                approval_id: request.id.clone(),
                preview: request.preview.clone(),
                expires_at_ms: request.expires_at_ms,
            };
            let mut answer = Answer::replay(StoredOutcome {
                approval: Some(ticket),
                ..StoredOutcome::new(Status::PendingApproval)
            });
            answer.replayed = false;
            answer.message = Some(format!(
                "{} of {} approvals given",
                request.approvers().len(),
                request.approvals_required
            ));
            return Ok(answer);
        }
        request.state = ApprovalState::Executing;
        if !inner
            .approvals
            .update(&request, version)
            .await
            .map_err(|_| unavailable())?
        {
            return Err(lost_race());
        }
        request.version = version + 1;
        metrics::approval_pending(&request.tool, &request.requester.tenant, -1.0);

        // Re-authorize the requester as they are now, then recheck and execute.
        let result = self
            .execute_approved(&request, reg, args, resolved, t)
            .await;
        let answer = Answer::from_result(result);
        let stored = answer.stored(Some(&request.operation_id));
        let executed_version = request.version;
        request.state = ApprovalState::Executed;
        if !inner
            .approvals
            .update(&request, executed_version)
            .await
            .unwrap_or(false)
        {
            tracing::error!(approval = %request.id, "approval request could not be marked executed");
        }
        self.store_outcome(&request, &stored).await;
        self.closed(&request, answer.status);
        Ok(answer)
    }

    async fn execute_approved(
        &self,
        request: &ApprovalRequest,
        reg: &crate::dispatcher::Registered<S>,
        args: serde_json::Value,
        resolved: Vec<ResolvedUrl>,
        t: &mut Trace,
    ) -> Result<Answer, Stop> {
        let d = self.d;
        let requester = match &d.inner.refresher {
            Some(refresh) => refresh(&request.requester).ok_or_else(|| {
                Stop::new(
                    Status::Forbidden,
                    "requester_revoked",
                    "the requester may no longer act",
                )
            })?,
            None => request.requester.clone(),
        };
        if requester.tenant != request.requester.tenant
            || requester.subject != request.requester.subject
        {
            return Err(Stop::new(
                Status::Forbidden,
                "requester_changed",
                "the requester changed",
            ));
        }
        let spec = reg.tool.spec();
        d.authorize_tool(&requester, spec)?;
        let decoded = reg
            .tool
            .decode(args)
            .map_err(stage::validate::decode_error)?;
        // The addresses checked just now, so that the handler connects to them (DNS pinning).
        let ctx = d
            .context(
                &requester,
                &request.call_id,
                Some(request.operation_id.clone()),
            )
            .with_resolved_urls(resolved);
        // The approved amount is recorded (without a limit check) before execution, failing
        // closed when the ledger is unavailable.
        let decision = PolicyDecision {
            amount: request.amount,
            approval_cause: None,
            limits: session_scopes(&requester, spec)
                .into_iter()
                .map(|scope| ScopeLimit {
                    scope,
                    limit: u64::MAX,
                    window: std::time::Duration::ZERO,
                })
                .collect(),
        };
        let output = d
            .execute_checked(reg, decoded, ctx, &decision, true, t)
            .await?;
        Ok(Answer::executed(output))
    }
}

/// Ledger scopes an approved amount is recorded under (so later calls see it in their totals).
fn session_scopes(p: &Principal, spec: &crate::spec::ToolSpec) -> Vec<String> {
    vec![session_scope(p, &spec.name), subject_scope(p, &spec.name)]
}

fn expired_outcome(r: &ApprovalRequest) -> StoredOutcome {
    let mut o = StoredOutcome::new(Status::ApprovalExpired);
    o.reason = Some("expired".to_owned());
    o.message = Some("the approval request expired; nothing was done".to_owned());
    o.operation_id = Some(r.operation_id.clone());
    o
}

fn rejected_outcome(r: &ApprovalRequest) -> StoredOutcome {
    let mut o = StoredOutcome::new(Status::ApprovalRejected);
    o.reason = Some("rejected".to_owned());
    o.message = Some("a human rejected this action; nothing was done".to_owned());
    o.operation_id = Some(r.operation_id.clone());
    o
}

fn mismatch_outcome(r: &ApprovalRequest) -> StoredOutcome {
    let mut o = rejected_outcome(r);
    o.reason = Some("binding_mismatch".to_owned());
    o
}

fn lost_race() -> Stop {
    Stop::new(
        Status::InProgress,
        "concurrent_decision",
        "another decision on this request is in progress",
    )
}

fn unavailable() -> Stop {
    Stop::new(
        Status::Unavailable,
        "approval_store_unavailable",
        "approvals are unavailable",
    )
}
