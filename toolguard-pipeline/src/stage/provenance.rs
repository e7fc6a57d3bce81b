//! Provenance in the pipeline: the sources in context are loaded before the risk policy, judged
//! by the flow policy inside it, named in holds, and an untrusted `ok` result becomes a new
//! source. The host's entry points (add, clear, list) are methods of the dispatcher.

use crate::call::{Principal, ToolCall};
use crate::clock::unix_millis;
use crate::outcome::Status;
use crate::provenance::flow::{CAUSE, judge};
use crate::provenance::{Source, in_context, session_key};
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

/// Whether the flow policy can act on calls of `spec`: it changes state or sends data out.
/// Read-only tools without egress are neither judged nor loaded (no store read on their path).
fn judged(spec: &ToolSpec) -> bool {
    !spec.read_only || spec.egress != Egress::None
}

/// Loads the sources of `p`'s session that were in the model's context for `call` into the
/// trace. A store that does not answer fails the call closed (`unavailable`).
pub(crate) async fn load<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    call: &ToolCall,
    p: &Principal,
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
    Ok(())
}

/// The flow step of the risk-policy stage: the decision of the other rules, held or refused
/// by the flow policy when the call follows untrusted content.
pub(crate) fn flow<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    args: &serde_json::Value,
    sources: &[Source],
    mut decision: PolicyDecision,
) -> Result<PolicyDecision, Stop> {
    let policy = core.policy.current_flow();
    judge(
        policy,
        &core.sanitizer,
        spec,
        args,
        sources,
        &mut decision.approval_cause,
    )?;
    Ok(decision)
}

/// After the call's answer: an `ok` result of a tool with untrusted output becomes a source of
/// the session (labelled by the handler, if it set one); a hold in a session with sources names
/// the latest source in its message (and, when the flow policy caused it, has the reason
/// `provenance`). A source that cannot be recorded withholds the result
/// (`unavailable`): the model never sees content the session would not know it read.
pub(crate) async fn settle<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    call: &ToolCall,
    p: &Principal,
    cause: Option<&str>,
    answer: Result<Answer, Stop>,
    t: &Trace,
) -> Result<Answer, Stop> {
    let mut answer = answer?;
    if answer.status == Status::PendingApproval
        && let Some(latest) = t.sources.iter().max_by_key(|s| s.at_ms)
    {
        if cause == Some(CAUSE) {
            answer.reason = Some(crate::outcome::Reason::Provenance);
            answer.message = Some(format!(
                "a human must approve this action: it follows untrusted content ({})",
                latest.describe()
            ));
        } else if let Some(message) = answer.message.as_mut() {
            message.push_str(&format!(
                " (it also follows untrusted content: {})",
                latest.describe()
            ));
        }
    }
    if answer.status != Status::Ok || answer.replayed || !spec.untrusted_output {
        return Ok(answer);
    }
    let label = t
        .source_label
        .as_ref()
        .and_then(|slot| slot.lock().unwrap_or_else(|e| e.into_inner()).take());
    let source = Source::tool_result(
        &spec.name,
        &call.call_id,
        t.operation_id.as_deref().map(str::to_owned),
        unix_millis(core.now()),
        label,
    );
    let key = session_key(&p.tenant, &p.session_id);
    core.stores
        .provenance
        .add_source(&key, &source)
        .await
        .map_err(|_| unavailable())?;
    Ok(answer)
}
