//! The [`Tool`] trait that `#[tool]` implements, and the trusted [`ToolContext`] a handler sees.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arcstr::ArcStr;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::call::Principal;
use crate::error::{NotFoundClass, ToolError};
use crate::spec::ToolSpec;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The answer of a hook that has nothing to check: `Ok(())` at once, as a zero-sized future, so
/// boxing it allocates nothing (an `async` block keeps a state byte, and its box allocates).
pub(crate) fn passed<'a, E: 'a>() -> BoxFuture<'a, Result<(), E>> {
    Box::pin(Passed(std::marker::PhantomData))
}

/// The zero-sized future of [`passed`].
struct Passed<E>(std::marker::PhantomData<fn() -> E>);

impl<E> Future for Passed<E> {
    type Output = Result<(), E>;

    fn poll(
        self: Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A tool the dispatcher can run. `#[tool]` implements it; it can also be written by hand.
///
/// `S` is the application state tools share (a database pool, a ledger, ...).
pub trait Tool<S: Send + Sync + 'static>: Send + Sync + 'static {
    /// The typed arguments (generated `<Name>Args` struct).
    type Args: DeserializeOwned + Serialize + JsonSchema + Send + Sync + 'static;
    /// The result type.
    type Output: Serialize + JsonSchema + Send + 'static;

    /// The tool's declaration.
    fn spec(&self) -> ToolSpec;

    /// Business preflight: invariants that must hold before anything else happens
    /// (`precondition_failed`). Runs again right before execution.
    fn preflight<'a>(
        &'a self,
        _ctx: &'a ToolContext<S>,
        _args: &'a Self::Args,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        passed()
    }

    /// Resource authorization: does the principal own what the arguments name? Return
    /// [`ToolErrorKind::NotFound`](crate::error::ToolErrorKind::NotFound) for both missing and foreign resources. Runs again right before
    /// execution.
    fn authorize<'a>(
        &'a self,
        _ctx: &'a ToolContext<S>,
        _args: &'a Self::Args,
    ) -> BoxFuture<'a, Result<(), ToolError>> {
        passed()
    }

    /// Finds out what became of an operation whose outcome was unknown (its deadline passed after
    /// the side effect may have begun). The default cannot tell.
    fn reconcile<'a>(
        &'a self,
        _ctx: &'a ToolContext<S>,
        _args: &'a Self::Args,
    ) -> BoxFuture<'a, Result<Reconciled<Self::Output>, ToolError>> {
        Box::pin(async { Ok(Reconciled::Unknown) })
    }

    /// Executes the tool.
    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext<S>,
        args: Self::Args,
    ) -> BoxFuture<'a, Result<Self::Output, ToolError>>;

    /// The tool's name as a static [`ArcStr`], one that no clone counts, when it is known at
    /// compile time; `#[tool]` provides it. The dispatcher shares its registry's copy of the
    /// name with every call's audit record: a static name spares calls running on different
    /// cores a reference count they would all write. `None` (the default) makes the dispatcher
    /// copy [`ToolSpec::name`] once at build; a static name that differs from it is ignored.
    fn static_name(&self) -> Option<ArcStr> {
        None
    }

    /// Executes the tool and returns its result as JSON, as the dispatcher needs it. The default
    /// wraps [`call`](Tool::call)'s future in a second one; `#[tool]` generates one future that
    /// does both (one allocation less per call).
    fn call_json<'a>(
        &'a self,
        ctx: &'a ToolContext<S>,
        args: Self::Args,
    ) -> BoxFuture<'a, Result<serde_json::Value, ToolError>> {
        Box::pin(async move { crate::__private::output_json(self.call(ctx, args).await?) })
    }
}

/// What reconciliation found out about an operation whose outcome was unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reconciled<T> {
    /// It took effect, with this result.
    Completed(T),
    /// It did not take effect; a retry may execute it.
    NotExecuted,
    /// Still cannot tell.
    Unknown,
}

/// A resource that belongs to a tenant and, optionally, to one subject in it.
pub trait Owned {
    /// Tenant that owns the resource.
    fn owner_tenant(&self) -> &str;
    /// Subject that owns the resource, if it is not shared tenant-wide.
    fn owner_subject(&self) -> Option<&str>;
}

impl<T: Owned + ?Sized> Owned for &T {
    fn owner_tenant(&self) -> &str {
        (**self).owner_tenant()
    }
    fn owner_subject(&self) -> Option<&str> {
        (**self).owner_subject()
    }
}

/// The trusted side of a call: who is calling, and the application state.
///
/// It is built by the dispatcher from the authenticated [`Principal`]; nothing in it comes from
/// model arguments.
pub struct ToolContext<S> {
    principal: Arc<Principal>,
    state: Arc<S>,
    call_id: ArcStr,
    operation_id: Option<ArcStr>,
    /// The resolved URLs of the call's arguments; `None` when it has none, so that a context
    /// costs no allocation and writes no shared reference count for them.
    resolved: Option<Arc<Vec<crate::sanitize::ResolvedUrl>>>,
    /// Present for calls of tools whose output is untrusted, the only ones whose results become
    /// provenance sources.
    source_label: Option<SourceLabel>,
}

