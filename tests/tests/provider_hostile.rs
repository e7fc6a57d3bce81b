//! Hostile and odd provider input, through each adapter and `dispatch`: empty arguments for a
//! tool without parameters, Gemini's failed-call finish reasons, Chat stream deltas without
//! `index`, Responses items that need the host, and repeated keys or deep nesting in response
//! text.

use serde_json::{Value, json};
use toolguard::providers::json::{JsonError, MAX_NESTING};
use toolguard::providers::{AdapterError, anthropic, gemini, openai, restore_empty_arguments};
use toolguard::{Dispatcher, Status, ToolCall, ToolContext, ToolError, tool};
use toolguard_tests::{GetBalance, Ledger, alice};

/// The server's time (a tool without parameters).
#[tool(read_only)]
async fn server_time(ctx: &ToolContext<Ledger>) -> Result<u64, ToolError> {
    ctx.state()
        .runs
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(1_764_000_000)
}

fn dispatcher() -> Dispatcher<Ledger> {
    Dispatcher::builder(Ledger::seeded())
        .tool(ServerTime)
        .tool(GetBalance)
        .build()
        .expect("dispatcher")
}

/// Restores empty arguments against the called tool's schema (as a host does), dispatches.
async fn dispatch(d: &Dispatcher<Ledger>, mut call: ToolCall) -> Status {
    if let Some(spec) = d.spec(&call.tool) {
        restore_empty_arguments(&mut call, &spec.input_schema);
    }
    d.dispatch(call, &alice()).await.status
}

fn chat(name: &str, arguments: Option<&str>) -> Value {
    let mut function = json!({"name": name});
    if let Some(arguments) = arguments {
        function["arguments"] = json!(arguments);
    }
    json!({"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"role": "assistant",
        "tool_calls": [{"id": "call_1", "type": "function", "function": function}]}}]})
}

fn responses(name: &str, arguments: Option<&str>) -> Value {
    let mut item = json!({"type": "function_call", "id": "fc_1", "call_id": "call_1",
        "name": name, "status": "completed"});
    if let Some(arguments) = arguments {
        item["arguments"] = json!(arguments);
    }
    json!({"id": "resp_1", "output": [item]})
}

/// A Chat stream of one call whose argument fragments are `fragments`.
fn chat_stream(name: &str, fragments: &[&str]) -> Vec<ToolCall> {
    let mut stream = openai::ChatStream::new();
    let mut chunks = vec![json!({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "type": "function", "function": {"name": name}}]}}]})];
    for fragment in fragments {
        chunks.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "function": {"arguments": fragment}}]}}]}));
    }
    chunks.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
    let mut calls = Vec::new();
    for chunk in &chunks {
        calls.extend(stream.push(chunk).expect("chunk"));
    }
    calls
}

/// Every shape of "no arguments" the adapters meet, for the tool `name`.
fn empty_argument_calls(name: &str) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    for arguments in [Some(""), Some("   "), Some("\n"), None] {
        calls.extend(openai::parse_chat_completion(&chat(name, arguments)).unwrap());
        calls.extend(openai::parse_response(&responses(name, arguments)).unwrap());
    }
    calls.extend(chat_stream(name, &[]));
    calls.extend(chat_stream(name, &["", " "]));
    let mut null = calls[0].clone();
    null.arguments = toolguard::RawArguments::Value(Value::Null);
    calls.push(null);
    calls
}

