//! Provider dialects: export [`ToolSpec`]s to each provider's tool format, turn a provider's
//! response into [`ToolCall`](toolguard_pipeline::ToolCall)s, and turn a [`ToolOutcome`](toolguard_pipeline::ToolOutcome) into the provider's
//! tool-result message.
//!
//! One canonical JSON Schema (draft 2020-12) per tool is lowered per dialect; every lossy step is
//! recorded in an [`ExportReport`]. Whatever a provider promises about its output (OpenAI and
//! Anthropic strict modes included), the dispatcher validates the arguments against the canonical
//! schema.
//!
//! | provider | export | calls | streaming | results |
//! | --- | --- | --- | --- | --- |
//! | OpenAI Chat Completions | [`openai::chat_tool`] | [`openai::parse_chat_completion`] | [`openai::ChatStream`] | [`openai::chat_result`] |
//! | OpenAI Responses | [`openai::responses_tool`] | [`openai::parse_response`] | [`openai::ResponsesStream`] | [`openai::responses_result`] |
//! | Anthropic Messages | [`anthropic::tool`] | [`anthropic::parse_message`] | [`anthropic::MessageStream`] | [`anthropic::tool_result`] |
//! | Gemini | [`gemini::function_declaration`] | [`gemini::parse_generate_content`] | [`gemini::GenerateContentStream`] | [`gemini::function_response`] |
//! | MCP | [`mcp::tool`] | | | |
//!
//! [`Dispatcher::export`] exports every registered tool to one [`Dialect`] at once.

use serde::Serialize;
use serde_json::{Map, Value};

use toolguard_pipeline::dispatcher::Dispatcher;
use toolguard_pipeline::{ProviderContext, ToolSpec};

pub mod answer;
pub mod anthropic;
pub mod gemini;
/// The strict JSON reader every adapter reads text with.
pub use toolguard_pipeline::sanitize::json;
pub mod mcp;
pub mod openai;
mod openapi;
mod portable;
mod restore;
mod schema;
mod strict;

pub use answer::{model_payload, model_text, status_text};
pub use openapi::{is_gemini_key, lower_gemini_openapi};
pub use portable::ANY_VALUE;
pub use restore::{
    restore_call_nulls, restore_empty_arguments, restore_optional_nulls, takes_no_arguments,
};
pub use schema::{Limits, LossyStep, LowerError, Lowered, check_bounds};
pub use strict::{lower_anthropic_strict, lower_openai_strict};

/// Revision of the adapters in this module; part of every [`ProviderContext`] they fill, and so of
/// the approval digest. Raised whenever an adapter changes how it reads a response.
pub const ADAPTER_REVISION: &str = "2";

/// How tools are exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportOptions {
    /// A tool whose schema has no strict form is exported with `strict: false` instead of failing.
    pub allow_non_strict: bool,
    /// Ask Anthropic for strict tool use (`strict: true`).
    pub anthropic_strict: bool,
    /// Gemini: send `parameters` (OpenAPI subset) instead of `parametersJsonSchema`.
    pub gemini_openapi: bool,
    /// Bounds of every schema walk.
    pub limits: Limits,
}

impl Default for ExportOptions {
    fn default() -> Self {
        ExportOptions {
            allow_non_strict: false,
            anthropic_strict: false,
            gemini_openapi: false,
            limits: Limits::DEFAULT,
        }
    }
}

/// A provider tool format, for [`Dispatcher::export`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dialect {
    /// OpenAI Chat Completions ([`openai::chat_tools`]).
    OpenAiChat,
    /// OpenAI Responses ([`openai::responses_tools`]).
    OpenAiResponses,
    /// Anthropic Messages ([`anthropic::tools`]).
    Anthropic,
    /// Gemini `functionDeclarations` ([`gemini::function_declarations`]).
    Gemini,
    /// MCP `tools/list` ([`mcp::tools`]).
    Mcp,
}

/// Exports `specs` to `dialect`: the same as calling that dialect's set export.
pub fn export(
    specs: &[ToolSpec],
    dialect: Dialect,
    options: &ExportOptions,
) -> Result<ExportedSet, ExportError> {
    match dialect {
        Dialect::OpenAiChat => openai::chat_tools(specs, options),
        Dialect::OpenAiResponses => openai::responses_tools(specs, options),
        Dialect::Anthropic => anthropic::tools(specs, options),
        Dialect::Gemini => gemini::function_declarations(specs, options),
        Dialect::Mcp => mcp::tools(specs, options),
    }
}

