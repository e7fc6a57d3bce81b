//! Anthropic Messages API.
//!
//! Tools are exported as `{name, description, input_schema}`. With
//! [`ExportOptions::anthropic_strict`] the schema is lowered with
//! [`lower_anthropic_strict`](super::lower_anthropic_strict) and `strict` is sent; a tool with no
//! strict form then fails the export unless [`ExportOptions::allow_non_strict`] is set.
//!
//! [`parse_message_text`] and [`MessageStream::push_text`] read the response text strictly: an
//! object that repeats a key (a `tool_use` block's `input` included) or nesting over
//! [`json::MAX_NESTING`] is an [`AdapterError::Json`]. [`parse_message`] and
//! [`MessageStream::push`] take an already parsed [`Value`], in which `serde_json` has kept only
//! the last of repeated keys: they cannot see them. Prefer the text forms where the body is at
//! hand.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::json;
use super::openai::{MAX_STREAM_ARGUMENT_BYTES, MAX_STREAM_CALLS};
use super::read::{array_or_empty, object, opt_string, provider_error, shape, string};
use super::schema::LowerError;
use super::strict::{ANTHROPIC, lower_strict};
use super::{
    AdapterError, ExportError, ExportOptions, ExportReport, Exported, ExportedSet, check_name,
    context, export_all, model_text, plain_schema, schema_error,
};
use toolguard_pipeline::{RawArguments, Status, ToolCall, ToolOutcome, ToolSpec};

/// Provider name in [`ProviderContext`](toolguard_pipeline::ProviderContext).
pub const PROVIDER: &str = "anthropic";
/// API family of the Messages API.
pub const MESSAGES: &str = "messages";

/// `spec` as a Messages API tool: `{name, description, input_schema}` (and `strict` when asked).
pub fn tool(spec: &ToolSpec, options: &ExportOptions) -> Result<Exported, ExportError> {
    check_name(spec)?;
    let mut report = ExportReport {
        tool: spec.name.clone(),
        strict: false,
        not_strict_reason: None,
        lossy: vec![],
    };
    let schema = if options.anthropic_strict {
        match lower_strict(&spec.input_schema, &ANTHROPIC, options.limits) {
            Ok(lowered) => {
                report.strict = true;
                report.lossy = lowered.lossy;
                lowered.schema
            }
            Err(error @ LowerError::NotStrict { .. }) if options.allow_non_strict => {
                report.not_strict_reason = Some(error.to_string());
                let plain = plain_schema(spec, options.limits)?;
                report.lossy = plain.lossy;
                plain.schema
            }
            Err(error) => return Err(schema_error(spec, error)),
        }
    } else {
        let plain = plain_schema(spec, options.limits)?;
        report.lossy = plain.lossy;
        plain.schema
    };
    let mut tool = json!({
        "name": spec.name,
        "description": spec.description,
        "input_schema": schema,
    });
    if options.anthropic_strict {
        tool["strict"] = Value::Bool(report.strict);
    }
    Ok(Exported { tool, report })
}

/// Every spec as Messages API tools (the request's `tools` array).
pub fn tools(specs: &[ToolSpec], options: &ExportOptions) -> Result<ExportedSet, ExportError> {
    export_all(specs, |s| tool(s, options))
}

/// The `tool_use` blocks of a Messages API response; `input` becomes
/// [`RawArguments::Value`].
///
/// Blocks the provider executed itself (`server_tool_use`, `mcp_tool_use`) and text are skipped.
pub fn parse_message(response: &Value) -> Result<Vec<ToolCall>, AdapterError> {
    let root = object(response, "")?;
    if let Some(error) = provider_error(root) {
        return Err(error);
    }
    let ctx = context(PROVIDER, MESSAGES, opt_string(root, "id", "")?);
    let mut calls = Vec::new();
    for (i, block) in array_or_empty(root, "content", "")?.iter().enumerate() {
        let at = format!("/content/{i}");
        let block = object(block, &at)?;
        if string(block, "type", &at)? != "tool_use" {
            continue;
        }
        let id = string(block, "id", &at)?;
        let name = string(block, "name", &at)?;
        let input = block
            .get("input")
            .ok_or_else(|| shape(&format!("{at}/input"), "a value"))?;
        calls.push(
            ToolCall::new(id, name, RawArguments::Value(input.clone())).with_provider(ctx.clone()),
        );
    }
    Ok(calls)
}

/// [`parse_message`] of the response text, read strictly: a repeated key or nesting over
/// [`json::MAX_NESTING`] is an [`AdapterError::Json`].
pub fn parse_message_text(response: &str) -> Result<Vec<ToolCall>, AdapterError> {
    parse_message(&json::parse(response)?)
}

/// The `tool_result` content block answering a call (it goes in the next `user` message):
/// `{"type":"tool_result","tool_use_id","content","is_error"}`.
pub fn tool_result(outcome: &ToolOutcome) -> Value {
    json!({
        "type": "tool_result",
        "tool_use_id": outcome.call_id,
        "content": model_text(outcome),
        "is_error": outcome.status != Status::Ok,
    })
}

/// A content block of a streamed message, tracked from its `content_block_start` to its
/// `content_block_stop`.
#[derive(Debug)]
enum Block {
    /// A client tool call: its input is collected.
    ToolUse {
        id: String,
        name: String,
        start_input: Value,
        json: String,
    },
    /// Anything else: text, thinking, and blocks of tools the provider runs itself
    /// (`server_tool_use`, `mcp_tool_use`, ...), whose `input_json_delta`s are passed over.
    Other,
}

