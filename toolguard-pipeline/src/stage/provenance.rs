//! Provenance in the pipeline: the sources in context (and, in a session with sources, the
//! trusted values and each argument's origin) are loaded before the risk policy, judged by the
//! flow policy inside it, named in holds; and every answer that hands an untrusted tool's `ok`
//! result to a session records a source there (a call, a replay, an approved call, an operation
//! status), with the values of the result. The host's entry points (add, clear, list) are
//! methods of the dispatcher.

use serde_json::Value;

use crate::call::{Principal, ToolCall};
use crate::clock::unix_millis;
use crate::outcome::Status;
use crate::provenance::flow::{CAUSE, hold_message, judge};
use crate::provenance::{
    FlowMode, Source, ValueIndex, in_context, origins, result_fields, session_key, trusted_key,
};
use crate::risk::PolicyDecision;
use crate::spec::{Egress, ToolSpec};
use crate::stage::Stop;
use crate::stage::core::Core;
use crate::stage::trace::{Answer, Trace};

fn unavailable() -> Stop {
    Stop::new(
        Status::Unavailable,
        "provenance_unavailable",
        "the session's provenance is unavailable; nothing was done",
    )
}

/// A result that ran but could not be recorded in the session's provenance: withheld, and the
/// caller is told the call was not undone (a retry with its idempotency key replays it).
fn withheld() -> Stop {
    Stop::new(
        Status::Unavailable,
        "provenance_unavailable",
        "the session's provenance is unavailable, so the result is withheld; the call itself \
         ran and was not undone",
    )
}

/// Whether the flow policy can act on calls of `spec`: it changes state or sends data out.
/// Read-only tools without egress are neither judged nor loaded (no store read on their path).
pub(crate) fn judged(spec: &ToolSpec) -> bool {
    !spec.read_only || spec.egress != Egress::None
}

/// Loads the sources of `p`'s session that were in the model's context for `call` into the
/// trace; when there are any, also the session's trusted values, and the origin of each of
/// `args`. A store that does not answer fails the call closed (`unavailable`).
pub(crate) async fn load<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    call: &ToolCall,
    p: &Principal,
    args: &Value,
    t: &mut Trace,
) -> Result<(), Stop> {
    if !judged(spec) {
        return Ok(());
    }
    let key = session_key(&p.tenant, &p.session_id);
    let all = core
        .stores
        .provenance
        .sources(&key)
        .await
        .map_err(|_| unavailable())?;
    t.sources = in_context(all, call.sources.as_deref());
    if t.sources.is_empty() {
        return Ok(());
    }
    let trusted = core
        .stores
        .provenance
        .sources(&trusted_key(&p.tenant, &p.session_id))
        .await
        .map_err(|_| unavailable())?;
    let index = ValueIndex::new(&t.sources, &trusted);
    t.origins = origins(spec, args, &index, &core.value_key);
    Ok(())
}

/// The flow step of the risk-policy stage: the decision of the other rules, held or refused
/// by the flow policy when the call follows untrusted content.
pub(crate) fn flow<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    args: &serde_json::Value,
    t: &Trace,
    mut decision: PolicyDecision,
) -> Result<PolicyDecision, Stop> {
    let policy = core.policy.current_flow();
    judge(
        policy,
        &core.sanitizer,
        spec,
        args,
        &t.sources,
        &t.origins,
        &mut decision.approval_cause,
    )?;
    Ok(decision)
}

/// After the call's answer: a hold in a session with sources names the latest source in its
/// message, or, when the flow policy caused it, the field that decided with its origin and
/// source (and has the reason `provenance`).
pub(crate) fn settle<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    cause: Option<&str>,
    answer: Result<Answer, Stop>,
    t: &Trace,
) -> Result<Answer, Stop> {
    let mut answer = answer?;
    if answer.status == Status::PendingApproval && !t.sources.is_empty() {
        let policy = core.policy.current_flow();
        let message = if cause == Some(CAUSE) {
            answer.reason = Some(crate::outcome::Reason::Provenance);
            hold_message(
                policy,
                &core.sanitizer,
                spec,
                t.arguments.as_deref(),
                &t.sources,
                &t.origins,
            )
        } else {
            hold_message(
                &crate::provenance::FlowPolicy::default(),
                &core.sanitizer,
                spec,
                t.arguments.as_deref(),
                &t.sources,
                &[],
            )
        };
        answer.message = message.or(answer.message);
    }
    Ok(answer)
}

