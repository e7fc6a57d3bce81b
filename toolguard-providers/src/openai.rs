//! OpenAI: Chat Completions and Responses.
//!
//! Tools are exported strict by default (`strict: true`, the schema lowered with
//! [`lower_openai_strict`](super::lower_openai_strict)); a tool whose schema has no strict form
//! fails the export unless [`ExportOptions::allow_non_strict`] is set, in which case it is sent
//! with `strict: false` and the reason is in its report. `strict` is always sent explicitly.
//!
//! Strict mode turns optional properties into required nullable ones: run
//! [`restore_call_nulls`](super::restore_call_nulls) on each call of a strict tool before
//! dispatching it, so that a `null` the model used for "absent" is absent again.
//!
//! Some OpenAI-compatible back ends send `arguments: ""` (or none) for a tool without
//! parameters: run [`restore_empty_arguments`](super::restore_empty_arguments) with the tool's
//! canonical schema to read them as `{}` (only for such tools; elsewhere empty arguments stay
//! `malformed`).
//!
//! The `*_text` functions and `push_text` read the response text strictly (a repeated key or
//! nesting over [`json::MAX_NESTING`] is refused); the functions taking a parsed [`Value`] cannot
//! see repeated keys (`serde_json` keeps the last one): prefer the text forms where the body is
//! at hand.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::json;
use super::read::{array_or_empty, object, opt_string, provider_error, shape, string};
use super::schema::LowerError;
use super::strict::{OPENAI, lower_strict};
use super::{
    AdapterError, ExportError, ExportOptions, ExportReport, Exported, ExportedSet, check_name,
    context, export_all, model_text, plain_schema, schema_error,
};
use toolguard_pipeline::{RawArguments, ToolCall, ToolOutcome, ToolSpec};

/// Provider name in [`ProviderContext`](toolguard_pipeline::ProviderContext).
pub const PROVIDER: &str = "openai";
/// API family of Chat Completions.
pub const CHAT_COMPLETIONS: &str = "chat_completions";
/// API family of the Responses API.
pub const RESPONSES: &str = "responses";

/// Most tool calls one stream may carry.
pub const MAX_STREAM_CALLS: usize = 128;
/// Most argument bytes one stream may carry, over all its calls.
pub const MAX_STREAM_ARGUMENT_BYTES: usize = 1 << 20;

/// The `parameters` schema and `strict` flag of `spec`.
fn parameters(
    spec: &ToolSpec,
    options: &ExportOptions,
) -> Result<(Value, ExportReport), ExportError> {
    check_name(spec)?;
    let mut report = ExportReport {
        tool: spec.name.clone(),
        strict: true,
        not_strict_reason: None,
        lossy: Vec::new(),
    };
    match lower_strict(&spec.input_schema, &OPENAI, options.limits) {
        Ok(lowered) => {
            report.lossy = lowered.lossy;
            Ok((lowered.schema, report))
        }
        Err(error @ LowerError::NotStrict { .. }) if options.allow_non_strict => {
            let plain = plain_schema(spec, options.limits)?;
            report.strict = false;
            report.not_strict_reason = Some(error.to_string());
            report.lossy = plain.lossy;
            Ok((plain.schema, report))
        }
        Err(error) => Err(schema_error(spec, error)),
    }
}

/// `spec` as a Chat Completions tool:
/// `{"type":"function","function":{name, description, parameters, strict}}`.
pub fn chat_tool(spec: &ToolSpec, options: &ExportOptions) -> Result<Exported, ExportError> {
    let (parameters, report) = parameters(spec, options)?;
    let tool = json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": parameters,
            "strict": report.strict,
        }
    });
    Ok(Exported { tool, report })
}

/// Every spec as Chat Completions tools (the request's `tools` array).
pub fn chat_tools(specs: &[ToolSpec], options: &ExportOptions) -> Result<ExportedSet, ExportError> {
    export_all(specs, |s| chat_tool(s, options))
}

/// `spec` as a Responses API tool: `{"type":"function", name, description, parameters, strict}`.
pub fn responses_tool(spec: &ToolSpec, options: &ExportOptions) -> Result<Exported, ExportError> {
    let (parameters, report) = parameters(spec, options)?;
    let tool = json!({
        "type": "function",
        "name": spec.name,
        "description": spec.description,
        "parameters": parameters,
        "strict": report.strict,
    });
    Ok(Exported { tool, report })
}