/// A dispatcher's tools in a provider's dialect.
pub trait ExportTools {
    /// Every registered tool, in registration order, in `dialect`'s format: the request's
    /// `tools` value and one [`ExportReport`] per tool.
    ///
    /// Fails on the first tool that cannot be exported (an invalid name, or a schema with no form
    /// in the dialect; strict refusals too unless [`ExportOptions::allow_non_strict`]).
    ///
    /// ```
    /// # use toolguard_pipeline::Dispatcher;
    /// use toolguard_providers::{Dialect, ExportOptions, ExportTools as _};
    /// # let dispatcher = Dispatcher::builder(()).build().unwrap();
    /// let set = dispatcher.export(Dialect::Anthropic, &ExportOptions::default())?;
    /// assert_eq!(set.tools, serde_json::json!([]));
    /// # Ok::<(), toolguard_providers::ExportError>(())
    /// ```
    fn export(&self, dialect: Dialect, options: &ExportOptions)
    -> Result<ExportedSet, ExportError>;
}

impl<S: Send + Sync + 'static> ExportTools for Dispatcher<S> {
    fn export(
        &self,
        dialect: Dialect,
        options: &ExportOptions,
    ) -> Result<ExportedSet, ExportError> {
        let specs: Vec<ToolSpec> = self.specs().cloned().collect();
        export(&specs, dialect, options)
    }
}

/// What an export did to one tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct ExportReport {
    /// Tool name.
    pub tool: String,
    /// The provider was asked to enforce the schema (`strict: true`).
    pub strict: bool,
    /// Why the tool is not strict although strict was wanted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_strict_reason: Option<String>,
    /// Every lossy step of the lowering.
    pub lossy: Vec<LossyStep>,
}

/// One exported tool.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Exported {
    /// The tool in the provider's format.
    pub tool: Value,
    /// What the export did.
    pub report: ExportReport,
}

/// Several exported tools, ready for a request body.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ExportedSet {
    /// The request's tools value (an array, or Gemini's `{"functionDeclarations": [...]}`).
    pub tools: Value,
    /// One report per tool, in order.
    pub reports: Vec<ExportReport>,
}

/// Why a tool could not be exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// The tool name is not one every dialect accepts (`^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`).
    #[error("tool name {tool:?} must match ^[a-zA-Z][a-zA-Z0-9_-]{{0,63}}$")]
    InvalidName {
        /// The tool name.
        tool: String,
    },
    /// The input schema could not be lowered (strict refusals included, unless non-strict
    /// export is allowed).
    #[error("tool {tool:?}: {error}")]
    Schema {
        /// The tool name.
        tool: String,
        /// Why.
        error: LowerError,
    },
}

/// Why a provider response could not be read. Never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdapterError {
    /// A required field is missing or has the wrong type.
    #[error("{pointer:?}: expected {expected}")]
    Shape {
        /// JSON pointer into the response.
        pointer: String,
        /// What was expected there.
        expected: &'static str,
    },
    /// The response carries a provider error instead of a result.
    #[error("the provider returned an error of type {kind:?}")]
    Provider {
        /// The provider's error type.
        kind: String,
    },
    /// A tool call of a kind this adapter does not handle.
    #[error("{pointer:?}: unsupported tool call type {kind:?}")]
    UnsupportedCall {
        /// JSON pointer into the response.
        pointer: String,
        /// The call type.
        kind: String,
    },
    /// A stream ended (or was finished) before its tool calls were complete.
    #[error("the stream ended before its tool calls were complete")]
    Incomplete,
    /// A stream exceeded the accumulator's bounds.
    #[error("the stream exceeds {what}")]
    TooLarge {
        /// The bound.
        what: &'static str,
    },
    /// The response text is not one JSON document the adapter accepts (syntax, a repeated key,
    /// nesting over [`json::MAX_NESTING`]).
    #[error("the response text is refused: {0}")]
    Json(#[from] json::JsonError),
    /// The provider reports that the model tried to call a function and failed (Gemini's
    /// `MALFORMED_FUNCTION_CALL` and the like): no call was produced, and the turn should be
    /// retried or answered, not read as "no calls".
    #[error("the model's function call failed ({reason}); retry the turn or tell the model")]
    FailedCall {
        /// The provider's reason code.
        reason: String,
    },
}

