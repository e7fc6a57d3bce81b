//! Streams that used to lose or merge calls, from event sequences derived from the providers'
//! streaming documentation: Anthropic messages with server-side tool blocks (web search, code
//! execution, the MCP connector), resumed Responses streams, Chat streams that reuse an `index`
//! or omit it, and Gemini chunks reporting a failed function call.
//!
//! Each sequence is checked two ways: as SSE text cut into two pieces at every byte boundary
//! (reassembled by a minimal SSE framer and read with the strict `push_text`), and with the
//! client call's argument text cut into two fragments at every character boundary. Every cut
//! must give exactly the same calls.

use serde_json::{Value, json};
use toolguard::providers::{AdapterError, anthropic, gemini, openai};
use toolguard::{RawArguments, ToolCall};

/// Argument text with multi-byte characters, so that cuts fall inside and between them.
const ARGS: &str = r#"{"account": "ACC001", "note": "café ✓ 東京"}"#;

/// The SSE text of `events` (`event:` lines where the provider sends them, then `data:`).
fn sse(events: &[Value], named: bool, done: bool) -> String {
    let mut text = String::new();
    for event in events {
        if named && let Some(kind) = event["type"].as_str() {
            text.push_str(&format!("event: {kind}\n"));
        }
        text.push_str(&format!("data: {event}\n\n"));
    }
    if done {
        text.push_str("data: [DONE]\n\n");
    }
    text
}

/// A minimal SSE framer: bytes in, the `data` of each complete event out (`[DONE]` skipped).
#[derive(Default)]
struct Framer {
    buffer: Vec<u8>,
}

impl Framer {
    fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buffer.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let event = String::from_utf8(event).expect("an event is UTF-8 once complete");
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect();
            if !data.is_empty() && data != ["[DONE]"] {
                out.push(data.join("\n"));
            }
        }
        out
    }
}

/// `(call id, tool, arguments)` of each call.
fn summary(calls: &[ToolCall]) -> Vec<(String, String, RawArguments)> {
    calls
        .iter()
        .map(|c| (c.call_id.clone(), c.tool.clone(), c.arguments.clone()))
        .collect()
}

/// Feeds `text` cut at every byte boundary into a fresh reader; every cut must give `expected`.
fn every_byte_cut(
    text: &str,
    expected: &Result<Vec<ToolCall>, AdapterError>,
    read: impl Fn(&[String]) -> Result<Vec<ToolCall>, AdapterError>,
) {
    let bytes = text.as_bytes();
    for cut in 0..=bytes.len() {
        let mut framer = Framer::default();
        let mut events = framer.feed(&bytes[..cut]);
        events.extend(framer.feed(&bytes[cut..]));
        let got = read(&events);
        match (&got, expected) {
            (Ok(got), Ok(want)) => assert_eq!(summary(got), summary(want), "cut at byte {cut}"),
            _ => assert_eq!(&got, expected, "cut at byte {cut}"),
        }
    }
}

/// The two-fragment splits of `ARGS` at every character boundary.
fn argument_cuts() -> impl Iterator<Item = (&'static str, &'static str)> {
    (0..=ARGS.len())
        .filter(|&i| ARGS.is_char_boundary(i))
        .map(|i| ARGS.split_at(i))
}

// ---------------------------------------------------------------------------------------------
// Anthropic: server-side tool blocks stream `input_json_delta` too.

/// A message that searches the web, runs code and calls an MCP connector tool (all server-side),
/// then calls the client tool `get_balance` with `fragments` as its input deltas.
fn anthropic_events(fragments: &[&str]) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "message_start", "message": {"id": "msg_01SrvTools", "type": "message",
            "role": "assistant", "model": "claude-sonnet-4-5", "content": [],
            "stop_reason": null, "usage": {"input_tokens": 2679, "output_tokens": 3}}}),
        json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": "Let me check."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {
            "type": "server_tool_use", "id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
            "name": "web_search", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"EUR"}}),
        json!({"type": "content_block_delta", "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": " rates today\"}"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {
            "type": "web_search_tool_result", "tool_use_id": "srvtoolu_014hJH82Qum7Td6UV8gDXThB",
            "content": [{"type": "web_search_result", "title": "Rates", "url": "https://example.com/rates",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y"}]}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "content_block_start", "index": 3, "content_block": {
            "type": "server_tool_use", "id": "srvtoolu_01CodeExec", "name": "code_execution",
            "input": {}}}),
        json!({"type": "content_block_delta", "index": 3,
            "delta": {"type": "input_json_delta", "partial_json": "{\"code\": \"print(1)\"}"}}),
        json!({"type": "content_block_stop", "index": 3}),
        json!({"type": "content_block_start", "index": 4, "content_block": {
            "type": "mcp_tool_use", "id": "mcptoolu_01Echo", "name": "echo",
            "server_name": "example-mcp", "input": {}}}),
        json!({"type": "content_block_delta", "index": 4,
            "delta": {"type": "input_json_delta", "partial_json": "{\"text\": \"hi\"}"}}),
        json!({"type": "content_block_stop", "index": 4}),
        json!({"type": "content_block_start", "index": 5, "content_block": {
            "type": "mcp_tool_result", "tool_use_id": "mcptoolu_01Echo", "is_error": false,
            "content": [{"type": "text", "text": "hi"}]}}),
        json!({"type": "content_block_stop", "index": 5}),
        json!({"type": "content_block_start", "index": 6, "content_block": {
            "type": "tool_use", "id": "toolu_01Client", "name": "get_balance", "input": {}}}),
    ];
    for fragment in fragments {
        events.push(json!({"type": "content_block_delta", "index": 6,
            "delta": {"type": "input_json_delta", "partial_json": fragment}}));
    }
    events.extend([
        json!({"type": "content_block_stop", "index": 6}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 89}}),
        json!({"type": "message_stop"}),
    ]);
    events
}