/// Every spec as Responses API tools.
pub fn responses_tools(
    specs: &[ToolSpec],
    options: &ExportOptions,
) -> Result<ExportedSet, ExportError> {
    export_all(specs, |s| responses_tool(s, options))
}

/// The tool calls of the first choice of a Chat Completions response.
///
/// Other choices (`n > 1`) are alternatives, not parallel calls: read one with
/// [`parse_chat_choice`]. The `arguments` string is kept as it is (possibly empty or invalid
/// JSON), for the dispatcher to parse strictly.
pub fn parse_chat_completion(response: &Value) -> Result<Vec<ToolCall>, AdapterError> {
    parse_chat_choice(response, 0)
}

/// [`parse_chat_completion`] of the response text, read strictly: a repeated key or nesting over
/// [`json::MAX_NESTING`] is an [`AdapterError::Json`].
pub fn parse_chat_completion_text(response: &str) -> Result<Vec<ToolCall>, AdapterError> {
    parse_chat_completion(&json::parse(response)?)
}

/// The tool calls of choice `position` (in array order) of a Chat Completions response; none
/// when there is no such choice.
pub fn parse_chat_choice(response: &Value, position: usize) -> Result<Vec<ToolCall>, AdapterError> {
    let root = object(response, "")?;
    if let Some(error) = provider_error(root) {
        return Err(error);
    }
    let response_id = opt_string(root, "id", "")?;
    let choices = array_or_empty(root, "choices", "")?;
    let Some(choice) = choices.get(position) else {
        return Ok(Vec::new());
    };
    let at = format!("/choices/{position}");
    let choice = object(choice, &at)?;
    let Some(message) = choice.get("message") else {
        return Err(shape(&format!("{at}/message"), "an object"));
    };
    let at = format!("{at}/message");
    let message = object(message, &at)?;
    if message.get("function_call").is_some_and(|f| !f.is_null()) {
        // The deprecated single `function_call` form: refused rather than silently unanswered.
        return Err(AdapterError::UnsupportedCall {
            pointer: format!("{at}/function_call"),
            kind: "function_call".to_owned(),
        });
    }
    let ctx = context(PROVIDER, CHAT_COMPLETIONS, response_id);
    let mut calls = Vec::new();
    for (i, call) in array_or_empty(message, "tool_calls", &at)?
        .iter()
        .enumerate()
    {
        let at = format!("{at}/tool_calls/{i}");
        let call = object(call, &at)?;
        let kind = opt_string(call, "type", &at)?.unwrap_or("function");
        if kind != "function" {
            return Err(AdapterError::UnsupportedCall {
                pointer: at,
                kind: kind.to_owned(),
            });
        }
        let id = string(call, "id", &at)?;
        let function = object(
            call.get("function").unwrap_or(&Value::Null),
            &format!("{at}/function"),
        )?;
        let at = format!("{at}/function");
        let name = string(function, "name", &at)?;
        let arguments = opt_string(function, "arguments", &at)?.unwrap_or_default();
        calls.push(
            ToolCall::new(id, name, RawArguments::Json(arguments.to_owned()))
                .with_provider(ctx.clone()),
        );
    }
    Ok(calls)
}

/// Output item types of the Responses API that need the host and are not function calls: calls
/// to host-side tools this adapter does not handle, and requests for the host's decision (an MCP
/// tool approval). They would otherwise be silently unanswered.
const UNHANDLED_CALLS: &[&str] = &[
    "custom_tool_call",
    "computer_call",
    "local_shell_call",
    "shell_call",
    "apply_patch_call",
    "mcp_approval_request",
];

