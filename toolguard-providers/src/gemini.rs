//! Google Gemini (`generateContent`).
//!
//! Tools are exported as `functionDeclarations`. By default the canonical schema goes into
//! `parametersJsonSchema`; with [`ExportOptions::gemini_openapi`] it is lowered to the OpenAPI
//! subset of `parameters` with [`lower_gemini_openapi`](super::lower_gemini_openapi) (which
//! refuses recursive schemas).
//!
//! A candidate whose `finishReason` reports a failed function call (`MALFORMED_FUNCTION_CALL`
//! and the like) is an [`AdapterError::FailedCall`], so that the agent loop retries or answers
//! the turn instead of reading it as "no calls".
//!
//! [`parse_generate_content_text`] and [`GenerateContentStream::push_text`] read the response
//! text strictly: an object that repeats a key (a call's `args` included) or nesting over
//! [`json::MAX_NESTING`] is an [`AdapterError::Json`]. The functions taking a parsed [`Value`]
//! cannot see repeated keys (`serde_json` keeps the last one): prefer the text forms where the
//! body is at hand.

use serde_json::{Map, Value, json};

use super::json;
use super::openapi::lower_openapi;
use super::read::{array_or_empty, object, opt_string, provider_error, string};
use super::{
    AdapterError, ExportError, ExportOptions, ExportReport, Exported, ExportedSet, check_name,
    context, export_all, model_payload, plain_schema, schema_error,
};
use toolguard_pipeline::{RawArguments, Status, ToolCall, ToolOutcome, ToolSpec};

/// Provider name in [`ProviderContext`](toolguard_pipeline::ProviderContext).
pub const PROVIDER: &str = "gemini";
/// API family of `generateContent` / `streamGenerateContent`.
pub const GENERATE_CONTENT: &str = "generate_content";
/// Prefix of the call ids synthesized for function calls that carry no `id`.
pub const SYNTHETIC_ID_PREFIX: &str = "gemini-";

/// `spec` as a Gemini function declaration:
/// `{name, description, parametersJsonSchema}` (or `parameters`, see [`ExportOptions`]; a tool
/// without arguments then has no `parameters`).
pub fn function_declaration(
    spec: &ToolSpec,
    options: &ExportOptions,
) -> Result<Exported, ExportError> {
    check_name(spec)?;
    let (key, lowered) = if options.gemini_openapi {
        let lowered =
            lower_openapi(&spec.input_schema, options.limits).map_err(|e| schema_error(spec, e))?;
        ("parameters", lowered)
    } else {
        ("parametersJsonSchema", plain_schema(spec, options.limits)?)
    };
    let mut tool = Map::new();
    tool.insert("name".to_owned(), json!(spec.name));
    tool.insert("description".to_owned(), json!(spec.description));
    // Gemini rejects an OpenAPI object without properties: a tool without arguments has no
    // `parameters` at all.
    let no_arguments = options.gemini_openapi && lowered.schema.get("properties").is_none();
    if !no_arguments {
        tool.insert(key.to_owned(), lowered.schema);
    }
    let report = ExportReport {
        tool: spec.name.clone(),
        strict: false,
        not_strict_reason: None,
        lossy: lowered.lossy,
    };
    Ok(Exported {
        tool: Value::Object(tool),
        report,
    })
}

/// Every spec as one Gemini `Tool`: `{"functionDeclarations": [...]}` (an element of the
/// request's `tools` array).
pub fn function_declarations(
    specs: &[ToolSpec],
    options: &ExportOptions,
) -> Result<ExportedSet, ExportError> {
    let set = export_all(specs, |s| function_declaration(s, options))?;
    Ok(ExportedSet {
        tools: json!({ "functionDeclarations": set.tools }),
        reports: set.reports,
    })
}

/// The `functionCall` parts of the first candidate of a `generateContent` response.
///
/// Other candidates are alternatives, not parallel calls. A candidate whose `finishReason`
/// reports a failed function call (`MALFORMED_FUNCTION_CALL` and the like, see
/// [`is_failed_call`]) is an [`AdapterError::FailedCall`], never "no calls". A call without `id` gets
/// `gemini-<n>`, `n` counting the candidate's function calls from 0 (stable for one response);
/// absent `args` read as `{}`.
pub fn parse_generate_content(response: &Value) -> Result<Vec<ToolCall>, AdapterError> {
    parse_from(response, 0)
}