fn anthropic_read(events: &[String]) -> Result<Vec<ToolCall>, AdapterError> {
    let mut stream = anthropic::MessageStream::new();
    let mut calls = Vec::new();
    for event in events {
        calls.extend(stream.push_text(event)?);
    }
    assert!(stream.is_finished());
    stream.finish()?;
    Ok(calls)
}

#[test]
fn anthropic_server_side_blocks_are_passed_over_and_the_client_call_returned() {
    let expected = vec![(
        "toolu_01Client".to_owned(),
        "get_balance".to_owned(),
        RawArguments::Json(ARGS.to_owned()),
    )];
    let events = anthropic_events(&[ARGS]);
    let calls = anthropic_read(&events.iter().map(Value::to_string).collect::<Vec<_>>())
        .expect("the stream reads");
    assert_eq!(summary(&calls), expected);
    assert_eq!(
        calls[0].provider.as_ref().unwrap().response_id.as_deref(),
        Some("msg_01SrvTools")
    );
    every_byte_cut(&sse(&events, true, false), &Ok(calls), anthropic_read);
    for (a, b) in argument_cuts() {
        let events: Vec<String> = anthropic_events(&[a, b])
            .iter()
            .map(Value::to_string)
            .collect();
        assert_eq!(
            summary(&anthropic_read(&events).unwrap()),
            expected,
            "{a:?}|{b:?}"
        );
    }
}