/// The `function_call` items of a Responses API response (`call_id` becomes the call id).
///
/// Other items (`message`, `reasoning`, calls the provider executed itself) are skipped; calls
/// to host-side tools of other kinds are an [`AdapterError::UnsupportedCall`].
pub fn parse_response(response: &Value) -> Result<Vec<ToolCall>, AdapterError> {
    let root = object(response, "")?;
    if let Some(error) = provider_error(root) {
        return Err(error);
    }
    let response_id = opt_string(root, "id", "")?;
    let ctx = context(PROVIDER, RESPONSES, response_id);
    let mut calls = Vec::new();
    for (i, item) in array_or_empty(root, "output", "")?.iter().enumerate() {
        let at = format!("/output/{i}");
        let item = object(item, &at)?;
        let kind = string(item, "type", &at)?;
        if UNHANDLED_CALLS.contains(&kind) {
            return Err(AdapterError::UnsupportedCall {
                pointer: at,
                kind: kind.to_owned(),
            });
        }
        if kind != "function_call" {
            continue;
        }
        let call_id = string(item, "call_id", &at)?;
        let name = string(item, "name", &at)?;
        let arguments = opt_string(item, "arguments", &at)?.unwrap_or_default();
        calls.push(
            ToolCall::new(call_id, name, RawArguments::Json(arguments.to_owned()))
                .with_provider(ctx.clone()),
        );
    }
    Ok(calls)
}

/// [`parse_response`] of the response text, read strictly: a repeated key or nesting over
/// [`json::MAX_NESTING`] is an [`AdapterError::Json`].
pub fn parse_response_text(response: &str) -> Result<Vec<ToolCall>, AdapterError> {
    parse_response(&json::parse(response)?)
}

/// The Chat Completions message answering a call: `{"role":"tool","tool_call_id","content"}`.
pub fn chat_result(outcome: &ToolOutcome) -> Value {
    json!({"role": "tool", "tool_call_id": outcome.call_id, "content": model_text(outcome)})
}

/// The Responses API input item answering a call:
/// `{"type":"function_call_output","call_id","output"}`.
pub fn responses_result(outcome: &ToolOutcome) -> Value {
    json!({"type": "function_call_output", "call_id": outcome.call_id, "output": model_text(outcome)})
}

#[derive(Debug, Default)]
struct Partial {
    /// The `index` the call was sent at (its position when the back end sent none).
    index: u64,
    id: String,
    name: String,
    arguments: String,
}

/// Accumulates the `delta.tool_calls[]` fragments of a streamed Chat Completions response
/// (first choice only) into complete calls.
///
/// [`push`](Self::push) each parsed chunk (the JSON of one `data:` line); the calls are yielded,
/// in the order they began, when the chunk carrying the choice's `finish_reason` arrives.
///
/// A fragment continues the call open at its `index`. Two calls sent at one `index` with
/// different ids are kept apart (a fragment with a new id begins a new call), so every call id
/// the model sent gets its own call. A fragment without `index` (back ends that stream one call
/// per choice) continues the last call, or begins a new one when it carries a new id.
#[derive(Debug, Default)]
pub struct ChatStream {
    response_id: Option<String>,
    calls: Vec<Partial>,
    /// The call open at each `index`, as a position in `calls`.
    open: BTreeMap<u64, usize>,
    bytes: usize,
    finished: bool,
}

impl ChatStream {
    /// An empty accumulator.
    pub fn new() -> Self {
        ChatStream::default()
    }

    /// Whether the first choice's `finish_reason` has arrived.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// [`push`](Self::push) for the text of one `data:` line, read strictly (a repeated key or
    /// deep nesting is refused).
    pub fn push_text(&mut self, chunk: &str) -> Result<Vec<ToolCall>, AdapterError> {
        self.push(&json::parse(chunk)?)
    }

