//! Principal: the trusted caller from the host's auth layer, checked for completeness and
//! freshness before it is injected into the tool's context, and looked up again (through a
//! [`PrincipalRefresher`]) before an approved action executes.

use std::time::{Duration, SystemTime};

use super::Stop;
use super::core::Core;
use crate::call::Principal;
use crate::outcome::Status;
use crate::tool::BoxFuture;

/// How far in the future `authenticated_at` may lie (clock skew).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Why a [`PrincipalRefresher`] gave no current principal.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The requester may no longer act (account disabled, roles revoked): `forbidden`.
    #[error("the requester may no longer act")]
    Revoked,
    /// The identity provider could not answer: `unavailable`.
    #[error("the identity provider is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Looks the requester up again before an approved action executes.
pub trait PrincipalRefresher: Send + Sync + 'static {
    /// The requester as they are now.
    fn refresh<'a>(
        &'a self,
        requester: &'a Principal,
    ) -> BoxFuture<'a, Result<Principal, RefreshError>>;
}

/// A synchronous lookup: `None` when the requester may no longer act.
impl<F> PrincipalRefresher for F
where
    F: Fn(&Principal) -> Option<Principal> + Send + Sync + 'static,
{
    fn refresh<'a>(
        &'a self,
        requester: &'a Principal,
    ) -> BoxFuture<'a, Result<Principal, RefreshError>> {
        let found = self(requester).ok_or(RefreshError::Revoked);
        Box::pin(async move { found })
    }
}

/// Checks that `principal` names a tenant and subject and authenticated recently enough.
pub fn check(principal: &Principal, now: SystemTime, max_age: Duration) -> Result<(), Stop> {
    if principal.tenant.trim().is_empty() || principal.subject.trim().is_empty() {
        return Err(Stop::new(
            Status::Forbidden,
            "unauthenticated",
            "caller is not authenticated",
        ));
    }
    // A `now` too late to add the skew to lies beyond every representable time anyway.
    if now
        .checked_add(MAX_CLOCK_SKEW)
        .is_some_and(|latest| principal.authenticated_at > latest)
    {
        return Err(Stop::new(
            Status::Forbidden,
            "stale_principal",
            "authentication is not valid",
        ));
    }
    let age = now
        .duration_since(principal.authenticated_at)
        .unwrap_or_default();
    if age >= max_age {
        return Err(Stop::new(
            Status::Forbidden,
            "stale_principal",
            "authentication has expired",
        ));
    }
    Ok(())
}

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
