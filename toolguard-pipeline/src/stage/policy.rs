//! Risk policy: per-call limits, per-session and per-subject cumulative amounts over sliding
//! windows, per-session call rates, and the causes that make a call need a human.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::Stop;
use crate::call::Principal;
use crate::outcome::Status;
use crate::spec::{Risk, ToolSpec};
use crate::store::deadline::Deadlined;
use crate::store::{ScopeLimit, SessionLedger};

/// What happens when a call would cross a cumulative limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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

#[derive(Clone, Default)]
struct ToolRules {
    session_amount: Option<AmountLimit>,
    subject_amount: Option<AmountLimit>,
    max_per_call: Option<u64>,
    session_rate: Option<RateLimit>,
    approver_roles: Option<Vec<String>>,
}

/// The risk policy of a dispatcher. Rules are per tool; the revision is bound into approvals, so
/// raising it voids approvals granted under the old rules.
#[derive(Clone)]
#[must_use]
pub struct RiskPolicy {
    rules: HashMap<String, ToolRules>,
    approver_roles: Vec<String>,
    approval_ttl: Duration,
    revision: u32,
    hook: Option<ApprovalHook>,
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

/// What the policy decided for a call that may go on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyDecision {
    /// The amount measured, if the tool has an amount field.
    pub amount: Option<u64>,
    /// Why a human must approve, if one must.
    pub approval_cause: Option<String>,
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

/// The amount a call moves: the amount field as an integer, or an object's `amount` member.
/// `None` when there is no amount field, it is absent, or it cannot be read (see
/// [`measure_amount`], which the policy uses and which fails closed on the latter).
pub fn amount_of(spec: &ToolSpec, args: &Value) -> Option<u64> {
    measure_amount(spec, args).ok().flatten()
}

/// The amount a call moves, failing closed: `Ok(None)` when the tool has no amount field or the
/// call leaves it out (or null); `policy_denied` (reason `amount_unreadable`) when the value is
/// not a non-negative integer amount (negative, fractional, a string, another shape), so that
/// it is never counted as 0.
pub fn measure_amount(spec: &ToolSpec, args: &Value) -> Result<Option<u64>, Stop> {
    let Some(field) = spec.amount_field() else {
        return Ok(None);
    };
    let value = match args.get(&field.name) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m.get("amount"),
        Some(v) => Some(v),
    };
    match value.and_then(Value::as_u64) {
        Some(amount) => Ok(Some(amount)),
        None => Err(Stop::new(
            Status::PolicyDenied,
            "amount_unreadable",
            "the amount of this call cannot be read as a non-negative integer; nothing was done",
        )),
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

/// The stop of a call whose ledger did not answer.
pub(crate) fn unavailable() -> Stop {
    Stop::new(
        Status::Unavailable,
        "ledger_unavailable",
        "the risk ledger is unavailable; nothing was done",
    )
}

/// The policy stage. A denial (limit used up, rate hit) gives way to the stored outcome of the
/// same request under the caller's key, like a failed preflight: the retry of a call that
/// already executed gets its stored outcome.
pub(crate) async fn stage<S: Send + Sync + 'static>(
    core: &super::core::Core<S>,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
    t: &mut super::trace::Trace,
) -> Result<PolicyDecision, super::trace::Exit> {
    let ledger = &*core.stores.ledger;
    let evaluated = evaluate(&core.policy, ledger, spec, args, principal, core.now()).await;
    match evaluated.and_then(|d| crate::provenance::stage::flow(core, spec, &t.sources, d)) {
        Ok(mut decision) => {
            crate::detect::respond::gate(core, spec, principal, &mut decision).await?;
            Ok(decision)
        }
        Err(stop) if stop.status == Status::PolicyDenied => {
            let stage = super::Stage::Policy;
            Err(super::replay::or_stop(core, spec, principal, stage, stop, t).await)
        }
        Err(stop) => Err(stop.into()),
    }
}

/// The policy of an approved action: its amount (re-measured from the re-normalized stored
/// arguments) is booked by committing the reservation the request held since it opened, in the
/// requester's session and subject scopes, so later calls see it in their totals.
pub(crate) fn approved(
    requester: &Principal,
    spec: &ToolSpec,
    amount: Option<u64>,
) -> PolicyDecision {
    PolicyDecision {
        amount,
        approval_cause: None,
        limits: approval_holds(requester, &spec.name, &[]),
        deny: Vec::new(),
    }
}

/// Evaluates the policy for a call.
pub(crate) async fn evaluate(
    policy: &RiskPolicy,
    ledger: &Deadlined<dyn SessionLedger>,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
    now: SystemTime,
) -> Result<PolicyDecision, Stop> {
    // Borrowed: a tool without rules costs a lookup, never a copy of the rules.
    let no_rules = ToolRules::default();
    let rules = policy.rules.get(&spec.name).unwrap_or(&no_rules);
    let mut decision = PolicyDecision {
        amount: measure_amount(spec, args)?,
        ..Default::default()
    };

    if let Some(rate) = rules.session_rate {
        let scope = session_scope(principal, &spec.name);
        let counted = ledger
            .hit(&scope, rate.max_calls, rate.window, now)
            .await
            .map_err(|_| unavailable())?;
        if !counted {
            return Err(Stop::new(
                Status::PolicyDenied,
                "rate_limited",
                "too many calls of this tool in this session",
            ));
        }
    }

    let amount = decision.amount.unwrap_or(0);
    if let Some(max) = rules.max_per_call
        && amount > max
    {
        return Err(Stop::new(
            Status::PolicyDenied,
            "over_call_limit",
            "the amount exceeds the per-call limit",
        ));
    }

    if spec.risk == Risk::Critical {
        decision.approval_cause = Some("critical".to_owned());
    } else if spec.approval_over.is_some_and(|n| amount > n) {
        decision.approval_cause = Some("approval_over".to_owned());
    } else if policy
        .hook
        .as_ref()
        .is_some_and(|h| h(spec, args, principal))
    {
        decision.approval_cause = Some("policy".to_owned());
    }

    // A scope string is made only for a limit that applies.
    type ScopeOf = fn(&Principal, &str) -> String;
    let limits: [(Option<AmountLimit>, ScopeOf, &str); 2] = [
        (rules.session_amount, session_scope, "session_limit"),
        (rules.subject_amount, subject_scope, "subject_limit"),
    ];
    for (limit, scope_of, code) in limits {
        let Some(limit) = limit else { continue };
        let scope = scope_of(principal, &spec.name);
        let total = ledger
            .total(&scope, limit.window, now)
            .await
            .map_err(|_| unavailable())?;
        if total.saturating_add(amount) > limit.limit {
            match limit.on_exceed {
                OnExceed::Deny => {
                    return Err(Stop::new(Status::PolicyDenied, code, limit_message(code)));
                }
                OnExceed::RequireApproval => {
                    decision
                        .approval_cause
                        .get_or_insert_with(|| code.to_owned());
                }
            }
        }
        let scoped = ScopeLimit {
            scope,
            limit: limit.limit,
            window: limit.window,
        };
        if limit.on_exceed == OnExceed::Deny {
            decision.deny.push(scoped.clone());
        }
        decision.limits.push(scoped);
    }
    Ok(decision)
}

/// The message of a refusal by a cumulative limit, naming the scope whose limit refused.
pub(crate) fn limit_message(code: &str) -> &'static str {
    if code == "subject_limit" {
        "the cumulative limit for this user is reached"
    } else {
        "the cumulative limit for this session is reached"
    }
}