/// Whether `name` is a tool name every dialect accepts: `^[a-zA-Z][a-zA-Z0-9_-]{0,63}$`, the
/// portable rule the `#[tool]` macro enforces (an ASCII letter, then up to 63 ASCII letters,
/// digits or underscores).
pub use toolguard_pipeline::spec::is_valid_tool_name;

pub(crate) fn check_name(spec: &ToolSpec) -> Result<(), ExportError> {
    if is_valid_tool_name(&spec.name) {
        Ok(())
    } else {
        Err(ExportError::InvalidName {
            tool: spec.name.clone(),
        })
    }
}

pub(crate) fn schema_error(spec: &ToolSpec, error: LowerError) -> ExportError {
    ExportError::Schema {
        tool: spec.name.clone(),
        error,
    }
}

/// The canonical schema in its portable form (see [`portable`]: object schemas at every
/// position, JSON Schema formats only) without `$schema` (which no provider needs), each change
/// recorded.
pub(crate) fn plain_schema(spec: &ToolSpec, limits: Limits) -> Result<Lowered, ExportError> {
    schema::require_object_root(&spec.input_schema).map_err(|e| schema_error(spec, e))?;
    let Lowered {
        mut schema,
        mut lossy,
    } = portable::portable(&spec.input_schema, portable::JSON_SCHEMA_FORMATS, limits)
        .map_err(|e| schema_error(spec, e))?;
    if let Some(map) = schema.as_object_mut()
        && map.remove("$schema").is_some()
    {
        lossy.insert(
            0,
            LossyStep {
                pointer: "/$schema".to_owned(),
                what: "$schema dropped".into(),
            },
        );
    }
    Ok(Lowered { schema, lossy })
}

/// Exports every spec with `export`, collecting the tools into an array.
pub(crate) fn export_all(
    specs: &[ToolSpec],
    export: impl Fn(&ToolSpec) -> Result<Exported, ExportError>,
) -> Result<ExportedSet, ExportError> {
    let mut tools = Vec::with_capacity(specs.len());
    let mut reports = Vec::with_capacity(specs.len());
    for spec in specs {
        let exported = export(spec)?;
        tools.push(exported.tool);
        reports.push(exported.report);
    }
    Ok(ExportedSet {
        tools: Value::Array(tools),
        reports,
    })
}

pub(crate) fn context(
    provider: &str,
    api_family: &str,
    response_id: Option<&str>,
) -> ProviderContext {
    ProviderContext {
        provider: provider.to_owned(),
        api_family: api_family.to_owned(),
        adapter_revision: ADAPTER_REVISION.to_owned(),
        response_id: response_id.map(str::to_owned),
    }
}

/// Reading a response: every access names its JSON pointer in the error.
pub(crate) mod read {
    use super::*;

    pub(crate) fn shape(pointer: &str, expected: &'static str) -> AdapterError {
        AdapterError::Shape {
            pointer: pointer.to_owned(),
            expected,
        }
    }

    pub(crate) fn object<'a>(
        value: &'a Value,
        pointer: &str,
    ) -> Result<&'a Map<String, Value>, AdapterError> {
        value.as_object().ok_or_else(|| shape(pointer, "an object"))
    }

    /// A field that must be an array; absent or `null` reads as empty.
    pub(crate) fn array_or_empty<'a>(
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
    ) -> Result<&'a [Value], AdapterError> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(shape(&format!("{pointer}/{key}"), "an array")),
        }
    }

    pub(crate) fn string<'a>(
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
    ) -> Result<&'a str, AdapterError> {
        map.get(key)
            .and_then(Value::as_str)
            .ok_or_else(|| shape(&format!("{pointer}/{key}"), "a string"))
    }

    /// A field that may be absent or `null`, and otherwise must be a string.
    pub(crate) fn opt_string<'a>(
        map: &'a Map<String, Value>,
        key: &str,
        pointer: &str,
    ) -> Result<Option<&'a str>, AdapterError> {
        match map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(shape(&format!("{pointer}/{key}"), "a string")),
        }
    }

    /// A provider error object at the top of a response (`{"error": {...}}` or
    /// `{"type": "error"}`).
    pub(crate) fn provider_error(map: &Map<String, Value>) -> Option<AdapterError> {
        let error = map.get("error").filter(|e| !e.is_null())?;
        let kind = error
            .get("type")
            .or_else(|| error.get("status"))
            .or_else(|| error.get("code"))
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        Some(AdapterError::Provider {
            kind: kind.chars().take(64).collect(),
        })
    }
}
