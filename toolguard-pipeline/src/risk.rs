//! The risk policy's configuration ([`RiskPolicy`]): per-call limits, per-session and
//! per-subject cumulative amounts over sliding windows, per-session call rates, approver roles,
//! approval hooks and the flow policy; and the ledger scopes its limits are kept in. The policy
//! stage of the pipeline evaluates it for each call.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::call::Principal;
use crate::outcome::{Status, Stop};
use crate::spec::ToolSpec;
use crate::store::ScopeLimit;

/// What happens when a call would cross a cumulative limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnExceed {
    /// The call waits for a human (`pending_approval`).
    RequireApproval,
    /// The call is refused (`policy_denied`).
    Deny,
}

/// A cumulative amount limit over a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmountLimit {
    /// Most amount (minor units) within the window that executes unattended.
    pub limit: u64,
    /// Window length.
    pub window: Duration,
    /// What crossing it does.
    pub on_exceed: OnExceed,
}

/// A call-rate limit over a sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Most calls within the window.
    pub max_calls: u32,
    /// Window length.
    pub window: Duration,
}

/// A hook that may demand approval for a call (`true`: a human must approve).
pub type ApprovalHook = Arc<dyn Fn(&ToolSpec, &Value, &Principal) -> bool + Send + Sync>;

/// The rules of one tool.
#[derive(Clone, Default)]
pub(crate) struct ToolRules {
    pub(crate) session_amount: Option<AmountLimit>,
    pub(crate) subject_amount: Option<AmountLimit>,
    pub(crate) max_per_call: Option<u64>,
    pub(crate) session_rate: Option<RateLimit>,
    pub(crate) approver_roles: Option<Vec<String>>,
}

/// The risk policy of a dispatcher. Rules are per tool; the revision is bound into approvals, so
/// raising it voids approvals granted under the old rules.
#[derive(Clone)]
#[must_use]
pub struct RiskPolicy {
    pub(crate) rules: HashMap<String, ToolRules>,
    approver_roles: Vec<String>,
    approval_ttl: Duration,
    revision: u32,
    pub(crate) hook: Option<ApprovalHook>,
    flow: crate::provenance::FlowPolicy,
}

impl std::fmt::Debug for RiskPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RiskPolicy")
            .field("tools", &self.rules.keys().collect::<Vec<_>>())
            .field("approver_roles", &self.approver_roles)
            .field("approval_ttl", &self.approval_ttl)
            .field("revision", &self.revision)
            .finish()
    }
}

impl Default for RiskPolicy {
    fn default() -> Self {
        RiskPolicy {
            rules: HashMap::new(),
            approver_roles: vec!["approver".to_owned()],
            approval_ttl: Self::DEFAULT_APPROVAL_TTL,
            revision: 1,
            hook: None,
            flow: crate::provenance::FlowPolicy::default(),
        }
    }
}

impl RiskPolicy {
    /// How long an approval request stays valid by default.
    pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(15 * 60);

    /// A policy with no limits; approvers need the role `approver`.
    pub fn new() -> Self {
        Self::default()
    }

    fn rules(&mut self, tool: &str) -> &mut ToolRules {
        self.rules.entry(tool.to_owned()).or_default()
    }

    /// Cumulative amount of `tool` per agent session within `window`.
    pub fn session_limit(
        mut self,
        tool: &str,
        limit: u64,
        window: Duration,
        on_exceed: OnExceed,
    ) -> Self {
        self.rules(tool).session_amount = Some(AmountLimit {
            limit,
            window,
            on_exceed,
        });
        self
    }

    /// Cumulative amount of `tool` per subject (across sessions) within `window`.
    pub fn subject_limit(
        mut self,
        tool: &str,
        limit: u64,
        window: Duration,
        on_exceed: OnExceed,
    ) -> Self {
        self.rules(tool).subject_amount = Some(AmountLimit {
            limit,
            window,
            on_exceed,
        });
        self
    }

    /// Amounts above `max` are refused outright (approval cannot lift it).
    pub fn max_per_call(mut self, tool: &str, max: u64) -> Self {
        self.rules(tool).max_per_call = Some(max);
        self
    }

    /// At most `max_calls` calls of `tool` per session within `window`.
    pub fn session_rate(mut self, tool: &str, max_calls: u32, window: Duration) -> Self {
        self.rules(tool).session_rate = Some(RateLimit { max_calls, window });
        self
    }

    /// Roles eligible to approve calls of every tool (default `approver`).
    pub fn approver_roles(mut self, roles: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.approver_roles = roles.into_iter().map(Into::into).collect();
        self
    }

    /// Roles eligible to approve calls of `tool`.
    pub fn tool_approver_roles(
        mut self,
        tool: &str,
        roles: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.rules(tool).approver_roles = Some(roles.into_iter().map(Into::into).collect());
        self
    }

    /// How long approval requests stay valid.
    pub fn approval_ttl(mut self, ttl: Duration) -> Self {
        self.approval_ttl = ttl;
        self
    }

    /// Sets the policy revision (bound into approvals).
    pub fn revision(mut self, revision: u32) -> Self {
        self.revision = revision;
        self
    }

    /// Demands approval whenever `hook` says so.
    pub fn require_approval_when(
        mut self,
        hook: impl Fn(&ToolSpec, &Value, &Principal) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.hook = Some(Arc::new(hook));
        self
    }

    /// Sets the flow policy: what a session that has read untrusted content may do unattended
    /// (see [`crate::provenance`]; default [`FlowPolicy::default`](crate::FlowPolicy)).
    pub fn flow(mut self, flow: crate::provenance::FlowPolicy) -> Self {
        self.flow = flow;
        self
    }