    /// Adds one chunk; returns the calls it completes (all of them, on `finish_reason`).
    pub fn push(&mut self, chunk: &Value) -> Result<Vec<ToolCall>, AdapterError> {
        let root = object(chunk, "")?;
        if let Some(error) = provider_error(root) {
            return Err(error);
        }
        if self.response_id.is_none() {
            self.response_id = opt_string(root, "id", "")?.map(str::to_owned);
        }
        for (i, choice) in array_or_empty(root, "choices", "")?.iter().enumerate() {
            let at = format!("/choices/{i}");
            let choice = object(choice, &at)?;
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta").filter(|d| !d.is_null()) {
                let at = format!("{at}/delta");
                let delta = object(delta, &at)?;
                for (j, fragment) in array_or_empty(delta, "tool_calls", &at)?.iter().enumerate() {
                    self.fragment(fragment, &format!("{at}/tool_calls/{j}"))?;
                }
            }
            if opt_string(choice, "finish_reason", &at)?.is_some() && !self.finished {
                self.finished = true;
                return self.take();
            }
        }
        Ok(Vec::new())
    }

    /// Ends the stream: the calls not yet yielded, or [`AdapterError::Incomplete`] when the
    /// `finish_reason` never came and calls were begun.
    pub fn finish(mut self) -> Result<Vec<ToolCall>, AdapterError> {
        if !self.finished && !self.calls.is_empty() {
            return Err(AdapterError::Incomplete);
        }
        self.take()
    }

    fn fragment(&mut self, fragment: &Value, at: &str) -> Result<(), AdapterError> {
        let fragment = object(fragment, at)?;
        let index = match fragment.get("index") {
            None | Some(Value::Null) => None,
            Some(index) => Some(
                index
                    .as_u64()
                    .ok_or_else(|| shape(&format!("{at}/index"), "an integer"))?,
            ),
        };
        let kind = opt_string(fragment, "type", at)?.unwrap_or("function");
        if kind != "function" {
            return Err(AdapterError::UnsupportedCall {
                pointer: at.to_owned(),
                kind: kind.to_owned(),
            });
        }
        let id = opt_string(fragment, "id", at)?.filter(|id| !id.is_empty());
        let (name, arguments) = match fragment.get("function").filter(|f| !f.is_null()) {
            Some(function) => {
                let at = format!("{at}/function");
                let function = object(function, &at)?;
                (
                    opt_string(function, "name", &at)?,
                    opt_string(function, "arguments", &at)?,
                )
            }
            None => (None, None),
        };
        let added =
            id.map_or(0, str::len) + name.map_or(0, str::len) + arguments.map_or(0, str::len);
        self.bytes += added;
        if self.bytes > MAX_STREAM_ARGUMENT_BYTES {
            return Err(AdapterError::TooLarge {
                what: "the argument size bound",
            });
        }
        let position = self.slot(index, id)?;
        let partial = &mut self.calls[position];
        if let Some(id) = id
            && partial.id.is_empty()
        {
            partial.id = id.to_owned();
        }
        if let Some(name) = name {
            if partial.name.is_empty() {
                partial.name = name.to_owned();
            } else if partial.name != name {
                partial.name.push_str(name);
            }
        }
        if let Some(arguments) = arguments {
            partial.arguments.push_str(arguments);
        }
        Ok(())
    }

    /// The call a fragment at `index` with `id` belongs to, begun when it is new.
    fn slot(&mut self, index: Option<u64>, id: Option<&str>) -> Result<usize, AdapterError> {
        let current = match index {
            Some(index) => self.open.get(&index).copied(),
            None => self.calls.len().checked_sub(1),
        };
        if let Some(position) = current {
            let known = &self.calls[position].id;
            if id.is_none_or(|id| known.is_empty() || known == id) {
                return Ok(position);
            }
        }
        if self.calls.len() >= MAX_STREAM_CALLS {
            return Err(AdapterError::TooLarge {
                what: "the number of tool calls",
            });
        }
        let position = self.calls.len();
        self.calls.push(Partial {
            index: index.unwrap_or(position as u64),
            ..Partial::default()
        });
        if let Some(index) = index {
            self.open.insert(index, position);
        }
        Ok(position)
    }

    fn take(&mut self) -> Result<Vec<ToolCall>, AdapterError> {
        let ctx = context(PROVIDER, CHAT_COMPLETIONS, self.response_id.as_deref());
        self.open.clear();
        let mut calls = Vec::with_capacity(self.calls.len());
        for partial in std::mem::take(&mut self.calls) {
            let index = partial.index;
            if partial.id.is_empty() {
                return Err(shape(
                    &format!("/choices/0/delta/tool_calls/{index}/id"),
                    "a string",
                ));
            }
            if partial.name.is_empty() {
                return Err(shape(
                    &format!("/choices/0/delta/tool_calls/{index}/function/name"),
                    "a string",
                ));
            }
            calls.push(
                ToolCall::new(
                    partial.id,
                    partial.name,
                    RawArguments::Json(partial.arguments),
                )
                .with_provider(ctx.clone()),
            );
        }
        Ok(calls)
    }
}

