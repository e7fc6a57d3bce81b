//! What a reviewer is shown of one approval request: the exact normalized arguments (with
//! `sensitive` fields redacted as in the audit), the amount formatted in its currency, the tool's
//! description and risk, requester, times, dual-control progress and the binding digest. The same
//! view feeds the HTML pages and the JSON API.

use serde::Serialize;
use serde_json::Value;
use toolguard_pipeline::audit::REDACTED;
use toolguard_pipeline::dispatcher::redact;
use toolguard_pipeline::store::{ApprovalRequest, ApprovalState};
use toolguard_pipeline::{Principal, ToolSpec};

use crate::money::{currency_of, format_amount, format_instant, format_remaining};

/// One argument as it will execute.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ArgumentView {
    /// Field name.
    pub name: String,
    /// The value: strings as they are, anything else as canonical JSON; `[redacted]` for a
    /// `sensitive` field.
    pub value: String,
    /// The field is `sensitive` and was redacted.
    pub redacted: bool,
    /// The field is the tool's amount.
    pub amount: bool,
    /// The field's description from the tool declaration.
    pub description: Option<String>,
    /// Where its value came from, when the call was proposed after untrusted content (see
    /// `toolguard::provenance::Origin`): `trusted`, `untrusted (from source …)` or `model`.
    pub origin: Option<String>,
}

/// One decision given so far.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct DecisionView {
    /// Who decided.
    pub approver: String,
    /// Approve (`true`) or reject.
    pub approve: bool,
    /// When.
    pub at: String,
    /// Reason of a rejection.
    pub reason: Option<String>,
}

/// An approval request as the console shows it to one reviewer.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct RequestView {
    /// Approval id.
    pub id: String,
    /// State (`pending`, `executed`, `rejected`, `expired`, `executing`).
    pub state: ApprovalState,
    /// Tool name.
    pub tool: String,
    /// The tool's description.
    pub tool_description: String,
    /// The tool's risk (`low` … `critical`).
    pub risk: String,
    /// Why approval is needed (code: `critical`, `approval_over`, `session_limit`, `policy`).
    pub cause: String,
    /// The same in words.
    pub cause_text: String,
    /// The rule that held this request, as the pipeline said it (the threshold and the amount,
    /// the limit and what is left, the untrusted content), when the request records it.
    pub cause_message: Option<String>,
    /// Requester (subject) and tenant.
    pub requester: String,
    /// Tenant.
    pub tenant: String,
    /// Normalized arguments, in field order.
    pub arguments: Vec<ArgumentView>,
    /// Amount in minor units.
    pub amount_minor: Option<u64>,
    /// Amount formatted in its currency (`20,000.00 USD`).
    pub amount: Option<String>,
    /// When proposed (UTC).
    pub created_at: String,
    /// When it expires (UTC).
    pub expires_at: String,
    /// Milliseconds since the epoch of `expires_at` (for the countdown).
    pub expires_at_ms: u64,
    /// Seconds left when the view was made (0 once expired).
    pub expires_in_s: u64,
    /// Time left, in words.
    pub expires_in: String,
    /// Distinct approvals given.
    pub approvals_given: usize,
    /// Distinct approvals needed.
    pub approvals_required: u8,
    /// Decisions so far.
    pub decisions: Vec<DecisionView>,
    /// Roles of which an approver needs one.
    pub eligible_roles: Vec<String>,
    /// Binding digest the decision is sealed with.
    pub binding_digest: String,
    /// Request digest (tenant, subject, tool, revision, normalized arguments).
    pub request_digest: String,
    /// Whether this reviewer may decide now (the dispatcher decides; this only hides buttons).
    pub eligible: bool,
    /// Why not, in words.
    pub ineligible_reason: Option<String>,
}

impl RequestView {
    /// The view of `request` for `viewer` at `now_ms`. `spec` is the tool's declaration; without
    /// it (tool no longer registered) every argument value is redacted.
    pub fn new(
        request: &ApprovalRequest,
        spec: Option<&ToolSpec>,
        viewer: &Principal,
        now_ms: u64,
    ) -> Self {
        let expires_in_s = request.expires_at_ms.saturating_sub(now_ms) / 1000;
        let ineligible_reason = ineligible(request, viewer, now_ms);
        RequestView {
            id: request.id.clone(),
            state: request.state,
            tool: request.tool.clone(),
            tool_description: spec.map(|s| s.description.clone()).unwrap_or_default(),
            risk: spec.map_or("unknown", |s| s.risk.as_str()).to_owned(),
            cause: request.cause.clone(),
            cause_text: cause_text(&request.cause).to_owned(),
            cause_message: request.cause_message.clone(),
            requester: request.requester.subject.to_string(),
            tenant: request.requester.tenant.to_string(),
            arguments: arguments(request, spec),
            amount_minor: request.amount,
            amount: request
                .amount
                .map(|a| format_amount(a, currency_of(&request.arguments))),
            created_at: format_instant(request.created_at_ms),
            expires_at: format_instant(request.expires_at_ms),
            expires_at_ms: request.expires_at_ms,
            expires_in_s,
            expires_in: format_remaining(expires_in_s),
            approvals_given: request.approvers().len(),
            approvals_required: request.approvals_required,
            decisions: request
                .decisions
                .iter()
                .map(|d| DecisionView {
                    approver: d.approver.clone(),
                    approve: d.approve,
                    at: format_instant(d.at_ms),
                    reason: d.reason.clone(),
                })
                .collect(),
            eligible_roles: request.eligible_roles.clone(),
            binding_digest: request.binding_digest.clone(),
            request_digest: request.request_digest.clone(),
            eligible: ineligible_reason.is_none(),
            ineligible_reason,
        }
    }