/// [`parse_generate_content`], numbering synthesized ids from `first`.
fn parse_from(response: &Value, first: usize) -> Result<Vec<ToolCall>, AdapterError> {
    let root = object(response, "")?;
    if let Some(error) = provider_error(root) {
        return Err(error);
    }
    let ctx = context(
        PROVIDER,
        GENERATE_CONTENT,
        opt_string(root, "responseId", "")?,
    );
    let candidates = array_or_empty(root, "candidates", "")?;
    let Some(candidate) = candidates.first() else {
        return Ok(Vec::new());
    };
    let candidate = object(candidate, "/candidates/0")?;
    if let Some(reason) = opt_string(candidate, "finishReason", "/candidates/0")?
        && is_failed_call(reason)
    {
        return Err(AdapterError::FailedCall {
            reason: reason.chars().take(64).collect(),
        });
    }
    let Some(content) = candidate.get("content").filter(|c| !c.is_null()) else {
        return Ok(Vec::new());
    };
    let at = "/candidates/0/content";
    let content = object(content, at)?;
    let mut calls = Vec::new();
    for (i, part) in array_or_empty(content, "parts", at)?.iter().enumerate() {
        let at = format!("{at}/parts/{i}");
        let part = object(part, &at)?;
        let Some(call) = part.get("functionCall") else {
            continue;
        };
        let at = format!("{at}/functionCall");
        let call = object(call, &at)?;
        let name = string(call, "name", &at)?;
        let id = match opt_string(call, "id", &at)? {
            Some(id) if !id.is_empty() => id.to_owned(),
            _ => format!("{SYNTHETIC_ID_PREFIX}{}", first + calls.len()),
        };
        let args = match call.get("args") {
            None | Some(Value::Null) => json!({}),
            Some(args) => args.clone(),
        };
        calls.push(ToolCall::new(id, name, RawArguments::Value(args)).with_provider(ctx.clone()));
    }
    Ok(calls)
}

/// `finishReason` values that report a function call the model tried and failed to make.
const FAILED_CALL_REASONS: &[&str] = &[
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
    "MISSING_THOUGHT_SIGNATURE",
];

/// Whether a `finishReason` reports a failed function call: one of the documented values, or
/// any later one that names a function or tool call.
pub fn is_failed_call(reason: &str) -> bool {
    FAILED_CALL_REASONS.contains(&reason)
        || reason.contains("FUNCTION_CALL")
        || reason.contains("TOOL_CALL")
}

/// [`parse_generate_content`] of the response text, read strictly: a repeated key or nesting
/// over [`json::MAX_NESTING`] is an [`AdapterError::Json`].
pub fn parse_generate_content_text(response: &str) -> Result<Vec<ToolCall>, AdapterError> {
    parse_generate_content(&json::parse(response)?)
}

/// Reads the chunks of `streamGenerateContent` (each a `generateContent` response whose parts
/// carry complete function calls): synthesized ids keep counting across chunks, so they stay
/// unique and stable for the whole streamed response.
#[derive(Debug, Default)]
pub struct GenerateContentStream {
    calls: usize,
}

impl GenerateContentStream {
    /// An empty reader.
    pub fn new() -> Self {
        GenerateContentStream::default()
    }

    /// [`push`](Self::push) for the text of one chunk, read strictly.
    pub fn push_text(&mut self, chunk: &str) -> Result<Vec<ToolCall>, AdapterError> {
        self.push(&json::parse(chunk)?)
    }

    /// The calls of one chunk.
    pub fn push(&mut self, chunk: &Value) -> Result<Vec<ToolCall>, AdapterError> {
        let calls = parse_from(chunk, self.calls)?;
        self.calls += calls.len();
        Ok(calls)
    }
}

/// Whether `id` is one [`parse_generate_content`] made up (`gemini-` and digits).
pub fn is_synthetic_call_id(id: &str) -> bool {
    id.strip_prefix(SYNTHETIC_ID_PREFIX)
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The part answering a call:
/// `{"functionResponse":{"name","id"?,"response":{"output"|"error": ...}}}`.
///
/// `id` is sent only when the call carried one (not for a synthesized id).
pub fn function_response(outcome: &ToolOutcome) -> Value {
    let key = if outcome.status == Status::Ok {
        "output"
    } else {
        "error"
    };
    let mut response = Map::new();
    response.insert("name".to_owned(), json!(outcome.tool));
    if !is_synthetic_call_id(&outcome.call_id) {
        response.insert("id".to_owned(), json!(outcome.call_id));
    }
    response.insert(
        "response".to_owned(),
        json!({ key: model_payload(outcome) }),
    );
    json!({ "functionResponse": response })
}