#[derive(Debug, Default)]
struct PartialItem {
    call_id: String,
    name: String,
    arguments: String,
    /// The authoritative full text from `response.function_call_arguments.done`.
    done_arguments: Option<String>,
}

/// Accumulates the events of a streamed Responses API response into complete calls.
///
/// [`push`](Self::push) each parsed event (the JSON of one `data:` line): a `function_call`
/// output item is yielded by the `response.output_item.done` event that closes it.
///
/// A resumed background stream (`starting_after`) may bring argument events, or a whole
/// `output_item.done`, for an item whose `output_item.added` came before the resumption point:
/// the complete `function_call` of that `output_item.done` is yielded as it stands (an item
/// that is not `completed` is [`AdapterError::Incomplete`]); an item whose argument events came
/// but whose `output_item.done` never does makes the stream [`AdapterError::Incomplete`], so no
/// call is ever dropped silently.
#[derive(Debug, Default)]
pub struct ResponsesStream {
    response_id: Option<String>,
    items: BTreeMap<u64, PartialItem>,
    /// Output indexes whose argument events came without `output_item.added` (a stream resumed
    /// in the middle of an item): their `output_item.done` must still come.
    resumed: std::collections::BTreeSet<u64>,
    started: usize,
    bytes: usize,
    completed: bool,
}

impl ResponsesStream {
    /// An empty accumulator.
    pub fn new() -> Self {
        ResponsesStream::default()
    }

    /// Whether `response.completed` has arrived.
    pub fn is_finished(&self) -> bool {
        self.completed
    }

    /// [`push`](Self::push) for the text of one `data:` line, read strictly (a repeated key or
    /// deep nesting is refused).
    pub fn push_text(&mut self, event: &str) -> Result<Vec<ToolCall>, AdapterError> {
        self.push(&json::parse(event)?)
    }

    /// Adds one event; returns the call it completes, if any.
    pub fn push(&mut self, event: &Value) -> Result<Vec<ToolCall>, AdapterError> {
        let root = object(event, "")?;
        let kind = string(root, "type", "")?;
        match kind {
            "error" => {
                let code = opt_string(root, "code", "")?.unwrap_or("error");
                return Err(AdapterError::Provider {
                    kind: code.chars().take(64).collect(),
                });
            }
            "response.failed" => {
                return Err(AdapterError::Provider {
                    kind: "response.failed".to_owned(),
                });
            }
            "response.created" | "response.in_progress" => self.note_response(root)?,
            "response.completed" | "response.incomplete" => {
                self.note_response(root)?;
                self.completed = true;
                if !self.items.is_empty() || !self.resumed.is_empty() {
                    return Err(AdapterError::Incomplete);
                }
            }
            "response.output_item.added" => {
                let index = output_index(root)?;
                let item = object(root.get("item").unwrap_or(&Value::Null), "/item")?;
                let item_kind = string(item, "type", "/item")?;
                if UNHANDLED_CALLS.contains(&item_kind) {
                    return Err(AdapterError::UnsupportedCall {
                        pointer: "/item".to_owned(),
                        kind: item_kind.to_owned(),
                    });
                }
                if item_kind == "function_call" {
                    self.started += 1;
                    if self.started > MAX_STREAM_CALLS {
                        return Err(AdapterError::TooLarge {
                            what: "the number of tool calls",
                        });
                    }
                    let partial = PartialItem {
                        call_id: string(item, "call_id", "/item")?.to_owned(),
                        name: string(item, "name", "/item")?.to_owned(),
                        arguments: opt_string(item, "arguments", "/item")?
                            .unwrap_or_default()
                            .to_owned(),
                        done_arguments: None,
                    };
                    self.count(partial.arguments.len())?;
                    self.items.insert(index, partial);
                }
            }
            "response.function_call_arguments.delta" => {
                let index = output_index(root)?;
                let delta = string(root, "delta", "")?;
                self.count(delta.len())?;
                match self.items.get_mut(&index) {
                    Some(partial) => partial.arguments.push_str(delta),
                    None => self.note_resumed(index)?,
                }
            }
            "response.function_call_arguments.done" => {
                let index = output_index(root)?;
                let arguments = string(root, "arguments", "")?;
                self.count(arguments.len())?;
                match self.items.get_mut(&index) {
                    Some(partial) => partial.done_arguments = Some(arguments.to_owned()),
                    None => self.note_resumed(index)?,
                }
            }
            "response.output_item.done" => {
                let index = output_index(root)?;
                let Some(partial) = self.items.remove(&index) else {
                    self.resumed.remove(&index);
                    return self.unannounced_item(root);
                };
                let item = root.get("item").and_then(Value::as_object);
                let final_arguments = match item {
                    Some(item) => opt_string(item, "arguments", "/item")?.map(str::to_owned),
                    None => None,
                };
                let arguments = final_arguments
                    .or(partial.done_arguments)
                    .unwrap_or(partial.arguments);
                let ctx = context(PROVIDER, RESPONSES, self.response_id.as_deref());
                return Ok(vec![
                    ToolCall::new(partial.call_id, partial.name, RawArguments::Json(arguments))
                        .with_provider(ctx),
                ]);
            }
            // Text deltas, reasoning summaries and event types added later carry no calls.
            _ => {}
        }
        Ok(Vec::new())
    }