/// Accumulates the events of a streamed Messages API response into complete calls.
///
/// [`push`](Self::push) each parsed event (the JSON of one `data:` line): a `tool_use` call is
/// yielded by the `content_block_stop` that closes it, its arguments being the concatenated
/// `input_json_delta` fragments (kept as JSON text for strict parsing) or, when there were none,
/// the `input` of `content_block_start`.
///
/// Every content block is tracked by its index. Blocks of server-side tools (web search, code
/// execution, the MCP connector) stream their input as `input_json_delta` too: those fragments
/// are counted against the size bound and passed over, and the client calls around them are
/// returned. A delta or stop for an index that has no open block, or a start at an index that is
/// still open, is a [`AdapterError::Shape`] error.
#[derive(Debug, Default)]
pub struct MessageStream {
    response_id: Option<String>,
    blocks: BTreeMap<u64, Block>,
    bytes: usize,
    started: usize,
    stopped: bool,
}

impl MessageStream {
    /// An empty accumulator.
    pub fn new() -> Self {
        MessageStream::default()
    }

    /// [`push`](Self::push) for the text of one `data:` line, read strictly (a repeated key or
    /// deep nesting is refused).
    pub fn push_text(&mut self, event: &str) -> Result<Vec<ToolCall>, AdapterError> {
        self.push(&json::parse(event)?)
    }

    /// Adds one event; returns the call it completes, if any.
    pub fn push(&mut self, event: &Value) -> Result<Vec<ToolCall>, AdapterError> {
        let root = object(event, "")?;
        if let Some(error) = provider_error(root) {
            return Err(error);
        }
        match string(root, "type", "")? {
            "message_start" => {
                let message = object(root.get("message").unwrap_or(&Value::Null), "/message")?;
                self.response_id = opt_string(message, "id", "/message")?.map(str::to_owned);
            }
            "content_block_start" => self.start(root)?,
            "content_block_delta" => self.delta(root)?,
            "content_block_stop" => {
                let index = index_of(root)?;
                match self.blocks.remove(&index) {
                    Some(Block::ToolUse {
                        id,
                        name,
                        start_input,
                        json,
                    }) => {
                        let arguments = if json.is_empty() {
                            RawArguments::Value(start_input)
                        } else {
                            RawArguments::Json(json)
                        };
                        let ctx = context(PROVIDER, MESSAGES, self.response_id.as_deref());
                        return Ok(vec![ToolCall::new(id, name, arguments).with_provider(ctx)]);
                    }
                    Some(Block::Other) => {}
                    None => return Err(shape("/index", "the index of an open content block")),
                }
            }
            "message_stop" => {
                self.stopped = true;
                if self.open_tool_blocks() {
                    return Err(AdapterError::Incomplete);
                }
            }
            // `message_delta`, `ping` and event types added later carry no tool input.
            _ => {}
        }
        Ok(Vec::new())
    }

    fn start(&mut self, root: &serde_json::Map<String, Value>) -> Result<(), AdapterError> {
        let index = index_of(root)?;
        if self.blocks.contains_key(&index) {
            return Err(shape("/index", "the index of a block not already open"));
        }
        let block = object(
            root.get("content_block").unwrap_or(&Value::Null),
            "/content_block",
        )?;
        let block = if string(block, "type", "/content_block")? == "tool_use" {
            self.started += 1;
            if self.started > MAX_STREAM_CALLS {
                return Err(AdapterError::TooLarge {
                    what: "the number of tool calls",
                });
            }
            Block::ToolUse {
                id: string(block, "id", "/content_block")?.to_owned(),
                name: string(block, "name", "/content_block")?.to_owned(),
                start_input: block.get("input").cloned().unwrap_or_else(|| json!({})),
                json: String::new(),
            }
        } else {
            Block::Other
        };
        self.blocks.insert(index, block);
        Ok(())
    }

    fn delta(&mut self, root: &serde_json::Map<String, Value>) -> Result<(), AdapterError> {
        let index = index_of(root)?;
        let delta = object(root.get("delta").unwrap_or(&Value::Null), "/delta")?;
        let Some(block) = self.blocks.get_mut(&index) else {
            return Err(shape("/index", "the index of an open content block"));
        };
        if string(delta, "type", "/delta")? != "input_json_delta" {
            return Ok(());
        }
        let fragment = string(delta, "partial_json", "/delta")?;
        self.bytes += fragment.len();
        if self.bytes > MAX_STREAM_ARGUMENT_BYTES {
            return Err(AdapterError::TooLarge {
                what: "the argument size bound",
            });
        }
        if let Block::ToolUse { json, .. } = block {
            json.push_str(fragment);
        }
        Ok(())
    }

    /// Ends the stream: [`AdapterError::Incomplete`] when a `tool_use` block was never closed.
    pub fn finish(self) -> Result<(), AdapterError> {
        if self.open_tool_blocks() {
            Err(AdapterError::Incomplete)
        } else {
            Ok(())
        }
    }

    /// Whether `message_stop` has arrived.
    pub fn is_finished(&self) -> bool {
        self.stopped
    }

    fn open_tool_blocks(&self) -> bool {
        self.blocks
            .values()
            .any(|b| matches!(b, Block::ToolUse { .. }))
    }
}

fn index_of(root: &serde_json::Map<String, Value>) -> Result<u64, AdapterError> {
    root.get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| shape("/index", "an integer"))
}