#[test]
fn anthropic_blocks_are_tracked_by_index() {
    let run = |events: &[Value]| {
        let mut stream = anthropic::MessageStream::new();
        events.iter().try_for_each(|e| stream.push(e).map(drop))
    };
    let start = json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}});
    let delta = |index: u64| {
        json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "input_json_delta", "partial_json": "{}"}})
    };
    // A delta for a block never started, a stop for a block never started, a start at an index
    // still open: refused, never guessed.
    for events in [
        vec![delta(0)],
        vec![start.clone(), delta(1)],
        vec![json!({"type": "content_block_stop", "index": 2})],
        vec![start.clone(), start.clone()],
    ] {
        assert!(
            matches!(run(&events), Err(AdapterError::Shape { .. })),
            "{events:?}"
        );
    }
    // A stopped block's index cannot take more input.
    let stopped = vec![
        start.clone(),
        json!({"type": "content_block_stop", "index": 0}),
        delta(0),
    ];
    assert!(matches!(run(&stopped), Err(AdapterError::Shape { .. })));
    // Server-side input counts against the size bound.
    let huge = "x".repeat(openai::MAX_STREAM_ARGUMENT_BYTES + 1);
    let too_large = vec![
        start,
        json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": huge}}),
    ];
    assert!(matches!(
        run(&too_large),
        Err(AdapterError::TooLarge { .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// OpenAI Responses: a resumed background stream.

/// A background response resumed (`starting_after`) in the middle of its second item: item 0
/// arrives only as its `output_item.done`, item 1's last argument events and its done follow,
/// then item 2 streams normally with `fragments` as its argument deltas.
fn responses_events(fragments: &[&str]) -> Vec<Value> {
    let item = |id: &str, call: &str, args: &str| {
        json!({"id": id, "type": "function_call", "status": "completed", "call_id": call,
            "name": "get_balance", "arguments": args})
    };
    let mut events = vec![
        json!({"type": "response.output_item.done", "sequence_number": 9, "output_index": 0,
            "item": item("fc_1", "call_resumed_1", r#"{"account":"ACC001"}"#)}),
        json!({"type": "response.function_call_arguments.delta", "sequence_number": 14,
            "item_id": "fc_2", "output_index": 1, "delta": "002\"}"}),
        json!({"type": "response.function_call_arguments.done", "sequence_number": 15,
            "item_id": "fc_2", "output_index": 1, "arguments": r#"{"account":"ACC002"}"#}),
        json!({"type": "response.output_item.done", "sequence_number": 16, "output_index": 1,
            "item": item("fc_2", "call_resumed_2", r#"{"account":"ACC002"}"#)}),
        json!({"type": "response.output_item.added", "sequence_number": 17, "output_index": 2,
            "item": {"id": "fc_3", "type": "function_call", "status": "in_progress",
                "call_id": "call_3", "name": "get_balance", "arguments": ""}}),
    ];
    for fragment in fragments {
        events.push(json!({"type": "response.function_call_arguments.delta",
            "item_id": "fc_3", "output_index": 2, "delta": fragment}));
    }
    events.extend([
        json!({"type": "response.function_call_arguments.done", "item_id": "fc_3",
            "output_index": 2, "arguments": ARGS}),
        json!({"type": "response.output_item.done", "output_index": 2,
            "item": item("fc_3", "call_3", ARGS)}),
        json!({"type": "response.completed", "response": {"id": "resp_bg_01", "status": "completed"}}),
    ]);
    events
}

fn responses_read(events: &[String]) -> Result<Vec<ToolCall>, AdapterError> {
    let mut stream = openai::ResponsesStream::new();
    let mut calls = Vec::new();
    for event in events {
        calls.extend(stream.push_text(event)?);
    }
    assert!(stream.is_finished());
    stream.finish()?;
    Ok(calls)
}

#[test]
fn resumed_responses_stream_yields_calls_it_never_saw_begin() {
    let expected = vec![
        (
            "call_resumed_1".to_owned(),
            "get_balance".to_owned(),
            RawArguments::Json(r#"{"account":"ACC001"}"#.to_owned()),
        ),
        (
            "call_resumed_2".to_owned(),
            "get_balance".to_owned(),
            RawArguments::Json(r#"{"account":"ACC002"}"#.to_owned()),
        ),
        (
            "call_3".to_owned(),
            "get_balance".to_owned(),
            RawArguments::Json(ARGS.to_owned()),
        ),
    ];
    let events = responses_events(&[ARGS]);
    let texts: Vec<String> = events.iter().map(Value::to_string).collect();
    let calls = responses_read(&texts).expect("the stream reads");
    assert_eq!(summary(&calls), expected);
    every_byte_cut(&sse(&events, true, false), &Ok(calls), responses_read);
    for (a, b) in argument_cuts() {
        let texts: Vec<String> = responses_events(&[a, b])
            .iter()
            .map(Value::to_string)
            .collect();
        assert_eq!(
            summary(&responses_read(&texts).unwrap()),
            expected,
            "{a:?}|{b:?}"
        );
    }
}

#[test]
fn resumed_items_are_never_dropped_silently() {
    let read = |events: &[Value]| {
        let texts: Vec<String> = events.iter().map(Value::to_string).collect();
        let mut stream = openai::ResponsesStream::new();
        let mut calls = Vec::new();
        for text in &texts {
            calls.extend(stream.push_text(text)?);
        }
        stream.finish().map(|()| calls)
    };
    let delta = json!({"type": "response.function_call_arguments.delta", "output_index": 4,
        "item_id": "fc_9", "delta": "{}"});
    let completed = json!({"type": "response.completed", "response": {"id": "resp_1"}});
    // Argument events whose item never closes: incomplete, at completion or at the end.
    assert_eq!(
        read(&[delta.clone(), completed]),
        Err(AdapterError::Incomplete)
    );
    assert_eq!(
        read(std::slice::from_ref(&delta)),
        Err(AdapterError::Incomplete)
    );
    // An unannounced item that is not complete is not a call yet.
    let partial = json!({"type": "response.output_item.done", "output_index": 0, "item": {
        "type": "function_call", "status": "incomplete", "call_id": "c", "name": "t",
        "arguments": "{\"a\":"}});
    assert_eq!(read(&[partial]), Err(AdapterError::Incomplete));
    // Unannounced items that need the host are refused like announced ones.
    for kind in ["mcp_approval_request", "computer_call", "custom_tool_call"] {
        let done = json!({"type": "response.output_item.done", "output_index": 0,
            "item": {"type": kind, "id": "x", "call_id": "c", "name": "n"}});
        assert!(
            matches!(read(&[done]), Err(AdapterError::UnsupportedCall { kind: k, .. }) if k == kind),
            "{kind}"
        );
    }
    // Items without calls stay quiet.
    let message = json!({"type": "response.output_item.done", "output_index": 0,
        "item": {"type": "message", "id": "m", "content": []}});
    assert_eq!(read(&[message]), Ok(vec![]));
}

// ---------------------------------------------------------------------------------------------
// OpenAI Chat Completions: a reused index, and no index at all.

fn chat_chunk(tool_calls: Value) -> Value {
    json!({"id": "chatcmpl-reuse", "object": "chat.completion.chunk", "created": 1764000000,
        "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {"tool_calls": tool_calls},
        "finish_reason": null}]})
}

fn chat_finish() -> Value {
    json!({"id": "chatcmpl-reuse", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
}

/// Two calls sent at `index: 0` with different ids (as some compatible back ends do), the
/// second's arguments in `fragments`. With `indexed: false` no fragment carries an index.
fn chat_events(fragments: &[&str], indexed: bool) -> Vec<Value> {
    let at = |mut call: Value| {
        if indexed {
            call["index"] = json!(0);
        }
        json!([call])
    };
    let mut events = vec![
        chat_chunk(at(json!({"id": "call_a", "type": "function",
            "function": {"name": "get_balance", "arguments": ""}}))),
        chat_chunk(at(json!({"function": {"arguments": "{\"account\":"}}))),
        chat_chunk(at(json!({"function": {"arguments": "\"ACC001\"}"}}))),
        chat_chunk(at(json!({"id": "call_b", "type": "function",
            "function": {"name": "get_balance", "arguments": ""}}))),
    ];
    for fragment in fragments {
        events.push(chat_chunk(at(json!({"function": {"arguments": fragment}}))));
    }
    events.push(chat_finish());
    events
}

fn chat_read(events: &[String]) -> Result<Vec<ToolCall>, AdapterError> {
    let mut stream = openai::ChatStream::new();
    let mut calls = Vec::new();
    for event in events {
        calls.extend(stream.push_text(event)?);
    }
    assert!(stream.is_finished());
    calls.extend(stream.finish()?);
    Ok(calls)
}

#[test]
fn chat_calls_sharing_an_index_or_lacking_one_are_kept_apart_by_id() {
    let expected = vec![
        (
            "call_a".to_owned(),
            "get_balance".to_owned(),
            RawArguments::Json(r#"{"account":"ACC001"}"#.to_owned()),
        ),
        (
            "call_b".to_owned(),
            "get_balance".to_owned(),
            RawArguments::Json(ARGS.to_owned()),
        ),
    ];
    for indexed in [true, false] {
        let events = chat_events(&[ARGS], indexed);
        let texts: Vec<String> = events.iter().map(Value::to_string).collect();
        let calls = chat_read(&texts).expect("the stream reads");
        assert_eq!(summary(&calls), expected, "indexed: {indexed}");
        every_byte_cut(&sse(&events, false, true), &Ok(calls), chat_read);
        for (a, b) in argument_cuts() {
            let texts: Vec<String> = chat_events(&[a, b], indexed)
                .iter()
                .map(Value::to_string)
                .collect();
            assert_eq!(
                summary(&chat_read(&texts).unwrap()),
                expected,
                "{a:?}|{b:?}"
            );
        }
    }
}

#[test]
fn chat_fragments_repeating_their_id_continue_their_call() {
    // Some back ends repeat the id (and name) in every fragment of one call.
    let events: Vec<String> = [
        chat_chunk(json!([{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "get_balance", "arguments": "{\"account\":"}}])),
        chat_chunk(json!([{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "get_balance", "arguments": "\"ACC001\"}"}}])),
        chat_chunk(json!([{"id": "call_a", "function": {"arguments": ""}}])),
        chat_finish(),
    ]
    .iter()
    .map(Value::to_string)
    .collect();
    let calls = chat_read(&events).unwrap();
    assert_eq!(
        summary(&calls),
        vec![(
            "call_a".to_owned(),
            "get_balance".to_owned(),
            RawArguments::Json(r#"{"account":"ACC001"}"#.to_owned())
        )]
    );
}

// ---------------------------------------------------------------------------------------------
// Gemini: a chunk that reports a failed function call.

#[test]
fn gemini_stream_surfaces_a_failed_function_call() {
    let events = vec![
        json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {
            "name": "get_balance", "args": {"account": "ACC001"}}}]}, "index": 0}],
            "responseId": "gem-1"}),
        json!({"candidates": [{"content": {"role": "model", "parts": []},
            "finishReason": "MALFORMED_FUNCTION_CALL",
            "finishMessage": "Malformed function call: print(default_api.get_balance(", "index": 0}],
            "responseId": "gem-1"}),
    ];
    let read = |texts: &[String]| {
        let mut stream = gemini::GenerateContentStream::new();
        let mut calls = Vec::new();
        for text in texts {
            calls.extend(stream.push_text(text)?);
        }
        Ok(calls)
    };
    let expected = Err(AdapterError::FailedCall {
        reason: "MALFORMED_FUNCTION_CALL".to_owned(),
    });
    let texts: Vec<String> = events.iter().map(Value::to_string).collect();
    assert_eq!(read(&texts), expected);
    every_byte_cut(&sse(&events, false, false), &expected, read);
}