    /// Ends the stream: [`AdapterError::Incomplete`] when a function call was never closed.
    pub fn finish(self) -> Result<(), AdapterError> {
        if self.items.is_empty() && self.resumed.is_empty() {
            Ok(())
        } else {
            Err(AdapterError::Incomplete)
        }
    }

    /// Argument events for an item this stream never saw begin (a resumed stream): the item's
    /// `output_item.done` carries it whole, and must come before the response completes.
    fn note_resumed(&mut self, index: u64) -> Result<(), AdapterError> {
        if !self.resumed.contains(&index) && self.resumed.len() >= MAX_STREAM_CALLS {
            return Err(AdapterError::TooLarge {
                what: "the number of tool calls",
            });
        }
        self.resumed.insert(index);
        Ok(())
    }

    /// A `response.output_item.done` without an earlier `output_item.added` (a resumed
    /// stream): a complete `function_call` item is yielded as it stands; an item that needs the
    /// host is refused as in [`parse_response`]; other items carry no call.
    fn unannounced_item(
        &mut self,
        root: &serde_json::Map<String, Value>,
    ) -> Result<Vec<ToolCall>, AdapterError> {
        let item = object(root.get("item").unwrap_or(&Value::Null), "/item")?;
        let kind = string(item, "type", "/item")?;
        if UNHANDLED_CALLS.contains(&kind) {
            return Err(AdapterError::UnsupportedCall {
                pointer: "/item".to_owned(),
                kind: kind.to_owned(),
            });
        }
        if kind != "function_call" {
            return Ok(Vec::new());
        }
        if opt_string(item, "status", "/item")?.is_some_and(|s| s != "completed") {
            return Err(AdapterError::Incomplete);
        }
        self.started += 1;
        if self.started > MAX_STREAM_CALLS {
            return Err(AdapterError::TooLarge {
                what: "the number of tool calls",
            });
        }
        let call_id = string(item, "call_id", "/item")?;
        let name = string(item, "name", "/item")?;
        let arguments = opt_string(item, "arguments", "/item")?.unwrap_or_default();
        self.count(arguments.len())?;
        let ctx = context(PROVIDER, RESPONSES, self.response_id.as_deref());
        Ok(vec![
            ToolCall::new(call_id, name, RawArguments::Json(arguments.to_owned()))
                .with_provider(ctx),
        ])
    }

    fn note_response(&mut self, root: &serde_json::Map<String, Value>) -> Result<(), AdapterError> {
        if let Some(response) = root.get("response").filter(|r| !r.is_null()) {
            let response = object(response, "/response")?;
            if let Some(id) = opt_string(response, "id", "/response")? {
                self.response_id = Some(id.to_owned());
            }
        }
        Ok(())
    }

    fn count(&mut self, added: usize) -> Result<(), AdapterError> {
        self.bytes += added;
        if self.bytes > MAX_STREAM_ARGUMENT_BYTES {
            return Err(AdapterError::TooLarge {
                what: "the argument size bound",
            });
        }
        Ok(())
    }
}

fn output_index(root: &serde_json::Map<String, Value>) -> Result<u64, AdapterError> {
    root.get("output_index")
        .and_then(Value::as_u64)
        .ok_or_else(|| shape("/output_index", "an integer"))
}