    /// The flow policy.
    pub fn current_flow(&self) -> &crate::provenance::FlowPolicy {
        &self.flow
    }

    /// The tool names this policy has rules for (checked against the registry at build).
    pub(crate) fn configured_tools(&self) -> impl Iterator<Item = &str> {
        let flow = self.flow.configured_tools();
        self.rules.keys().map(String::as_str).chain(flow)
    }

    /// The policy revision.
    pub fn current_revision(&self) -> u32 {
        self.revision
    }

    /// How long approval requests stay valid.
    pub fn current_approval_ttl(&self) -> Duration {
        self.approval_ttl
    }

    /// Roles eligible to approve calls of `tool`.
    pub fn eligible_roles(&self, tool: &str) -> Vec<String> {
        self.rules
            .get(tool)
            .and_then(|r| r.approver_roles.clone())
            .unwrap_or_else(|| self.approver_roles.clone())
    }
}

/// Ledger scope of `tool` in `p`'s session.
pub fn session_scope(p: &Principal, tool: &str) -> String {
    format!(
        "session|{}|{}|{}|{}",
        p.tenant.len(),
        p.tenant,
        p.session_id,
        tool
    )
}

/// Ledger scope of `tool` for `p` across sessions.
pub fn subject_scope(p: &Principal, tool: &str) -> String {
    format!(
        "subject|{}|{}|{}|{}",
        p.tenant.len(),
        p.tenant,
        p.subject,
        tool
    )
}

/// The ledger reservation of an approval request for `p`'s call of `tool`, in both the session
/// and the subject scope: `deny` limits (scope, limit, window) keep their bound, every other scope
/// is held unbounded, so that the pending amount counts in later calls' totals but only a
/// `Deny`-mode limit can refuse it.
pub fn approval_holds(p: &Principal, tool: &str, deny: &[ScopeLimit]) -> Vec<ScopeLimit> {
    [session_scope(p, tool), subject_scope(p, tool)]
        .into_iter()
        .map(|scope| {
            deny.iter()
                .find(|l| l.scope == scope)
                .cloned()
                .unwrap_or(ScopeLimit {
                    scope,
                    limit: u64::MAX,
                    window: Duration::ZERO,
                })
        })
        .collect()
}

/// The reason code of a refused reservation in `scope`: `session_limit` or `subject_limit`.
pub(crate) fn limit_code(scope: &str) -> &'static str {
    if scope.starts_with("subject|") {
        "subject_limit"
    } else {
        "session_limit"
    }
}

/// The message of a refusal by a cumulative limit, naming the scope whose limit refused.
pub(crate) fn limit_message(code: &str) -> &'static str {
    if code == "subject_limit" {
        "the cumulative limit for this user is reached"
    } else {
        "the cumulative limit for this session is reached"
    }
}

/// What the policy decided for a call that may go on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PolicyDecision {
    /// The amount measured, if the tool has an amount field.
    pub amount: Option<u64>,
    /// Why a human must approve, if one must (the reason code of the hold).
    pub approval_cause: Option<String>,
    /// The hold's reason as a sentence for the model and the reviewer (which threshold and
    /// amount, which limit and how much is left); `None` where the cause says it all.
    pub approval_message: Option<String>,
    /// Limits to admit the amount against right before execution.
    pub limits: Vec<ScopeLimit>,
    /// The limits of [`limits`](Self::limits) in `Deny` mode: an approval request's reservation
    /// must fit them (see [`holds`](Self::holds)).
    pub deny: Vec<ScopeLimit>,
}

impl PolicyDecision {
    /// What an approval request of `p`'s call of `tool` holds while it waits (see
    /// [`approval_holds`]): the session and subject scopes, each with its limit when that limit
    /// is in `Deny` mode, unbounded otherwise. Made only when a request opens, so a call that
    /// needs no approval never builds its scope strings.
    pub fn holds(&self, p: &Principal, tool: &str) -> Vec<ScopeLimit> {
        approval_holds(p, tool, &self.deny)
    }

    /// Ledger scopes of the decision.
    pub fn scopes(&self) -> Vec<String> {
        self.limits.iter().map(|l| l.scope.clone()).collect()
    }
}

/// `amount` (minor units) as the call's amount field states it: in major units with the
/// currency of a scaled money field (`1500.00 USD`), else the integer (`150000`).
pub(crate) fn amount_text(spec: &ToolSpec, amount: u64) -> String {
    let scaled = spec
        .amount_field()
        .and_then(|f| Some((f.scale?, f.currency.as_deref().unwrap_or(""))));
    match scaled {
        Some((scale, currency)) if scale > 0 => {
            let unit = 10u64.pow(u32::from(scale));
            let (major, minor) = (amount / unit, amount % unit);
            let width = usize::from(scale);
            format!("{major}.{minor:0width$} {currency}")
                .trim_end()
                .to_owned()
        }
        Some((_, currency)) => format!("{amount} {currency}").trim_end().to_owned(),
        None => amount.to_string(),
    }
}

/// The sentence of a hold of cause `cause` that says no more than its code.
pub(crate) fn cause_message(cause: &str) -> Option<&'static str> {
    match cause {
        "critical" => Some("every call of this tool needs a human (risk = \"critical\")"),
        "policy" => Some("the policy requires a human's approval for every call of this tool"),
        _ => None,
    }
}

/// The stop of a call whose ledger did not answer.
pub(crate) fn unavailable() -> Stop {
    Stop::new(
        Status::Unavailable,
        "ledger_unavailable",
        "the risk ledger is unavailable; nothing was done",
    )
}
