//! Provenance in the pipeline: the sources in context are loaded before the risk policy, judged
//! by the flow policy inside it, named in holds, and an untrusted `ok` result becomes a new
//! source. The host's entry points (add, clear, list) are methods of the dispatcher.

use super::flow::{self, CAUSE, FlowAction, judge};
use super::{Source, in_context, session_key};
use crate::call::{Principal, ToolCall};
use crate::clock::unix_millis;
use crate::dispatcher::{BuildError, Dispatcher};
use crate::outcome::Status;
use crate::sanitize::Sanitizer;
use crate::spec::{Egress, ToolSpec};
use crate::stage::Stop;
use crate::stage::core::Core;
use crate::stage::policy::PolicyDecision;
use crate::stage::trace::{Answer, Trace};
use crate::store::StoreError;

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
    sources: &[Source],
    mut decision: PolicyDecision,
) -> Result<PolicyDecision, Stop> {
    let policy = core.policy.current_flow();
    judge(
        policy,
        &core.sanitizer,
        spec,
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
            answer.reason = Some(CAUSE.to_owned());
        }
        answer.message = Some(format!(
            "a human must approve this action: it follows untrusted content ({})",
            latest.describe()
        ));
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

/// The build-time check of an `egress = "allowlisted"` tool: it has destination fields, and the
/// sanitizer restricts each of them to an allowlist. Anything else would let data out to any
/// destination while the declaration claims otherwise.
pub(crate) fn check_egress(spec: &ToolSpec, sanitizer: &Sanitizer) -> Result<(), BuildError> {
    if spec.egress != Egress::Allowlisted {
        return Ok(());
    }
    let unsafe_decl = |message: String| BuildError::UnsafeDeclaration {
        tool: spec.name.clone(),
        message,
    };
    let fields: Vec<&str> = flow::destination_fields(spec).collect();
    if fields.is_empty() {
        return Err(unsafe_decl(
            "`egress = \"allowlisted\"` needs a destination field (`kind = \"email\"` or \
             `kind = \"url\"`) whose values the sanitizer restricts"
                .to_owned(),
        ));
    }
    for field in fields {
        if !sanitizer.destination_allowlisted(&spec.name, field) {
            return Err(unsafe_decl(format!(
                "`egress = \"allowlisted\"`, but destination field `{field}` has no allowlist: \
                 configure `Sanitizer::allow_email_domains` or `Sanitizer::allow_url_hosts` for \
                 (`{}`, `{field}`), or declare `egress` (open, held for approval after untrusted \
                 content)",
                spec.name
            )));
        }
    }
    Ok(())
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// Adds a source the host placed into `principal`'s session context itself (an uploaded
    /// document, retrieved passages), labelled `label` for reviewers. Returns the source, whose
    /// id audit queries join on.
    pub async fn add_source(
        &self,
        principal: &Principal,
        label: impl Into<String>,
    ) -> Result<Source, StoreError> {
        let source = Source::host(label, unix_millis(self.core.now()));
        let key = session_key(&principal.tenant, &principal.session_id);
        self.core
            .stores
            .provenance
            .add_source(&key, &source)
            .await?;
        Ok(source)
    }

    /// Removes every source of `principal`'s session (a new conversation). Returns how many
    /// were removed.
    pub async fn clear_sources(&self, principal: &Principal) -> Result<u64, StoreError> {
        let key = session_key(&principal.tenant, &principal.session_id);
        self.core.stores.provenance.clear_sources(&key).await
    }

    /// The sources of `principal`'s session, oldest first.
    pub async fn sources(&self, principal: &Principal) -> Result<Vec<Source>, StoreError> {
        let key = session_key(&principal.tenant, &principal.session_id);
        self.core.stores.provenance.sources(&key).await
    }

    /// What the flow policy does to a call of `tool` in a session with sources (`None` for an
    /// unknown tool).
    pub fn flow_action(&self, tool: &str) -> Option<FlowAction> {
        let spec = self.core.spec(tool)?;
        Some(
            self.core
                .policy
                .current_flow()
                .action(spec, &self.core.sanitizer),
        )
    }
}
