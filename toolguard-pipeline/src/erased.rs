//! Type erasure of [`Tool`] so that tools with different argument types live in one registry.

use std::sync::Arc;

use arcstr::ArcStr;
use serde_json::Value;

use crate::__private::output_json;
use crate::error::ToolError;
use crate::spec::ToolSpec;
use crate::tool::{BoxFuture, Reconciled, Tool, ToolContext};

/// Typed arguments decoded once, ready for the hooks and the handler.
pub(crate) trait DecodedArgs<S>: Send + Sync {
    fn preflight<'a>(&'a self, ctx: &'a ToolContext<S>) -> BoxFuture<'a, Result<(), ToolError>>;
    fn authorize<'a>(&'a self, ctx: &'a ToolContext<S>) -> BoxFuture<'a, Result<(), ToolError>>;
    fn reconcile<'a>(
        &'a self,
        ctx: &'a ToolContext<S>,
    ) -> BoxFuture<'a, Result<Reconciled<Value>, ToolError>>;
    fn execute<'a>(
        self: Box<Self>,
        ctx: &'a ToolContext<S>,
    ) -> BoxFuture<'a, Result<Value, ToolError>>
    where
        Self: 'a;
}

/// A tool behind dynamic dispatch.
pub(crate) trait ErasedTool<S>: Send + Sync {
    fn spec(&self) -> &ToolSpec;
    /// See [`Tool::static_name`].
    fn static_name(&self) -> Option<ArcStr>;
    /// Decodes `args`; the decoded arguments borrow the tool.
    fn decode(&self, args: Value) -> Result<Box<dyn DecodedArgs<S> + '_>, serde_json::Error>;
    /// Decodes borrowed arguments (the strings the typed arguments keep are copied once).
    fn decode_ref(&self, args: &Value) -> Result<Box<dyn DecodedArgs<S> + '_>, serde_json::Error>;
}

pub(crate) struct Typed<T> {
    tool: Arc<T>,
    spec: ToolSpec,
    static_name: Option<ArcStr>,
}

impl<T> Typed<T> {
    pub(crate) fn new<S>(tool: T) -> Self
    where
        S: Send + Sync + 'static,
        T: Tool<S>,
    {
        let spec = tool.spec();
        Typed {
            static_name: tool.static_name(),
            tool: Arc::new(tool),
            spec,
        }
    }

    /// The tool bound to its decoded arguments.
    fn bind<S>(&self, args: T::Args) -> Box<dyn DecodedArgs<S> + '_>
    where
        S: Send + Sync + 'static,
        T: Tool<S>,
    {
        Box::new(Bound {
            tool: &*self.tool,
            args,
        })
    }
}

/// A tool with its decoded arguments. It borrows the tool from the registry, which outlives
/// the call, so the handler's future needs no copy of it.
struct Bound<'t, T: Tool<S>, S: Send + Sync + 'static> {
    tool: &'t T,
    args: T::Args,
}

impl<T: Tool<S>, S: Send + Sync + 'static> DecodedArgs<S> for Bound<'_, T, S> {
    fn preflight<'a>(&'a self, ctx: &'a ToolContext<S>) -> BoxFuture<'a, Result<(), ToolError>> {
        self.tool.preflight(ctx, &self.args)
    }

    fn authorize<'a>(&'a self, ctx: &'a ToolContext<S>) -> BoxFuture<'a, Result<(), ToolError>> {
        self.tool.authorize(ctx, &self.args)
    }

    fn reconcile<'a>(
        &'a self,
        ctx: &'a ToolContext<S>,
    ) -> BoxFuture<'a, Result<Reconciled<Value>, ToolError>> {
        Box::pin(async move {
            Ok(match self.tool.reconcile(ctx, &self.args).await? {
                Reconciled::Completed(out) => Reconciled::Completed(output_json(out)?),
                Reconciled::NotExecuted => Reconciled::NotExecuted,
                Reconciled::Unknown => Reconciled::Unknown,
            })
        })
    }

    fn execute<'a>(
        self: Box<Self>,
        ctx: &'a ToolContext<S>,
    ) -> BoxFuture<'a, Result<Value, ToolError>>
    where
        Self: 'a,
    {
        let Bound { tool, args } = *self;
        tool.call_json(ctx, args)
    }
}

impl<S: Send + Sync + 'static, T: Tool<S>> ErasedTool<S> for Typed<T> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn static_name(&self) -> Option<ArcStr> {
        self.static_name.clone()
    }

    fn decode(&self, args: Value) -> Result<Box<dyn DecodedArgs<S> + '_>, serde_json::Error> {
        Ok(self.bind(serde_json::from_value(args)?))
    }

    fn decode_ref(&self, args: &Value) -> Result<Box<dyn DecodedArgs<S> + '_>, serde_json::Error> {
        Ok(self.bind(serde::Deserialize::deserialize(args)?))
    }
}

/// A registered tool with its state type erased, as the dispatcher stores it.
///
/// `#[toolset]` returns these from `Type::tools()`; [`ToolHandle::new`] wraps any [`Tool`].
pub struct ToolHandle<S: Send + Sync + 'static> {
    pub(crate) inner: Arc<dyn ErasedTool<S>>,
}

impl<S: Send + Sync + 'static> ToolHandle<S> {
    /// Wraps `tool`.
    pub fn new<T: Tool<S>>(tool: T) -> Self {
        ToolHandle {
            inner: Arc::new(Typed::new(tool)),
        }
    }

    /// The tool's declaration.
    pub fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }
}

impl<S: Send + Sync + 'static> Clone for ToolHandle<S> {
    fn clone(&self) -> Self {
        ToolHandle {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Send + Sync + 'static> std::fmt::Debug for ToolHandle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolHandle")
            .field("name", &self.spec().name)
            .finish()
    }
}
