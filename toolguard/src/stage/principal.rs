//! Principal: the trusted caller from the host's auth layer, checked for completeness and
//! freshness before it is injected into the tool's context.

use std::time::{Duration, SystemTime};

use super::Stop;
use crate::call::Principal;
use crate::outcome::Status;

/// How far in the future `authenticated_at` may lie (clock skew).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

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
