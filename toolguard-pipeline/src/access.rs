//! Access: who may use which tool ([`Authorizer`], with [`RoleAuthorizer`] and
//! [`AllowAuthenticated`]), whether a principal is complete and fresh ([`check`]), and who a
//! requester is now when an approved action runs ([`PrincipalRefresher`]). The pipeline's
//! principal and permit stages run these.
//!
//! An [`Authorizer`] is async: it usually asks a database or an identity provider. It refuses
//! with [`AuthorizeError::Refused`] (`forbidden`) or fails with [`AuthorizeError::Unavailable`]
//! (`unavailable`: nothing runs when the answer is unknown).

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use crate::call::Principal;
use crate::outcome::{Status, Stop};
use crate::spec::ToolSpec;
use crate::tool::BoxFuture;

/// Why an [`Authorizer`] did not allow a call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthorizeError {
    /// The principal may not use the tool (`forbidden`); the reason code is audited.
    #[error("tool not permitted ({0})")]
    Refused(String),
    /// The authorizer could not decide (its backend failed or timed out): `unavailable`.
    #[error("the authorizer is unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl AuthorizeError {
    /// A refusal with reason code `reason`.
    pub fn refused(reason: impl Into<String>) -> Self {
        AuthorizeError::Refused(reason.into())
    }

    /// A backend failure, keeping `source` as the cause.
    pub fn unavailable(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        AuthorizeError::Unavailable(source.into())
    }
}

/// Decides whether a principal may use a tool.
pub trait Authorizer: Send + Sync + 'static {
    /// `Ok` to allow; an [`AuthorizeError`] to refuse or to report that no answer is known.
    fn authorize<'a>(
        &'a self,
        principal: &'a Principal,
        spec: &'a ToolSpec,
    ) -> BoxFuture<'a, Result<(), AuthorizeError>>;

    /// Tool names this authorizer has rules for; [`build`](crate::DispatcherBuilder::build)
    /// refuses names that no registered tool has.
    fn configured_tools(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Allows every authenticated principal to use every registered tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAuthenticated;

impl Authorizer for AllowAuthenticated {
    fn authorize<'a>(
        &'a self,
        _principal: &'a Principal,
        _spec: &'a ToolSpec,
    ) -> BoxFuture<'a, Result<(), AuthorizeError>> {
        crate::tool::passed()
    }
}

/// Tool → roles: a principal needs one of the listed roles; tools not listed follow the default.
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct RoleAuthorizer {
    required: HashMap<String, Vec<String>>,
    deny_unlisted: bool,
}

impl RoleAuthorizer {
    /// Unlisted tools are allowed to any authenticated principal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Unlisted tools are refused (fail closed).
    pub fn deny_unlisted(mut self) -> Self {
        self.deny_unlisted = true;
        self
    }

    /// `tool` needs one of `roles`.
    pub fn require(
        mut self,
        tool: &str,
        roles: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        self.required
            .insert(tool.to_owned(), roles.into_iter().map(Into::into).collect());
        self
    }

    fn decide(&self, principal: &Principal, spec: &ToolSpec) -> Result<(), AuthorizeError> {
        match self.required.get(&spec.name) {
            Some(roles) if roles.iter().any(|r| principal.has_role(r)) => Ok(()),
            Some(_) => Err(AuthorizeError::refused("missing_role")),
            None if self.deny_unlisted => Err(AuthorizeError::refused("tool_not_granted")),
            None => Ok(()),
        }
    }
}

impl Authorizer for RoleAuthorizer {
    fn authorize<'a>(
        &'a self,
        principal: &'a Principal,
        spec: &'a ToolSpec,
    ) -> BoxFuture<'a, Result<(), AuthorizeError>> {
        let decided = self.decide(principal, spec);
        Box::pin(async move { decided })
    }

    fn configured_tools(&self) -> Vec<String> {
        self.required.keys().cloned().collect()
    }
}

/// A synchronous rule: `true` allows, `false` refuses with reason `not_permitted`.
impl<F> Authorizer for F
where
    F: Fn(&Principal, &ToolSpec) -> bool + Send + Sync + 'static,
{
    fn authorize<'a>(
        &'a self,
        principal: &'a Principal,
        spec: &'a ToolSpec,
    ) -> BoxFuture<'a, Result<(), AuthorizeError>> {
        let allowed = self(principal, spec);
        Box::pin(async move {
            if allowed {
                Ok(())
            } else {
                Err(AuthorizeError::refused("not_permitted"))
            }
        })
    }
}

/// How far in the future `authenticated_at` may lie (clock skew).
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Why a [`PrincipalRefresher`] gave no current principal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
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
