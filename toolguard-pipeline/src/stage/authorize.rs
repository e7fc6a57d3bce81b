//! Authorization of the tool itself: may this principal use this tool at all (`forbidden`)?
//! Runs right after the principal check and before any user code. Resource authorization
//! (`not_found`) is the tool's own `authorize` hook (see `stage::preflight`).
//!
//! An [`Authorizer`] is async: it usually asks a database or an identity provider. It refuses
//! with [`AuthorizeError::Refused`] (`forbidden`) or fails with [`AuthorizeError::Unavailable`]
//! (`unavailable`: nothing runs when the answer is unknown).

use std::collections::HashMap;

use super::Stop;
use super::core::Core;
use crate::call::Principal;
use crate::outcome::Status;
use crate::spec::ToolSpec;
use crate::tool::BoxFuture;

/// Why an [`Authorizer`] did not allow a call.
#[derive(Debug, thiserror::Error)]
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
