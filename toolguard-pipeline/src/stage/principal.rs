//! Principal: the trusted caller from the host's auth layer, checked for completeness and
//! freshness before it is injected into the tool's context, and looked up again (through a
//! [`PrincipalRefresher`]) before an approved action executes.

use super::core::Core;
pub(crate) use crate::access::{PrincipalRefresher, RefreshError, check};
use crate::call::Principal;
use crate::outcome::{Status, Stop};

/// The principal stage of a call: `principal` is complete and fresh.
pub(crate) fn fresh<S: Send + Sync + 'static>(
    core: &Core<S>,
    principal: &Principal,
) -> Result<(), Stop> {
    check(principal, core.now(), core.principal_max_age)
}

/// The requester of an approved action as they are now (the configured refresher's answer, or
/// the stored requester without one). The refreshed principal must be the same tenant and
/// subject.
pub(crate) async fn refreshed<S: Send + Sync + 'static>(
    core: &Core<S>,
    requester: &Principal,
) -> Result<Principal, Stop> {
    let Some(refresher) = &core.refresher else {
        return Ok(requester.clone());
    };
    let current = match refresher.refresh(requester).await {
        Ok(p) => p,
        Err(RefreshError::Revoked) => {
            return Err(Stop::new(
                Status::Forbidden,
                "requester_revoked",
                "the requester may no longer act",
            ));
        }
        Err(RefreshError::Unavailable(source)) => {
            tracing::error!(error = %source, "the principal refresher is unavailable");
            return Err(Stop::new(
                Status::Unavailable,
                "refresher_unavailable",
                "the requester could not be looked up; nothing was done",
            ));
        }
    };
    if current.tenant != requester.tenant || current.subject != requester.subject {
        return Err(Stop::new(
            Status::Forbidden,
            "requester_changed",
            "the requester changed",
        ));
    }
    Ok(current)
}
