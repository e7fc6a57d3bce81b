//! The stage list: the one order of the pipeline, with the points where each entry point enters
//! it. Every entry point runs its part of this list and nothing else:
//!
//! | # | stage | call ([`call`]) | decision ([`after_human`]) | status ([`status_authority`]) |
//! | --- | --- | --- | --- | --- |
//! | 1 | gate, parse, registry, validate, sanitize, intent | ✓ | the stored action re-normalized and its seal checked (`approvals`) | — |
//! | 2 | custom stages at [`StagePoint::AfterSanitize`] | ✓ | ✓ (the resume point after the human) | — |
//! | 3 | principal (fresh) | the caller | the requester, refreshed | the caller |
//! | 4 | permit (the `Authorizer`) | ✓ | ✓ | ✓ |
//! | 5 | custom stages at [`StagePoint::AfterPermit`] | ✓ | ✓ | — |
//! | 6 | preflight, authorize (the resource), provenance | ✓ | — (checked again by recheck) | — |
//! | 7 | policy | limits and flow | the approved amount, its reservation | — |
//! | 8 | custom stages at [`StagePoint::AfterPolicy`] | ✓ | ✓ | — |
//! | 9 | idempotency, approval? | ✓ | — (the human decided) | — |
//! | 10 | recheck, execute, envelope ([`execution`]) | ✓ | ✓ | reconcile instead (`operations`) |
//! | 11 | provenance (an untrusted result becomes a source); what to settle is noted | ✓ | the request to close (`approvals`) | the reconciled outcome |
//! | 12 | finish: the one terminal audit entry, then the operation record and the settlement (key, request), detection | ✓ | ✓ | ✓ |
//!
//! A custom stage runs on every path that can execute a tool; the status query executes nothing
//! and runs only the principal and permit stages before it reads (and may reconcile).

use std::sync::Arc;

use super::core::{Core, Registered};
use super::policy::PolicyDecision;
use super::trace::{Answer, Exit, Trace};
use super::{Stage, Stop, execution};
use crate::call::{Principal, RawArguments, ToolCall};
use crate::custom::{StageInput, StagePoint};
use crate::erased::DecodedArgs;
use crate::spec::ToolSpec;
use crate::store::ApprovalRequest;
use crate::tool::ToolContext;

/// Rows 1 to 11 for a model's call. Each step passes the call on, stops it, or answers it from
/// a stored outcome (`?`).
pub(crate) async fn call<S: Send + Sync + 'static>(
    core: &Core<S>,
    call: &ToolCall,
    p: &Principal,
    t: &mut Trace,
) -> Result<Answer, Exit> {
    // Looked up once: the metrics label of a registered tool, even when its arguments do not
    // parse, and the registry stage's answer.
    let registered = core.tools.get(&call.tool);
    t.tool = registered.map(|r| r.name.clone());
    t.at(Stage::Parse);
    if let Err(stop) = super::gate::check(&call.arguments, core.sanitizer.limits()) {
        // Refused by its size: the caller frees it off its path (`deferred_drop`).
        t.oversized = true;
        return Err(stop.into());
    }
    let args = super::parse::arguments(&call.arguments)?;
    t.at(Stage::Registry);
    let tool = super::registry::found(registered)?;
    let spec = tool.spec();
    t.at(Stage::Validate);
    super::validate::arguments(&tool.input, &args)?;
    super::idempotency::check_raw_key(spec, call, &args)?;
    t.at(Stage::Sanitize);
    let clean = super::sanitize::run(core, tool, args, t)?;
    // The one copy of the arguments every later stage reads.
    let args = Arc::new(clean.args);
    super::intent::record(core.keys.as_deref(), spec, call, &args, p, t)?;
    let input = StageInput {
        call,
        principal: p,
        spec,
        arguments: &args,
    };
    custom(core, StagePoint::AfterSanitize, input).await?;
    t.at(Stage::Principal);
    super::principal::fresh(core, p)?;
    permit(core, input, t).await?;
    let decoded = tool.decode(&args)?;
    let call_id = t.call_id.insert(call.call_id.as_str().into()).clone();
    let mut ctx = core
        .context(p, call_id, t.operation_id.clone())
        .with_resolved_urls(clean.resolved);
    if spec.untrusted_output {
        ctx = ctx.with_source_label_slot();
    }
    t.source_label = ctx.source_label();
    super::preflight::run(core, spec, p, &*decoded, &ctx, t).await?;
    if crate::stage::provenance::judged(spec) {
        crate::stage::provenance::load(core, spec, call, p, &args, t).await?;
    }
    t.at(Stage::Policy);
    // A tool without windowed rules is decided without a store, and without a future.
    let rules = &tool.rules;
    let decision = match super::policy::without_stores(core, rules, spec, &args, p, t) {
        Some(Ok(decision)) => decision,
        Some(Err(stop)) => return Err(super::policy::refused(core, spec, p, stop, t).await),
        None => super::policy::stage(core, rules, spec, &args, p, t).await?,
    };
    custom(core, StagePoint::AfterPolicy, input).await?;
    t.at(Stage::Idempotency);
    // A call without a key has nothing to reserve: no future is made for it.
    let held = match t.idempotency_key {
        Some(_) => super::idempotency::admit(core, call, tool, p, t).await?,
        None => None,
    };
    t.admitted = !spec.read_only;
    t.at(Stage::Approval);
    let answer = match decision.approval_cause {
        Some(_) => {
            let key = held.as_ref().map(|h| h.key.clone());
            // Boxed: a call that needs approval is rare, and the request's state would otherwise
            // enlarge every call's future.
            Box::pin(super::approval::ask(core, spec, call, p, key, &decision, t)).await
        }
        None => {
            let via = super::Via::Call(held.as_ref());
            execution(core, tool, decoded, ctx, &decision, via, t).await
        }
    };
    let cause = decision.approval_cause.as_deref();
    let answer = crate::stage::provenance::settle(core, spec, cause, answer, t);
    let answer = Answer::from_result(answer);
    // Stored under the key once the call's audit entry is written (`finish`).
    super::settle::held(held, tool.idempotency_ttl, &answer, t);
    Ok(answer)
}

