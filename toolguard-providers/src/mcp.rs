//! Model Context Protocol: tools as MCP `Tool` objects.
//!
//! `inputSchema` is the canonical schema (MCP speaks JSON Schema 2020-12) in its portable form:
//! an object schema at every position (MCP requires each property schema to be an object; the
//! official TypeScript SDK's `listTools` refuses the whole list otherwise), an argument of any
//! JSON value described as such, and only JSON Schema formats (schemars' `uint`, `int32`, ...
//! become bounds). `outputSchema` is sent, in the same form, when the output schema describes an
//! object (MCP's `structuredContent` must be one); its lossy steps are reported under
//! `/outputSchema`. The annotations are derived from the declaration and never claim more safety than
//! it does: `readOnlyHint` is `read_only`, `destructiveHint` is its negation, `idempotentHint` is
//! sent (as `true`) only for read-only tools and for idempotent tools whose key the model supplies
//! in the arguments (`idempotency_key`), and `openWorldHint` is never sent (so clients assume the
//! conservative default). A tool declared `idempotent(key = "host")` gets no `idempotentHint`: a
//! client that repeats a call without the host's key (see the server's `IDEMPOTENCY_KEY_META`)
//! gets no replay protection, so repeating is not known to be safe.

use serde_json::{Map, Value, json};

use super::portable::{JSON_SCHEMA_FORMATS, portable};
use super::schema::{LossyStep, check_bounds, require_object_root};
use super::{
    ExportError, ExportOptions, ExportReport, Exported, ExportedSet, check_name, export_all,
    schema_error,
};
use toolguard_pipeline::ToolSpec;

/// Provider name in [`ProviderContext`](toolguard_pipeline::ProviderContext).
pub const PROVIDER: &str = "mcp";
/// API family of MCP `tools/call`.
pub const TOOLS_CALL: &str = "tools_call";

/// `spec` as an MCP `Tool`:
/// `{name, title, description, inputSchema, outputSchema?, annotations}`.
pub fn tool(spec: &ToolSpec, options: &ExportOptions) -> Result<Exported, ExportError> {
    check_name(spec)?;
    require_object_root(&spec.input_schema).map_err(|e| schema_error(spec, e))?;
    let input = portable(&spec.input_schema, JSON_SCHEMA_FORMATS, options.limits)
        .map_err(|e| schema_error(spec, e))?;
    let mut lossy = input.lossy;
    let mut tool = Map::new();
    tool.insert("name".to_owned(), json!(spec.name));
    tool.insert("title".to_owned(), json!(title_of(&spec.name)));
    tool.insert("description".to_owned(), json!(spec.description));
    tool.insert("inputSchema".to_owned(), input.schema);
    match output_schema(spec, options) {
        Some(schema) => {
            let output = portable(&schema, JSON_SCHEMA_FORMATS, options.limits)
                .map_err(|e| schema_error(spec, e))?;
            lossy.extend(output.lossy.into_iter().map(|step| LossyStep {
                pointer: format!("/outputSchema{}", step.pointer),
                what: step.what,
            }));
            tool.insert("outputSchema".to_owned(), output.schema);
        }
        None => lossy.push(LossyStep {
            pointer: String::new(),
            what: "outputSchema omitted: the output schema does not describe an object".to_owned(),
        }),
    }
    tool.insert("annotations".to_owned(), annotations(spec));
    let report = ExportReport {
        tool: spec.name.clone(),
        strict: false,
        not_strict_reason: None,
        lossy,
    };
    Ok(Exported {
        tool: Value::Object(tool),
        report,
    })
}

/// Every spec as MCP tools (the `tools` array of a `tools/list` result).
pub fn tools(specs: &[ToolSpec], options: &ExportOptions) -> Result<ExportedSet, ExportError> {
    export_all(specs, |s| tool(s, options))
}

/// The output schema, when it is an object schema within bounds.
pub fn output_schema(spec: &ToolSpec, options: &ExportOptions) -> Option<Value> {
    check_bounds(&spec.output_schema, options.limits).ok()?;
    require_object_root(&spec.output_schema).ok()?;
    Some(spec.output_schema.clone())
}

/// The MCP annotations of `spec` (see the module documentation).
pub fn annotations(spec: &ToolSpec) -> Value {
    let mut hints = Map::new();
    hints.insert("readOnlyHint".to_owned(), json!(spec.read_only));
    hints.insert("destructiveHint".to_owned(), json!(!spec.read_only));
    if spec.read_only || (spec.idempotent && spec.idempotency_key_field.is_some()) {
        hints.insert("idempotentHint".to_owned(), json!(true));
    }
    Value::Object(hints)
}

/// A display title from a tool name: `get_balance` → `Get balance`.
pub fn title_of(name: &str) -> String {
    let spaced = name.replace(['_', '-'], " ");
    let mut chars = spaced.trim().chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