/// The last step before an answer leaves any entry point: an `ok` result of a tool with
/// untrusted output that reaches `p`'s session (executed, replayed from the idempotency store,
/// run after a human's approval, or read in an operation's status) becomes a source of that
/// session, with the values in it. A source that cannot be recorded withholds the result
/// (`unavailable`): the model never sees content the session would not know it read. In the
/// precise mode, a trusted tool's `ok` result records its values as trusted, and a record that
/// cannot be written withholds the result too: a value missing from the trusted set would count
/// as the model's own, which escapes the rule on destinations only a tool's output named. `spec`
/// is the tool [`answered_by`] names for the answer.
pub(crate) async fn record_answer<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    p: &Principal,
    call_id: &str,
    t: &Trace,
    answer: &mut Answer,
) {
    let Some(output) = answer.output.as_ref() else {
        return;
    };
    if let Err(stop) = record_output(core, spec, p, call_id, t, &output.data).await {
        *answer = Answer::stopped(stop);
    }
}

/// The call's tool `spec` when [`record_answer`] records its `ok` result in `answer` (it is
/// given the tool): one with untrusted output, or any in the precise mode. `None` when there
/// is nothing to record (or no registered tool), and the caller makes no future for it.
pub(crate) fn answered_by<'c, S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: Option<&'c ToolSpec>,
    answer: &Answer,
) -> Option<&'c ToolSpec> {
    if answer.status != Status::Ok || answer.output.is_none() {
        return None;
    }
    let spec = spec?;
    let recorded =
        spec.untrusted_output || core.policy.current_flow().current_mode() == FlowMode::PerArgument;
    recorded.then_some(spec)
}

/// Records `output`, an `ok` result of `spec` handed to `p`'s session: a source when the tool's
/// output is untrusted (only its `untrusted_fields` when it lists them), trusted values in the
/// precise mode for the rest.
pub(crate) async fn record_output<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    p: &Principal,
    call_id: &str,
    t: &Trace,
    output: &Value,
) -> Result<(), Stop> {
    // One clock read for both records (the caller asks only for a tool that records).
    let now = unix_millis(core.now());
    if !spec.untrusted_output {
        return record_trusted(core, spec, p, call_id, output, now).await;
    }
    let split = (!spec.untrusted_fields.is_empty())
        .then(|| result_fields::split(output, &spec.untrusted_fields));
    let untrusted = split.as_ref().map_or(output, |(taken, _)| taken);
    let label = t
        .source_label
        .as_ref()
        .and_then(|slot| slot.lock().unwrap_or_else(|e| e.into_inner()).take());
    let source = Source::tool_result(
        &spec.name,
        call_id,
        t.operation_id.as_deref().map(str::to_owned),
        now,
        label,
    )
    .with_json(&core.value_key, untrusted);
    let key = session_key(&p.tenant, &p.session_id);
    core.stores
        .provenance
        .add_source(&key, &source)
        .await
        .map_err(|_| withheld())?;
    match &split {
        Some((_, rest)) => record_trusted(core, spec, p, call_id, rest, now).await,
        None => Ok(()),
    }
}

/// In the precise mode, records the values of `output` (a trusted result, or the rest of a
/// result beside its untrusted places) as trusted values of `p`'s session, named by the tool:
/// trusted, but not the user's own. A store failure is `unavailable`: a value not recorded as
/// trusted would be judged as if never seen, that is as the model's own, and a destination the
/// tool looked up would then run where the precise defaults hold it.
async fn record_trusted<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    p: &Principal,
    call_id: &str,
    output: &Value,
    now: u64,
) -> Result<(), Stop> {
    if core.policy.current_flow().current_mode() != FlowMode::PerArgument {
        return Ok(());
    }
    let mut record = Source::trusted(format!("the result of {} call {call_id}", spec.name), now)
        .with_json(&core.value_key, output);
    record.tool = Some(spec.name.clone());
    record.call_id = Some(call_id.to_owned());
    if record.values.is_empty() {
        return Ok(());
    }
    let key = trusted_key(&p.tenant, &p.session_id);
    core.stores
        .provenance
        .add_source(&key, &record)
        .await
        .map_err(|_| withheld())
}
