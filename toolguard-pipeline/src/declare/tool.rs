//! [`RuntimeTool`]: a declared [`ToolSpec`] and a handler that forwards the checked arguments.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::error::ToolError;
use crate::spec::{FieldKind, ToolSpec};
use crate::tool::{BoxFuture, Tool, ToolContext};

/// The handler of a [`RuntimeTool`]: gets the tool name and the arguments after every stage
/// (validated, sanitized, path fields joined to their roots, the key field removed) and returns
/// the result.
pub type ForwardFn =
    Arc<dyn Fn(String, Value) -> BoxFuture<'static, Result<Value, ToolError>> + Send + Sync>;

/// A tool declared at run time. It implements [`Tool`], so it registers like any other tool
/// (`DispatcherBuilder::tool`) and every call runs the whole pipeline before `forward` is called.
#[derive(Clone)]
pub struct RuntimeTool {
    spec: ToolSpec,
    forward: ForwardFn,
    label: Option<LabelFn>,
}

/// Names a result for reviewers when it becomes a provenance source (see
/// [`RuntimeTool::with_source_label`]).
pub type LabelFn = fn(&Value) -> Option<String>;

impl std::fmt::Debug for RuntimeTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeTool")
            .field("name", &self.spec.name)
            .finish()
    }
}

impl RuntimeTool {
    /// A tool with the declared `spec` (see [`super::declare`]) calling `forward`.
    pub fn new(spec: ToolSpec, forward: ForwardFn) -> Self {
        RuntimeTool {
            spec,
            forward,
            label: None,
        }
    }

    /// Labels each result that becomes a provenance source with `label(result)` (e.g. the
    /// content types an MCP result carries), shown to reviewers beside the source.
    #[must_use]
    pub fn with_source_label(mut self, label: LabelFn) -> Self {
        self.label = Some(label);
        self
    }

    /// The declaration.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// The arguments as forwarded: the key field removed and each `path` field's relative
    /// value (checked by the sanitizer below its root) joined to the root.
    pub fn forwarded_arguments(&self, mut args: Value) -> Value {
        let Some(map) = args.as_object_mut() else {
            return args;
        };
        if let Some(key) = &self.spec.idempotency_key_field {
            map.remove(key);
        }
        for field in &self.spec.fields {
            if let (FieldKind::Path, Some(root), Some(value)) =
                (field.kind, &field.root, map.get_mut(&field.name))
            {
                join_root(Path::new(root), value);
            }
        }
        args
    }
}

/// Joins every string in `value` (nested in arrays too) to `root`.
fn join_root(root: &Path, value: &mut Value) {
    match value {
        Value::String(s) => *s = root.join(s.as_str()).to_string_lossy().into_owned(),
        Value::Array(items) => items.iter_mut().for_each(|v| join_root(root, v)),
        _ => {}
    }
}

impl<S: Send + Sync + 'static> Tool<S> for RuntimeTool {
    type Args = Value;
    type Output = Value;

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext<S>,
        args: Value,
    ) -> BoxFuture<'a, Result<Value, ToolError>> {
        let args = self.forwarded_arguments(args);
        let forwarded = (self.forward)(self.spec.name.clone(), args);
        Box::pin(async move {
            let result = forwarded.await?;
            if let Some(label) = self.label.and_then(|l| l(&result)) {
                ctx.set_source_label(label);
            }
            Ok(result)
        })
    }
}