/// What an approved action brings to the list when it resumes after the human.
pub(crate) struct Approved<'r, S: Send + Sync + 'static> {
    /// The request the human decided.
    pub(crate) request: &'r ApprovalRequest,
    /// The registered tool.
    pub(crate) tool: &'r Registered<S>,
    /// The stored arguments, normalized again; their digests match the sealed ones.
    pub(crate) args: serde_json::Value,
    /// The URLs the sanitizer checked just now (the handler connects to these).
    pub(crate) resolved: Vec<crate::sanitize::ResolvedUrl>,
    /// The amount measured from the re-normalized action.
    pub(crate) amount: Option<u64>,
}

/// Rows 2 to 10 for an approved action, resuming the list after the human: the custom stages on its
/// re-normalized arguments, the requester as they are now, permit, the approved amount's policy
/// and the execution tail.
pub(crate) async fn after_human<S: Send + Sync + 'static>(
    core: &Core<S>,
    approved: Approved<'_, S>,
    t: &mut Trace,
) -> Result<Answer, Stop> {
    let Approved {
        request,
        tool,
        args,
        resolved,
        amount,
    } = approved;
    let spec = tool.spec();
    let call = resumed_call(request, &args);
    // As on a call, the custom stages after sanitization see the principal before it is checked.
    let unchecked = StageInput {
        call: &call,
        principal: &request.requester,
        spec,
        arguments: &args,
    };
    custom(core, StagePoint::AfterSanitize, unchecked).await?;
    t.at(Stage::Principal);
    let requester = super::principal::refreshed(core, &request.requester).await?;
    requester_fresh(core, &requester)?;
    let input = StageInput {
        principal: &requester,
        ..unchecked
    };
    permit(core, input, t).await?;
    let decoded: Box<dyn DecodedArgs<S>> = tool
        .tool
        .decode(args.clone())
        .map_err(super::validate::decode_error)?;
    // The addresses checked just now, so that the handler connects to them (DNS pinning).
    let ctx: ToolContext<S> = core
        .context(
            &requester,
            request.call_id.as_str().into(),
            t.operation_id.clone(),
        )
        .with_resolved_urls(resolved);
    t.at(Stage::Policy);
    let decision: PolicyDecision = super::policy::approved(&request.requester, spec, amount);
    custom(core, StagePoint::AfterPolicy, input).await?;
    execution(core, tool, decoded, ctx, &decision, super::Via::Approval, t).await
}

/// Rows 3 and 4 for an operation-status query: the caller fresh and permitted to use the tool.
pub(crate) async fn status_authority<S: Send + Sync + 'static>(
    core: &Core<S>,
    principal: &Principal,
    spec: &ToolSpec,
    t: &mut Trace,
) -> Result<(), Stop> {
    t.at(Stage::Principal);
    super::principal::fresh(core, principal)?;
    t.at(Stage::Permit);
    super::authorize::permit(core, principal, spec).await
}

/// Rows 4 and 5: tool permission, then the custom stages after it.
async fn permit<S: Send + Sync + 'static>(
    core: &Core<S>,
    input: StageInput<'_>,
    t: &mut Trace,
) -> Result<(), Stop> {
    t.at(Stage::Permit);
    super::authorize::permit(core, input.principal, input.spec).await?;
    custom(core, StagePoint::AfterPermit, input).await
}

/// The custom stages added at `point`. Without any, no future is made: every future a stage
/// awaits is built and then moved into the call's state, at its full size.
async fn custom<S: Send + Sync + 'static>(
    core: &Core<S>,
    point: StagePoint,
    input: StageInput<'_>,
) -> Result<(), Stop> {
    if !core.custom.any_at(point) {
        return Ok(());
    }
    core.custom.run(point, input).await
}

/// The call an approved action answers, as custom stages see it: the requester's call id, tool,
/// provider path and idempotency key, with the re-normalized arguments.
fn resumed_call(request: &ApprovalRequest, args: &serde_json::Value) -> ToolCall {
    let mut call = ToolCall::new(
        request.call_id.clone(),
        request.tool.clone(),
        RawArguments::Value(args.clone()),
    );
    call.provider = request.provider.clone();
    call.idempotency_key = request.idempotency.as_ref().map(|k| k.key.to_string());
    call
}

/// The requester an approved action runs for must be fresh now, like a caller of `dispatch`:
/// the refresher's answer, or without a refresher the stored snapshot, which goes stale. A
/// stale requester fails closed (`requester_stale`); the action does not run.
fn requester_fresh<S: Send + Sync + 'static>(
    core: &Core<S>,
    requester: &Principal,
) -> Result<(), Stop> {
    super::principal::fresh(core, requester).map_err(|_| {
        Stop::new(
            crate::outcome::Status::Forbidden,
            "requester_stale",
            "the requester's authentication is too old to run the approved action; nothing \
             was done (configure principal_refresher, or the requester asks again)",
        )
    })
}
