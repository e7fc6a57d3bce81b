//! The pipeline's stages, one module each. Each stage takes what it needs (the built
//! dispatcher's registry and configuration as a `Core`, the call, what the call has learned so
//! far as a `Trace`) and either passes the call on, stops it with a [`Stop`], or answers it from
//! a stored outcome. The order is written once, in `stage::list`, with the points where calls,
//! approval decisions ([`crate::approvals`]) and status queries ([`crate::operations`]) enter
//! it.

pub(crate) mod approval;
pub(crate) mod authorize;
pub(crate) mod core;
pub(crate) mod detect;
pub(crate) mod envelope;
pub(crate) mod execute;
pub(crate) mod finish;
pub(crate) mod flight;
pub(crate) mod gate;
pub(crate) mod idempotency;
pub(crate) mod intent;
pub(crate) mod interrupted;
pub(crate) mod list;
pub(crate) mod normalize;
pub(crate) mod parse;
pub(crate) mod policy;
pub(crate) mod preflight;
pub(crate) mod principal;
pub(crate) mod provenance;
pub(crate) mod recheck;
pub(crate) mod reconcile;
pub(crate) mod record;
pub(crate) mod registry;
pub(crate) mod replay;
pub(crate) mod retry;
pub(crate) mod sanitize;
pub(crate) mod settle;
pub(crate) mod trace;
pub(crate) mod validate;

use self::core::{Core, Registered};
use self::policy::PolicyDecision;
use self::trace::{Answer, Trace};
pub(crate) use crate::audit::Stage;
use crate::erased::DecodedArgs;
use crate::outcome::Status;
pub(crate) use crate::outcome::Stop;
use crate::tool::ToolContext;

/// The tail every execution goes through, from a call or after an approval (`via`): recheck →
/// execute → envelope.
pub(crate) async fn execution<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &Registered<S>,
    decoded: Box<dyn DecodedArgs<S> + '_>,
    ctx: ToolContext<S>,
    decision: &PolicyDecision,
    via: Via<'_>,
    t: &mut Trace,
) -> Result<Answer, Stop> {
    let spec = tool.spec();
    t.at(Stage::Recheck);
    let scopes = if recheck::needed(spec, decision, via, t) {
        recheck::run(core, spec, &*decoded, &ctx, decision, via, t).await?
    } else {
        Vec::new()
    };
    t.at(Stage::Execute);
    let output = execute::stage(core, tool, decoded, ctx, &scopes, t).await?;
    t.at(Stage::Envelope);
    envelope::wrap(&tool.output, output, spec.read_only).map(Answer::executed)
}

/// How an action comes to execute.
#[derive(Clone, Copy)]
pub(crate) enum Via<'a> {
    /// A model's call, holding its key (`None` for a call without one).
    Call(Option<&'a idempotency::Held>),
    /// An approved action: its request holds the ledger reservation the action commits.
    Approval,
}

/// The stop of a call during which something panicked. Once a state-changing handler may have
/// begun, its effect is unknown.
pub(crate) fn panicked<S: Send + Sync + 'static>(core: &Core<S>, t: &Trace) -> Stop {
    let read_only = t
        .tool
        .as_deref()
        .and_then(|name| core.spec(name))
        .is_none_or(|spec| spec.read_only);
    if t.stage >= Stage::Execute && !read_only {
        Stop::new(
            Status::OutcomeUnknown,
            "panicked",
            "the call crashed after the tool may have begun; query the operation status before \
             retrying",
        )
    } else {
        Stop::new(Status::Failed, "panicked", "the call failed unexpectedly")
    }
}
