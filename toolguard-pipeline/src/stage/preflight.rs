//! Business preflight and resource authorization: the tool's own `preflight` and `authorize`
//! hooks. They run only after the principal is fresh and may use the tool.
//!
//! A business check that fails because the call already took effect (the order is now
//! refunded, the account closed) must not hide that call's stored outcome from its retry: such
//! failures (`precondition_failed`, `not_found`) answer with a stored outcome of the same
//! request under the caller's own key when there is one. Resource authorization runs even when
//! the preflight failed, and wins: a foreign resource answers `not_found`, never a business
//! error that reveals its state.

use super::core::Core;
use super::trace::{Exit, Trace};
use super::{Stage, Stop};
use crate::call::Principal;
use crate::erased::DecodedArgs;
use crate::error::{ToolError, ToolErrorKind};
use crate::spec::ToolSpec;
use crate::tool::ToolContext;

/// The preflight and resource-authorization stages.
pub(crate) async fn run<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    principal: &Principal,
    decoded: &dyn DecodedArgs<S>,
    ctx: &ToolContext<S>,
    t: &mut Trace,
) -> Result<(), Exit> {
    t.at(Stage::Preflight);
    let mut held = deferrable(decoded.preflight(ctx).await, Stage::Preflight)?;
    t.at(Stage::Authorize);
    if let Some(denied) = deferrable(decoded.authorize(ctx).await, Stage::Authorize)? {
        held = Some(denied);
    }
    match held {
        None => Ok(()),
        Some((stage, stop)) => {
            // Boxed: a refused hook is rare, and the replay's state would otherwise enlarge
            // every call's future.
            Err(Box::pin(super::replay::or_stop(
                core, spec, principal, stage, stop, t,
            ))
            .await)
        }
    }
}

/// A hook's result: `Ok(Some(..))` holds a business failure (`precondition_failed`, `not_found`)
/// that a stored replay may override; any other error stops the call at once.
fn deferrable(result: Result<(), ToolError>, stage: Stage) -> Result<Option<(Stage, Stop)>, Stop> {
    match result {
        Ok(()) => Ok(None),
        Err(err)
            if matches!(
                err.kind(),
                ToolErrorKind::Precondition(_) | ToolErrorKind::NotFound(_)
            ) =>
        {
            Ok(Some((stage, Stop::from_tool_error(err))))
        }
        Err(err) => Err(Stop::from_tool_error(err)),
    }
}