#[tokio::test]
async fn empty_arguments_are_an_empty_object_only_for_tools_without_parameters() {
    let d = dispatcher();
    let calls = empty_argument_calls("server_time");
    assert_eq!(calls.len(), 11);
    for call in calls.clone() {
        let shown = format!("{:?}", call.arguments);
        assert_eq!(dispatch(&d, call).await, Status::Ok, "{shown}");
    }
    assert_eq!(d.state().runs(), 11);
    // Without the restoring step, the dispatcher refuses them (it never guesses).
    let raw = d.dispatch(calls[0].clone(), &alice()).await;
    assert_eq!(raw.status, Status::Malformed);

    // A tool with parameters keeps its empty arguments: malformed, nothing runs.
    for call in empty_argument_calls("get_balance") {
        let shown = format!("{:?}", call.arguments);
        assert_eq!(dispatch(&d, call).await, Status::Malformed, "{shown}");
    }
    assert_eq!(d.state().runs(), 11);

    // Non-empty arguments of a parameterless tool are left to validation.
    let extra = openai::parse_chat_completion(&chat("server_time", Some(r#"{"x":1}"#))).unwrap();
    assert_eq!(
        dispatch(&d, extra.into_iter().next().unwrap()).await,
        Status::InvalidArguments
    );
}

#[tokio::test]
async fn gemini_failed_function_calls_are_errors_the_loop_can_act_on() {
    for reason in [
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MISSING_THOUGHT_SIGNATURE",
        "INVALID_FUNCTION_CALL_ARGUMENTS",
    ] {
        let response = json!({"candidates": [{"content": {"role": "model", "parts": []},
            "finishReason": reason, "finishMessage": "Malformed function call: get_balance(acc"}],
            "responseId": "gem-1"});
        assert_eq!(
            gemini::parse_generate_content(&response),
            Err(AdapterError::FailedCall {
                reason: reason.to_owned()
            }),
            "{reason}"
        );
        let error = gemini::GenerateContentStream::new()
            .push_text(&response.to_string())
            .unwrap_err();
        assert!(error.to_string().contains(reason), "{error}");
    }
    // Other finish reasons are not failed calls: no calls, or the calls that came.
    let d = dispatcher();
    for (reason, calls) in [("STOP", 1), ("MAX_TOKENS", 0), ("SAFETY", 0)] {
        let parts = if calls == 1 {
            json!([{"functionCall": {"name": "get_balance", "args": {"account": "acc-alice-1"}}}])
        } else {
            json!([])
        };
        let response = json!({"candidates": [{"content": {"role": "model", "parts": parts},
            "finishReason": reason}]});
        let parsed = gemini::parse_generate_content(&response).expect(reason);
        assert_eq!(parsed.len(), calls, "{reason}");
        for call in parsed {
            assert_eq!(dispatch(&d, call).await, Status::Ok);
        }
    }
}

#[tokio::test]
async fn chat_stream_deltas_without_index_are_accepted() {
    let d = dispatcher();
    let streams: Vec<Vec<Value>> = vec![
        // One call, no index anywhere.
        vec![
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "get_balance", "arguments": ""}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"function": {"arguments": "{\"account\":\"acc-alice-1\"}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ],
        // `index: null`, the whole call in one fragment.
        vec![
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": null, "id": "c2",
                "type": "function", "function": {"name": "get_balance",
                "arguments": "{\"account\":\"acc-alice-2\"}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ],
        // Two calls without index, told apart by their ids.
        vec![
            json!({"choices": [{"delta": {"tool_calls": [{"id": "c3", "type": "function",
                "function": {"name": "server_time", "arguments": "{}"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [{"id": "c4", "type": "function",
                "function": {"name": "get_balance", "arguments": "{\"account\":"}}]}}]}),
            json!({"choices": [{"delta": {"tool_calls": [
                {"function": {"arguments": "\"acc-alice-1\"}"}}]}}]}),
            json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]}),
        ],
    ];
    let mut ids = Vec::new();
    for chunks in streams {
        let mut stream = openai::ChatStream::new();
        for chunk in &chunks {
            for call in stream.push(chunk).expect("accepted") {
                ids.push(call.call_id.clone());
                assert_eq!(dispatch(&d, call).await, Status::Ok);
            }
        }
    }
    assert_eq!(ids, ["c1", "c2", "c3", "c4"]);
}

#[test]
fn responses_items_that_need_the_host_are_refused_like_other_unsupported_items() {
    let approval = json!({"type": "mcp_approval_request", "id": "mcpr_1",
        "server_label": "deepwiki", "name": "ask_question", "arguments": "{}"});
    let function = json!({"type": "function_call", "call_id": "call_1", "name": "server_time",
        "arguments": "{}"});
    for kind in [
        "mcp_approval_request",
        "computer_call",
        "custom_tool_call",
        "shell_call",
    ] {
        let mut item = approval.clone();
        item["type"] = json!(kind);
        let response = json!({"id": "resp_1", "output": [function.clone(), item.clone()]});
        assert!(
            matches!(
                openai::parse_response(&response),
                Err(AdapterError::UnsupportedCall { kind: k, pointer }) if k == kind && pointer == "/output/1"
            ),
            "{kind}"
        );
        let added = json!({"type": "response.output_item.added", "output_index": 0,
            "item": item});
        assert!(
            matches!(
                openai::ResponsesStream::new().push(&added),
                Err(AdapterError::UnsupportedCall { kind: k, .. }) if k == kind
            ),
            "{kind}"
        );
    }
    // Items the provider ran itself are skipped; the function call is read.
    let ran = json!({"id": "resp_2", "output": [
        {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "deepwiki", "tools": []},
        {"type": "mcp_call", "id": "mcp_1", "server_label": "deepwiki", "name": "ask",
            "arguments": "{}", "output": "42"},
        function,
    ]});
    assert_eq!(openai::parse_response(&ran).unwrap().len(), 1);
}

/// `response` with `needle` replaced by `with` (a way to plant a repeated key in valid text).
fn plant(response: &Value, needle: &str, with: &str) -> String {
    let text = response.to_string();
    assert!(text.contains(needle), "{text} lacks {needle}");
    text.replacen(needle, with, 1)
}

#[tokio::test]
async fn repeated_keys_and_deep_nesting_are_refused_on_every_adapter_that_reads_text() {
    let d = dispatcher();
    let chat_ok = chat("get_balance", Some(r#"{"account":"acc-alice-1"}"#));
    let responses_ok = responses("get_balance", Some(r#"{"account":"acc-alice-1"}"#));
    let anthropic_ok = json!({"id": "msg_1", "type": "message", "role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_1", "name": "get_balance",
         "input": {"account": "acc-alice-1"}}]});
    let gemini_ok = json!({"candidates": [{"content": {"parts": [{"functionCall": {
        "name": "get_balance", "args": {"account": "acc-alice-1"}}}]}}]});
    type Parse = fn(&str) -> Result<Vec<ToolCall>, AdapterError>;
    let adapters: [(&str, Value, Parse); 4] = [
        ("openai chat", chat_ok, openai::parse_chat_completion_text),
        (
            "openai responses",
            responses_ok,
            openai::parse_response_text,
        ),
        ("anthropic", anthropic_ok, anthropic::parse_message_text),
        ("gemini", gemini_ok, gemini::parse_generate_content_text),
    ];
    for (name, response, parse) in adapters {
        // The clean text dispatches.
        let calls = parse(&response.to_string()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(calls.len(), 1, "{name}");
        for call in calls {
            assert_eq!(dispatch(&d, call).await, Status::Ok, "{name}");
        }
        // A key repeated at the top, in the call, and (where arguments are JSON, not text) in
        // the arguments: refused before anything is dispatched.
        let first = response.as_object().unwrap().keys().next().unwrap().clone();
        let mut planted = vec![
            plant(&response, "{", &format!(r#"{{"{first}":null,"#)),
            plant(&response, r#""name":"#, r#""name":"server_time","name":"#),
        ];
        if name == "anthropic" || name == "gemini" {
            planted.push(plant(
                &response,
                r#""account":"#,
                r#""account":"acc-bob-1","account":"#,
            ));
        }
        for text in &planted {
            let error = parse(text).expect_err(text);
            assert!(
                matches!(&error, AdapterError::Json(JsonError::DuplicateKey(_))),
                "{name}: {error}"
            );
            assert!(error.to_string().contains("repeats the key"), "{error}");
        }
        // Nesting over the bound, a little and a lot.
        for levels in [MAX_NESTING + 1, 100_000] {
            let deep = plant(
                &response,
                "{",
                &format!(r#"{{"pad":{}0{},"#, "[".repeat(levels), "]".repeat(levels)),
            );
            assert_eq!(
                parse(&deep),
                Err(AdapterError::Json(JsonError::TooDeep)),
                "{name}"
            );
        }
        // Not JSON at all.
        assert!(matches!(
            parse("{\"id\": "),
            Err(AdapterError::Json(JsonError::Syntax(_)))
        ));
    }
    assert_eq!(d.state().runs(), 4, "only the clean responses ran");

    // The streams' text readers refuse repeated keys the same way.
    let chunk = r#"{"choices":[{"index":0,"index":1,"delta":{}}]}"#;
    assert!(matches!(
        openai::ChatStream::new().push_text(chunk),
        Err(AdapterError::Json(JsonError::DuplicateKey(_)))
    ));
    let event = r#"{"type":"response.output_item.added","output_index":0,"output_index":1}"#;
    assert!(matches!(
        openai::ResponsesStream::new().push_text(event),
        Err(AdapterError::Json(JsonError::DuplicateKey(_)))
    ));
    let event = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"get_balance","input":{"account":"a","account":"b"}}}"#;
    assert!(matches!(
        anthropic::MessageStream::new().push_text(event),
        Err(AdapterError::Json(JsonError::DuplicateKey(_)))
    ));
    let chunk = r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"get_balance","args":{"account":"a","account":"b"}}}]}}]}"#;
    assert!(matches!(
        gemini::GenerateContentStream::new().push_text(chunk),
        Err(AdapterError::Json(JsonError::DuplicateKey(_)))
    ));
}
