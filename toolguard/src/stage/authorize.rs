//! Authorization of the tool itself: may this principal use this tool at all (`forbidden`)?
//! Resource authorization (`not_found`) is the tool's own `authorize` hook.

use std::collections::HashMap;

use crate::call::Principal;
use crate::spec::ToolSpec;

/// Decides whether a principal may use a tool.
pub trait Authorizer: Send + Sync + 'static {
    /// `Ok` to allow; `Err(reason code)` to refuse.
    fn authorize(&self, principal: &Principal, spec: &ToolSpec) -> Result<(), String>;
}

/// Allows every authenticated principal to use every registered tool.
#[derive(Debug, Default, Clone, Copy)]
pub struct AllowAuthenticated;

impl Authorizer for AllowAuthenticated {
    fn authorize(&self, _principal: &Principal, _spec: &ToolSpec) -> Result<(), String> {
        Ok(())
    }
}

/// Tool → roles: a principal needs one of the listed roles; tools not listed follow the default.
#[derive(Debug, Clone, Default)]
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
}

impl Authorizer for RoleAuthorizer {
    fn authorize(&self, principal: &Principal, spec: &ToolSpec) -> Result<(), String> {
        match self.required.get(&spec.name) {
            Some(roles) if roles.iter().any(|r| principal.has_role(r)) => Ok(()),
            Some(_) => Err("missing_role".to_owned()),
            None if self.deny_unlisted => Err("tool_not_granted".to_owned()),
            None => Ok(()),
        }
    }
}

impl<F> Authorizer for F
where
    F: Fn(&Principal, &ToolSpec) -> bool + Send + Sync + 'static,
{
    fn authorize(&self, principal: &Principal, spec: &ToolSpec) -> Result<(), String> {
        if self(principal, spec) {
            Ok(())
        } else {
            Err("not_permitted".to_owned())
        }
    }
}
