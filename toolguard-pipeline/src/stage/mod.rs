//! The pipeline's stages, one module each. Each stage takes what it needs (the built
//! dispatcher's registry and configuration as a `Core`, the call, what the call has learned so
//! far as a `Trace`) and either passes the call on, stops it with a [`Stop`], or answers it from
//! a stored outcome. The order is written once, in `stage::list`, with the points where calls,
//! approval decisions ([`crate::approvals`]) and status queries ([`crate::operations`]) enter
//! it.

pub mod approval;
pub mod authorize;
pub(crate) mod core;
pub mod custom;
pub mod envelope;
pub mod execute;
pub(crate) mod finish;
pub mod gate;
pub mod idempotency;
pub mod intent;
pub(crate) mod list;
pub(crate) mod normalize;
pub mod parse;
pub mod policy;
pub(crate) mod preflight;
pub mod principal;
pub(crate) mod recheck;
pub(crate) mod reconcile;
pub(crate) mod record;
pub(crate) mod registry;
pub(crate) mod replay;
pub mod sanitize;
pub(crate) mod settle;
pub(crate) mod trace;
pub mod validate;

use serde::{Deserialize, Serialize};

use self::core::{Core, Registered};
use self::policy::PolicyDecision;
use self::trace::{Answer, Trace};
use crate::erased::DecodedArgs;
use crate::error::ToolError;
use crate::outcome::{ArgumentError, Status};
use crate::tool::ToolContext;

/// The tail every execution goes through, from a call or after an approval: recheck → execute →
/// envelope.
pub(crate) async fn execution<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &Registered<S>,
    decoded: Box<dyn DecodedArgs<S> + '_>,
    ctx: ToolContext<S>,
    decision: &PolicyDecision,
    approved: bool,
    t: &mut Trace,
) -> Result<Answer, Stop> {
    let spec = tool.spec();
    t.at(Stage::Recheck);
    let scopes = recheck::run(core, spec, &*decoded, &ctx, decision, approved, t).await?;
    t.at(Stage::Execute);
    let output = execute::stage(core, spec, decoded, ctx, &scopes, t).await?;
    t.at(Stage::Envelope);
    envelope::wrap(&tool.output, output, spec.read_only).map(Answer::executed)
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

/// A pipeline stage, as recorded in audit entries.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Arguments parsed as one JSON object with unique keys.
    #[default]
    Parse,
    /// Tool looked up in the registry.
    Registry,
    /// Arguments validated against the input schema.
    Validate,
    /// Arguments sanitized per field.
    Sanitize,
    /// Trusted principal checked for freshness.
    Principal,
    /// Tool-level permission (the `Authorizer`).
    Permit,
    /// Business preflight (the tool's own hook).
    Preflight,
    /// Resource authorization (the tool's own hook).
    Authorize,
    /// Risk policy limits.
    Policy,
    /// Idempotency reservation.
    Idempotency,
    /// Human approval.
    Approval,
    /// Authorization and state rechecked right before execution.
    Recheck,
    /// Handler executed under its deadline.
    Execute,
    /// Result validated and enveloped.
    Envelope,
}

/// Why the pipeline stopped a call: the status, and what to tell and record.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    /// Terminal status.
    pub status: Status,
    /// Stable reason code.
    pub reason: Option<String>,
    /// Message safe to show outside.
    pub message: Option<String>,
    /// Argument errors (for `invalid_arguments`).
    pub errors: Vec<ArgumentError>,
}

impl Stop {
    /// A stop with `status`, a reason code and an external message.
    pub fn new(status: Status, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Stop {
            status,
            reason: Some(reason.into()),
            message: Some(message.into()),
            errors: Vec::new(),
        }
    }

    /// Maps a hook's or handler's error to its status. A `not_found` keeps the real class as the
    /// reason (for the audit) and an external message that does not reveal it.
    pub fn from_tool_error(err: ToolError) -> Self {
        match err {
            ToolError::NotFound(class) => {
                Stop::new(Status::NotFound, class.as_str(), "resource not found")
            }
            ToolError::Forbidden(msg) => Stop::new(Status::Forbidden, "resource_forbidden", msg),
            ToolError::Precondition(msg) => {
                Stop::new(Status::PreconditionFailed, "precondition", msg)
            }
            ToolError::Failed(msg) => Stop::new(Status::Failed, "handler_error", msg),
        }
    }
}
