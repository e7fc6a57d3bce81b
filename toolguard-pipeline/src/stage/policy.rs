//! Risk policy: per-call limits, per-session and per-subject cumulative amounts over sliding
//! windows, per-session call rates, and the causes that make a call need a human.

use std::time::SystemTime;

use serde_json::Value;

use super::Stop;
use crate::call::Principal;
use crate::outcome::Status;
use crate::spec::{Risk, ToolSpec};
use crate::store::deadline::Deadlined;
use crate::store::{ScopeLimit, SessionLedger};

pub(crate) use crate::risk::PolicyDecision;
pub(crate) use crate::risk::{
    AmountLimit, OnExceed, RiskPolicy, approval_holds, session_scope, subject_scope,
};
pub(crate) use crate::risk::{RateLimit, ToolRules, amount_text, limit_message, unavailable};
pub(crate) use crate::spec::measure_amount;

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
    match evaluated.and_then(|d| crate::stage::provenance::flow(core, spec, args, t, d)) {
        Ok(mut decision) => {
            crate::stage::detect::gate(core, spec, principal, &mut decision).await?;
            Ok(decision)
        }
        Err(stop) if stop.status == Status::PolicyDenied => {
            let stage = super::Stage::Policy;
            // Boxed: a denial is rare, and the replay's state would otherwise enlarge every
            // call's future.
            Err(Box::pin(super::replay::or_stop(
                core, spec, principal, stage, stop, t,
            ))
            .await)
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
        approval_message: None,
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
        check_rate(ledger, spec, principal, rate, now).await?;
    }
    let amount = decision.amount.unwrap_or(0);
    if let Some(max) = rules.max_per_call
        && amount > max
    {
        let message = format!(
            "the amount {} exceeds the per-call limit of {}; nothing was done",
            amount_text(spec, amount),
            amount_text(spec, max)
        );
        return Err(Stop::new(Status::PolicyDenied, "over_call_limit", message));
    }
    approval_cause(policy, spec, args, principal, amount, &mut decision);
    apply_amount_limits(ledger, rules, spec, principal, amount, now, &mut decision).await?;
    Ok(decision)
}

/// Counts the call against the session's rate of `spec`; a call over it is `rate_limited`,
/// with the window as the longest wait before a retry.
async fn check_rate(
    ledger: &Deadlined<dyn SessionLedger>,
    spec: &ToolSpec,
    principal: &Principal,
    rate: RateLimit,
    now: SystemTime,
) -> Result<(), Stop> {
    let scope = session_scope(principal, &spec.name);
    let counted = ledger
        .hit(&scope, rate.max_calls, rate.window, now)
        .await
        .map_err(|_| unavailable())?;
    if counted {
        return Ok(());
    }
    let secs = rate.window.as_secs().max(1);
    let stop = Stop::new(
        Status::PolicyDenied,
        "rate_limited",
        format!(
            "too many calls of this tool in this session: at most {} per {secs} s",
            rate.max_calls
        ),
    );
    Err(stop.retry_after(rate.window))
}

/// Why a call needs a human before any cumulative limit is read: a critical tool, an amount over
/// the approval threshold, or the host's hook.
fn approval_cause(
    policy: &RiskPolicy,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
    amount: u64,
    decision: &mut PolicyDecision,
) {
    if spec.risk == Risk::Critical {
        decision.approval_cause = Some("critical".to_owned());
    } else if let Some(n) = spec.approval_over.filter(|n| amount > *n) {
        decision.approval_cause = Some("approval_over".to_owned());
        decision.approval_message = Some(format!(
            "the amount {} is over the approval threshold of {}",
            amount_text(spec, amount),
            amount_text(spec, n)
        ));
    } else if policy
        .hook
        .as_ref()
        .is_some_and(|h| h(spec, args, principal))
    {
        decision.approval_cause = Some("policy".to_owned());
    }
}

/// The session's and the subject's cumulative amount limits: a call that does not fit is denied
/// or held (unless another cause already holds it); every limit that applies is recorded in the
/// decision for settling.
async fn apply_amount_limits(
    ledger: &Deadlined<dyn SessionLedger>,
    rules: &ToolRules,
    spec: &ToolSpec,
    principal: &Principal,
    amount: u64,
    now: SystemTime,
    decision: &mut PolicyDecision,
) -> Result<(), Stop> {
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
            let left = limit_left(spec, code, limit.limit, total, amount);
            match limit.on_exceed {
                OnExceed::Deny => {
                    let message = format!("{left}; nothing was done");
                    return Err(Stop::new(Status::PolicyDenied, code, message));
                }
                OnExceed::RequireApproval if decision.approval_cause.is_none() => {
                    decision.approval_cause = Some(code.to_owned());
                    decision.approval_message = Some(left);
                }
                OnExceed::RequireApproval => {}
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
    Ok(())
}

/// The sentence of a cumulative limit the call does not fit: which limit, what is used, what
/// is left, and what the call asks for.
fn limit_left(spec: &ToolSpec, code: &str, limit: u64, total: u64, amount: u64) -> String {
    format!(
        "{} ({} of {} used in the window, {} left; this call asks for {})",
        limit_message(code),
        amount_text(spec, total),
        amount_text(spec, limit),
        amount_text(spec, limit.saturating_sub(total)),
        amount_text(spec, amount)
    )
}
