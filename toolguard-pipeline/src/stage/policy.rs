//! Risk policy: per-call limits, per-session and per-subject cumulative amounts over sliding
//! windows, per-session call rates, and the causes that make a call need a human.

use std::time::SystemTime;

use serde_json::Value;

use super::Stop;
use crate::call::Principal;
use crate::clock::Clock;
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

/// The policy decision of a call when it needs no store: the tool has no windowed rule (rate,
/// cumulative amounts) and no detector response can hold it. `None` otherwise: the call then
/// takes [`stage`]. Made without a future, so that a call the policy only measures does not carry
/// the ledger's reads in its state.
pub(crate) fn without_stores<S: Send + Sync + 'static>(
    core: &super::core::Core<S>,
    rules: &ToolRules,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
    t: &super::trace::Trace,
) -> Option<Result<PolicyDecision, Stop>> {
    if windowed(rules) || crate::stage::detect::gates(core, spec) {
        return None;
    }
    let decided = measured(spec, args).and_then(|mut decision| {
        per_call(&core.policy, rules, spec, args, principal, &mut decision)?;
        Ok(decision)
    });
    Some(decided.and_then(|d| crate::stage::provenance::flow(core, spec, args, t, d)))
}

/// The policy stage. A denial (limit used up, rate hit) gives way to the stored outcome of the
/// same request under the caller's key, like a failed preflight: the retry of a call that
/// already executed gets its stored outcome.
pub(crate) async fn stage<S: Send + Sync + 'static>(
    core: &super::core::Core<S>,
    rules: &ToolRules,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
    t: &mut super::trace::Trace,
) -> Result<PolicyDecision, super::trace::Exit> {
    let ledger = &*core.stores.ledger;
    let evaluated = evaluate(
        &core.policy,
        rules,
        ledger,
        spec,
        args,
        principal,
        &*core.clock,
    )
    .await;
    match evaluated.and_then(|d| crate::stage::provenance::flow(core, spec, args, t, d)) {
        Ok(mut decision) => {
            crate::stage::detect::gate(core, spec, principal, &mut decision).await?;
            Ok(decision)
        }
        Err(stop) => Err(refused(core, spec, principal, stop, t).await),
    }
}

/// How a call the policy refused ends: a denial gives way to the stored outcome of the same
/// request under the caller's key ([`stage`]); any other refusal stops the call.
pub(crate) async fn refused<S: Send + Sync + 'static>(
    core: &super::core::Core<S>,
    spec: &ToolSpec,
    principal: &Principal,
    stop: Stop,
    t: &mut super::trace::Trace,
) -> super::trace::Exit {
    if stop.status != Status::PolicyDenied {
        return stop.into();
    }
    let stage = super::Stage::Policy;
    // Boxed: a denial is rare, and the replay's state would otherwise enlarge every call's
    // future.
    Box::pin(super::replay::or_stop(
        core, spec, principal, stage, stop, t,
    ))
    .await
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

/// Whether `rules` has a rule over a window of time, which reads the session ledger. Every
/// field is named: a rule added to [`ToolRules`] must be sorted here before this compiles, so
/// that no windowed rule is skipped by [`without_stores`].
fn windowed(rules: &ToolRules) -> bool {
    let ToolRules {
        session_amount,
        subject_amount,
        session_rate,
        max_per_call: _,
        approver_roles: _,
    } = rules;
    session_rate.is_some() || session_amount.is_some() || subject_amount.is_some()
}

/// A decision holding the call's measured amount, and nothing else yet.
fn measured(spec: &ToolSpec, args: &Value) -> Result<PolicyDecision, Stop> {
    Ok(PolicyDecision {
        amount: measure_amount(spec, args)?,
        ..Default::default()
    })
}

/// What the policy decides from the call alone: the per-call limit, then the causes that need a
/// human.
fn per_call(
    policy: &RiskPolicy,
    rules: &ToolRules,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
    decision: &mut PolicyDecision,
) -> Result<(), Stop> {
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
    approval_cause(policy, spec, args, principal, amount, decision);
    Ok(())
}

/// Evaluates the policy for a call under its tool's `rules`: its rate, then what the call alone decides
/// ([`per_call`]), then the cumulative amounts.
async fn evaluate(
    policy: &RiskPolicy,
    rules: &ToolRules,
    ledger: &Deadlined<dyn SessionLedger>,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
    clock: &dyn Clock,
) -> Result<PolicyDecision, Stop> {
    let mut decision = measured(spec, args)?;
    // The clock is read once, when a windowed rule first needs it.
    let read = std::sync::OnceLock::new();
    let now = || *read.get_or_init(|| clock.now());
    if let Some(rate) = rules.session_rate {
        check_rate(ledger, spec, principal, rate, now()).await?;
    }
    per_call(policy, rules, spec, args, principal, &mut decision)?;
    let amount = decision.amount.unwrap_or(0);
    apply_amount_limits(ledger, rules, spec, principal, amount, &now, &mut decision).await?;
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
    now: &(dyn Fn() -> SystemTime + Sync),
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
            .total(&scope, limit.window, now())
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