impl<S> std::fmt::Debug for ToolContext<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("principal", &self.principal)
            .field("call_id", &&*self.call_id)
            .field("operation_id", &self.operation_id.as_deref())
            .finish_non_exhaustive()
    }
}

/// The label a handler gives its result as a provenance source (shared by a context's clones).
pub(crate) type SourceLabel = Arc<std::sync::Mutex<Option<String>>>;

impl<S> ToolContext<S> {
    /// A context for `principal` over `state`.
    pub fn new(
        principal: Arc<Principal>,
        state: Arc<S>,
        call_id: impl Into<ArcStr>,
        operation_id: Option<ArcStr>,
    ) -> Self {
        ToolContext {
            principal,
            state,
            call_id: call_id.into(),
            operation_id,
            resolved: None,
            source_label: None,
        }
    }

    /// Labels this call's result as a provenance source for reviewers (e.g. `mail from
    /// bob@example.com`, a document's title); used when the tool declares `output =
    /// "untrusted"` (the result of any other tool is no source, and the label is ignored).
    /// Control characters are removed and the label is cut to
    /// [`MAX_SOURCE_LABEL_CHARS`](crate::provenance::MAX_SOURCE_LABEL_CHARS).
    pub fn set_source_label(&self, label: impl Into<String>) {
        if let Some(slot) = &self.source_label {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(label.into());
        }
    }

    /// Gives the context a label slot (a call of a tool whose output is untrusted).
    pub(crate) fn with_source_label_slot(mut self) -> Self {
        self.source_label = Some(SourceLabel::default());
        self
    }

    /// The label slot, kept by the dispatcher while the handler runs.
    pub(crate) fn source_label(&self) -> Option<SourceLabel> {
        self.source_label.clone()
    }

    /// Attaches the sanitizer's checked URLs (with their pinned addresses).
    #[must_use]
    pub fn with_resolved_urls(mut self, resolved: Vec<crate::sanitize::ResolvedUrl>) -> Self {
        self.resolved = if resolved.is_empty() {
            None
        } else {
            Some(Arc::new(resolved))
        };
        self
    }

    /// The checked URL of the `url` field at JSON pointer `field` (e.g. `/callback`): connect to
    /// its `addrs`, which the sanitizer verified, rather than resolving the host again (DNS
    /// rebinding).
    pub fn resolved_url(&self, field: &str) -> Option<&crate::sanitize::ResolvedUrl> {
        self.resolved.as_deref()?.iter().find(|r| r.field == field)
    }

    /// The authenticated caller.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// The caller's tenant.
    pub fn tenant(&self) -> &str {
        &self.principal.tenant
    }

    /// The caller.
    pub fn subject(&self) -> &str {
        &self.principal.subject
    }

    /// The application state.
    pub fn state(&self) -> &S {
        &self.state
    }

    /// The application state, shared.
    pub fn state_arc(&self) -> &Arc<S> {
        &self.state
    }

    /// The call id being served.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The operation id of a state-changing call.
    pub fn operation_id(&self) -> Option<&str> {
        self.operation_id.as_deref()
    }

    /// Checks that `owner` (tenant, optional subject) is the caller; a foreign resource gives the
    /// same external `not_found` as a missing one, and the audit entry records which it was.
    pub fn check_owner(&self, tenant: &str, subject: Option<&str>) -> Result<(), ToolError> {
        if tenant != self.principal.tenant {
            return Err(ToolError::not_found_as(NotFoundClass::ForeignTenant));
        }
        match subject {
            Some(s) if s != self.principal.subject => {
                Err(ToolError::not_found_as(NotFoundClass::ForeignSubject))
            }
            _ => Ok(()),
        }
    }

    /// Turns a lookup result into the caller's resource: `None` and a resource owned by someone
    /// else both give `not_found`.
    pub fn resource<R: Owned>(&self, found: Option<R>) -> Result<R, ToolError> {
        let r = found.ok_or_else(ToolError::not_found)?;
        self.check_owner(r.owner_tenant(), r.owner_subject())?;
        Ok(r)
    }
}

impl<S> Clone for ToolContext<S> {
    fn clone(&self) -> Self {
        ToolContext {
            principal: self.principal.clone(),
            state: self.state.clone(),
            call_id: self.call_id.clone(),
            operation_id: self.operation_id.clone(),
            resolved: self.resolved.clone(),
            source_label: self.source_label.clone(),
        }
    }
}

#[cfg(test)]
mod passed_tests {
    use super::*;

    #[test]
    fn a_hook_with_nothing_to_check_answers_at_once_without_allocating() {
        // A box of a zero-sized value allocates nothing.
        assert_eq!(std::mem::size_of::<Passed<ToolError>>(), 0);
        let mut fut = passed::<ToolError>();
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        assert!(matches!(
            fut.as_mut().poll(&mut cx),
            std::task::Poll::Ready(Ok(()))
        ));
    }
}
