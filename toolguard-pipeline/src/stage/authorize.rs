//! The permit stage: may this principal use this tool at all (`forbidden`)? Runs right after
//! the principal check and before any user code; the [`Authorizer`] is configuration (see
//! [`crate::access`]). Resource authorization (`not_found`) is the tool's own `authorize` hook
//! (see `stage::preflight`).

use super::Stop;
use super::core::Core;
pub(crate) use crate::access::{AllowAuthenticated, AuthorizeError, Authorizer};
use crate::call::Principal;
use crate::outcome::Status;
use crate::spec::ToolSpec;

/// The permit stage: may `principal` use the tool of `spec`? A refusal is `forbidden` with the
/// authorizer's reason; an authorizer that cannot answer is `unavailable`.
pub(crate) async fn permit<S: Send + Sync + 'static>(
    core: &Core<S>,
    principal: &Principal,
    spec: &ToolSpec,
) -> Result<(), Stop> {
    match core.authorizer.authorize(principal, spec).await {
        Ok(()) => Ok(()),
        Err(AuthorizeError::Refused(reason)) => {
            Err(Stop::new(Status::Forbidden, reason, "tool not permitted"))
        }
        Err(AuthorizeError::Unavailable(source)) => {
            tracing::error!(error = %source, tool = %spec.name, "the authorizer is unavailable");
            Err(Stop::new(
                Status::Unavailable,
                "authorizer_unavailable",
                "authorization is unavailable; nothing was done",
            ))
        }
    }
}