    /// The state in words (`pending`, `executed`, `rejected`, `expired`, `executing`).
    pub fn state_label(&self) -> &'static str {
        match self.state {
            ApprovalState::Pending if self.expires_in_s == 0 => "expired",
            ApprovalState::Pending => "pending",
            ApprovalState::Executing => "executing",
            ApprovalState::Executed => "executed",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Expired => "expired",
            _ => "unknown",
        }
    }

    /// Whether the request still waits for a decision.
    pub fn is_pending(&self) -> bool {
        self.state == ApprovalState::Pending && self.expires_in_s > 0
    }
}

/// Why `viewer` cannot decide `request` (presentation only: the dispatcher enforces the rules).
fn ineligible(request: &ApprovalRequest, viewer: &Principal, now_ms: u64) -> Option<String> {
    let reason = if request.state != ApprovalState::Pending {
        "this request is no longer pending".to_owned()
    } else if now_ms >= request.expires_at_ms {
        "this request expired".to_owned()
    } else if viewer.subject == request.requester.subject {
        "you requested this action; another person must decide".to_owned()
    } else if request
        .decisions
        .iter()
        .any(|d| d.approver == viewer.subject)
    {
        "you already decided; another approver must complete it".to_owned()
    } else if !request.eligible_roles.iter().any(|r| viewer.has_role(r)) {
        format!(
            "deciding needs one of the roles: {}",
            request.eligible_roles.join(", ")
        )
    } else {
        return None;
    };
    Some(reason)
}

/// The normalized arguments, redacted as in the audit, in declaration order (then any others).
fn arguments(request: &ApprovalRequest, spec: Option<&ToolSpec>) -> Vec<ArgumentView> {
    let Value::Object(map) = &request.arguments else {
        return Vec::new();
    };
    let redacted = spec.map(|s| redact(s, &request.arguments));
    let mut names: Vec<&String> = Vec::new();
    if let Some(spec) = spec {
        names.extend(
            spec.fields
                .iter()
                .filter_map(|f| map.get_key_value(&f.name).map(|(k, _)| k)),
        );
    }
    let mut rest: Vec<&String> = map.keys().filter(|k| !names.contains(k)).collect();
    rest.sort();
    names.extend(rest);
    let key_field = spec.and_then(|s| s.idempotency_key_field.as_deref());
    let amount_field = spec.and_then(|s| s.amount_field()).map(|f| f.name.as_str());
    names
        .into_iter()
        .filter(|name| Some(name.as_str()) != key_field)
        .map(|name| {
            let field = spec.and_then(|s| s.field(name));
            let value = redacted
                .as_ref()
                .and_then(|r| r.get(name))
                .map_or_else(|| REDACTED.to_owned(), display);
            ArgumentView {
                redacted: redacted.is_none() || field.is_some_and(|f| f.sensitive),
                amount: Some(name.as_str()) == amount_field,
                description: field.and_then(|f| f.description.clone()),
                origin: request
                    .origins
                    .iter()
                    .find(|o| &o.field == name)
                    .map(|o| o.origin.to_string()),
                name: name.clone(),
                value,
            }
        })
        .collect()
}

/// A reviewer's reading of a cause code.
fn cause_text(cause: &str) -> &'static str {
    match cause {
        "critical" => "the tool is critical: every call needs a human",
        "approval_over" => "the amount is over the tool's approval threshold",
        "session_limit" => "the agent session's cumulative limit would be exceeded",
        "subject_limit" => "the customer's cumulative limit would be exceeded",
        "policy" => "a policy rule asks for a human",
        "provenance" => "the call follows untrusted content the session read (see its sources)",
        _ => "the risk policy asks for a human",
    }
}

fn display(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => toolguard_pipeline::digest::canonical_json(other),
    }
}
