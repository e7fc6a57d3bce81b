//! Provider adapters over real response bodies: fixtures parse into the expected calls, streams
//! accumulate into the same calls, malformed envelopes give typed errors (never a panic), and
//! outcomes turn into each provider's result message (pinned in `tests/golden/results.json`).

mod provider_specs;

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use toolguard::providers::{
    AdapterError, anthropic, gemini, model_payload, openai, restore_call_nulls, status_text,
};
use toolguard::{
    ApprovalTicket, ArgumentError, BoxFuture, Principal, RawArguments, Status, Tool, ToolCall,
    ToolContext, ToolError, ToolOutcome, ToolSpec, UntrustedOutput,
};

fn fixture(name: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/providers")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("fixture is JSON")
}

fn summary(calls: &[ToolCall]) -> Vec<(String, String, RawArguments)> {
    calls
        .iter()
        .map(|c| (c.call_id.clone(), c.tool.clone(), c.arguments.clone()))
        .collect()
}

fn json_args(s: &str) -> RawArguments {
    RawArguments::Json(s.to_owned())
}

#[test]
fn openai_chat_parallel_calls() {
    let calls = openai::parse_chat_completion(&fixture("openai_chat_parallel.json")).unwrap();
    assert_eq!(
        summary(&calls),
        vec![
            (
                "call_12345xyz".into(),
                "get_balance".into(),
                json_args(r#"{"account":"ACC001"}"#)
            ),
            (
                "call_67890abc".into(),
                "search_documents".into(),
                json_args(
                    r#"{"query":"invoices 2026","order":null,"filter":{"tags":["finance"],"max_age_days":null},"limit":null,"include_archived":null}"#
                )
            ),
            ("call_empty0001".into(), "get_balance".into(), json_args("")),
            (
                "call_badjson01".into(),
                "get_balance".into(),
                json_args(r#"{"account": "ACC001""#)
            ),
            (
                "call_unknown01".into(),
                "delete_everything".into(),
                json_args("{}")
            ),
        ]
    );
    let ctx = calls[0].provider.as_ref().unwrap();
    assert_eq!(ctx.provider, "openai");
    assert_eq!(ctx.api_family, "chat_completions");
    assert_eq!(ctx.adapter_revision, toolguard::providers::ADAPTER_REVISION);
    assert_eq!(
        ctx.response_id.as_deref(),
        Some("chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG")
    );
    assert!(
        openai::parse_chat_completion(&fixture("openai_chat_text.json"))
            .unwrap()
            .is_empty()
    );
}

#[test]
fn strict_nulls_are_mapped_back_before_validation() {
    let calls = openai::parse_chat_completion(&fixture("openai_chat_parallel.json")).unwrap();
    let spec = provider_specs::spec("search_documents");
    let mut call = calls[1].clone();
    assert!(restore_call_nulls(&mut call, &spec.input_schema).unwrap());
    let RawArguments::Value(args) = &call.arguments else {
        panic!("parsed")
    };
    assert_eq!(
        args,
        &json!({"query": "invoices 2026", "order": null,
            "filter": {"tags": ["finance"], "max_age_days": null}, "limit": null})
    );
    // `include_archived` is optional and not nullable: its `null` meant "absent" and is gone.
    // The `Option` fields accept `null` in the canonical schema and keep it.
    let validator = jsonschema::validator_for(&spec.input_schema).unwrap();
    assert!(validator.is_valid(args));
    // Without the mapping, the canonical schema refuses the nulls.
    let raw: Value = serde_json::from_str(match &calls[1].arguments {
        RawArguments::Json(s) => s,
        RawArguments::Value(_) => unreachable!(),
    })
    .unwrap();
    assert!(!validator.is_valid(&raw));
}

#[test]
fn openai_responses_function_calls() {
    let calls = openai::parse_response(&fixture("openai_responses.json")).unwrap();
    assert_eq!(
        summary(&calls),
        vec![
            (
                "call_12345xyz".into(),
                "transfer_funds".into(),
                json_args(
                    r#"{"from_account":"ACC001","to_account":"ACC002","amount":2500,"currency":"EUR","memo":null}"#
                )
            ),
            ("call_67890abc".into(), "get_balance".into(), json_args("")),
        ]
    );
    let ctx = calls[0].provider.as_ref().unwrap();
    assert_eq!(
        (ctx.provider.as_str(), ctx.api_family.as_str()),
        ("openai", "responses")
    );
    assert_eq!(
        ctx.response_id.as_deref(),
        Some("resp_67ccd2bed1ec8190b14f964abc0542670bb6a6b452d3795b")
    );
}

#[test]
fn anthropic_tool_use_blocks() {
    let calls = anthropic::parse_message(&fixture("anthropic_message.json")).unwrap();
    assert_eq!(
        summary(&calls),
        vec![
            (
                "toolu_01A09q90qw90lq917835lq9".into(),
                "get_balance".into(),
                RawArguments::Value(json!({"account": "ACC001"}))
            ),
            (
                "toolu_01B19q90qw90lq917835lq8".into(),
                "transfer_funds".into(),
                RawArguments::Value(json!({"from_account": "ACC001", "to_account": "ACC002",
                    "amount": 800000, "currency": "USD"}))
            ),
            (
                "toolu_01C29q90qw90lq917835lq7".into(),
                "unknown_tool_name".into(),
                RawArguments::Value(json!({}))
            ),
        ]
    );
    let ctx = calls[0].provider.as_ref().unwrap();
    assert_eq!(
        (ctx.provider.as_str(), ctx.api_family.as_str()),
        ("anthropic", "messages")
    );
    assert_eq!(ctx.response_id.as_deref(), Some("msg_01Aq9w938a90dw8q"));
}

#[test]
fn gemini_function_calls_get_stable_ids() {
    let response = fixture("gemini_response.json");
    let calls = gemini::parse_generate_content(&response).unwrap();
    assert_eq!(
        summary(&calls),
        vec![
            (
                "gemini-0".into(),
                "get_balance".into(),
                RawArguments::Value(json!({"account": "ACC001"}))
            ),
            (
                "fc-8f1c2a".into(),
                "search_documents".into(),
                RawArguments::Value(json!({"query": "travel policy", "limit": 5}))
            ),
            (
                "gemini-2".into(),
                "get_balance".into(),
                RawArguments::Value(json!({}))
            ),
        ]
    );
    assert_eq!(
        calls,
        gemini::parse_generate_content(&response).unwrap(),
        "stable"
    );
    let ctx = calls[0].provider.as_ref().unwrap();
    assert_eq!(
        (ctx.provider.as_str(), ctx.api_family.as_str()),
        ("gemini", "generate_content")
    );
    assert_eq!(ctx.response_id.as_deref(), Some("Mq2RaN3hJr2vz7IP8c3iyAo"));
    assert!(gemini::is_synthetic_call_id("gemini-0"));
    assert!(!gemini::is_synthetic_call_id("fc-8f1c2a"));
}

#[test]
fn gemini_stream_ids_count_across_chunks() {
    let chunk = |name: &str| {
        json!({"candidates": [{"content": {"role": "model", "parts": [{"functionCall": {"name": name, "args": {}}}]}, "index": 0}],
            "responseId": "r-1"})
    };
    let mut stream = gemini::GenerateContentStream::new();
    let first = stream.push(&chunk("get_balance")).unwrap();
    let second = stream.push(&chunk("search_documents")).unwrap();
    assert_eq!(first[0].call_id, "gemini-0");
    assert_eq!(second[0].call_id, "gemini-1");
}

#[test]
fn openai_stream_accumulates_fragments() {
    let mut stream = openai::ChatStream::new();
    let mut calls = Vec::new();
    for chunk in fixture("openai_chat_stream.json").as_array().unwrap() {
        calls.extend(stream.push(chunk).unwrap());
    }
    assert!(stream.is_finished());
    assert!(stream.finish().unwrap().is_empty());
    assert_eq!(
        summary(&calls),
        vec![
            (
                "call_s1".into(),
                "get_balance".into(),
                json_args(r#"{"account":"ACC001"}"#)
            ),
            (
                "call_s2".into(),
                "search_documents".into(),
                json_args(r#"{"query":"q","order":"newest","filter":null,"limit":3}"#)
            ),
        ]
    );
    assert_eq!(
        calls[0].provider.as_ref().unwrap().response_id.as_deref(),
        Some("chatcmpl-stream1")
    );
}

#[test]
fn openai_responses_stream_yields_calls_at_item_done() {
    let mut stream = openai::ResponsesStream::new();
    let mut yielded_at = Vec::new();
    let mut calls = Vec::new();
    let events = fixture("openai_responses_stream.json");
    for (i, event) in events.as_array().unwrap().iter().enumerate() {
        let done = stream.push(event).unwrap();
        if !done.is_empty() {
            yielded_at.push(i);
        }
        calls.extend(done);
    }
    assert!(stream.is_finished());
    stream.finish().unwrap();
    assert_eq!(yielded_at, vec![6, 9]);
    assert_eq!(
        summary(&calls),
        vec![
            (
                "call_r1".into(),
                "get_balance".into(),
                json_args(r#"{"account":"ACC001"}"#)
            ),
            ("call_r2".into(), "get_balance".into(), json_args("")),
        ]
    );
    let ctx = calls[0].provider.as_ref().unwrap();
    assert_eq!(
        (ctx.api_family.as_str(), ctx.response_id.as_deref()),
        ("responses", Some("resp_stream_68a1"))
    );

    let mut cut = openai::ResponsesStream::new();
    for event in &events.as_array().unwrap()[..4] {
        cut.push(event).unwrap();
    }
    assert_eq!(cut.finish(), Err(AdapterError::Incomplete));
}

#[test]
fn openai_stream_cut_short_is_incomplete() {
    let chunks = fixture("openai_chat_stream.json");
    let mut stream = openai::ChatStream::new();
    for chunk in &chunks.as_array().unwrap()[..3] {
        assert!(stream.push(chunk).unwrap().is_empty());
    }
    assert_eq!(stream.finish(), Err(AdapterError::Incomplete));
}

#[test]
fn anthropic_stream_yields_calls_at_block_stop() {
    let mut stream = anthropic::MessageStream::new();
    let mut yielded_at = Vec::new();
    let mut calls = Vec::new();
    for (i, event) in fixture("anthropic_stream.json")
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let done = stream.push(event).unwrap();
        if !done.is_empty() {
            yielded_at.push(i);
        }
        calls.extend(done);
    }
    assert!(stream.is_finished());
    stream.finish().unwrap();
    assert_eq!(yielded_at, vec![9, 11]);
    assert_eq!(
        summary(&calls),
        vec![
            (
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                "get_balance".into(),
                json_args(r#"{"account": "ACC001"}"#)
            ),
            (
                "toolu_01T1x1fJ34qAmk2tNTrN7Up7".into(),
                "get_balance".into(),
                RawArguments::Value(json!({}))
            ),
        ]
    );
    assert_eq!(
        calls[0].provider.as_ref().unwrap().response_id.as_deref(),
        Some("msg_014p7gG3wDgGV9EUtLvnow3U")
    );
}

#[test]
fn anthropic_stream_cut_short_is_incomplete() {
    let events = fixture("anthropic_stream.json");
    let mut stream = anthropic::MessageStream::new();
    for event in &events.as_array().unwrap()[..8] {
        stream.push(event).unwrap();
    }
    assert_eq!(stream.finish(), Err(AdapterError::Incomplete));
    let error =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    assert_eq!(
        anthropic::MessageStream::new().push(&error),
        Err(AdapterError::Provider {
            kind: "overloaded_error".into()
        })
    );
}

#[test]
fn malformed_envelopes_are_typed_errors() {
    let shape = |r: Result<Vec<ToolCall>, AdapterError>| {
        assert!(matches!(r, Err(AdapterError::Shape { .. })), "{r:?}");
    };
    shape(openai::parse_chat_completion(&json!([])));
    shape(openai::parse_chat_completion(&json!({"choices": {}})));
    shape(openai::parse_chat_completion(
        &json!({"choices": [{"message": {"tool_calls": [{"type": "function"}]}}]}),
    ));
    shape(openai::parse_chat_completion(
        &json!({"choices": [{"message": {"tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "t", "arguments": {"a": 1}}}]}}]}),
    ));
    shape(openai::parse_chat_completion(
        &json!({"choices": [{"message": {"tool_calls": [
        {"id": 7, "function": {"name": "t", "arguments": ""}}]}}]}),
    ));
    assert!(matches!(
        openai::parse_chat_completion(&json!({"choices": [{"message": {"tool_calls": [
            {"id": "c", "type": "custom", "custom": {"name": "t", "input": ""}}]}}]})),
        Err(AdapterError::UnsupportedCall { .. })
    ));
    assert!(matches!(
        openai::parse_chat_completion(&json!({"choices": [{"message": {
            "function_call": {"name": "t", "arguments": "{}"}}}]})),
        Err(AdapterError::UnsupportedCall { .. })
    ));
    assert!(matches!(
        openai::parse_chat_completion(
            &json!({"error": {"type": "invalid_request_error", "message": "x"}})
        ),
        Err(AdapterError::Provider { .. })
    ));
    shape(openai::parse_response(
        &json!({"output": [{"type": "function_call", "name": "t"}]}),
    ));
    shape(openai::parse_response(&json!({"output": "x"})));
    shape(anthropic::parse_message(
        &json!({"content": [{"type": "tool_use", "id": "x", "name": "t"}]}),
    ));
    shape(anthropic::parse_message(&json!({"content": [{"id": "x"}]})));
    shape(gemini::parse_generate_content(
        &json!({"candidates": [{"content": {"parts": [{"functionCall": {}}]}}]}),
    ));
    shape(gemini::parse_generate_content(&json!({"candidates": [7]})));
    assert!(matches!(
        gemini::parse_generate_content(
            &json!({"error": {"code": 400, "message": "m", "status": "INVALID_ARGUMENT"}})
        ),
        Err(AdapterError::Provider { .. })
    ));
    // A fragment without `index` is accepted (one call per choice), but a call that never got
    // an id or a name is refused when the choice finishes.
    let mut stream = openai::ChatStream::new();
    assert_eq!(
        stream.push(&json!({"choices": [{"delta": {"tool_calls": [{"function": {}}]}}]})),
        Ok(vec![])
    );
    shape(stream.push(&json!({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})));
    let mut stream = openai::ChatStream::new();
    shape(stream.push(&json!({"choices": [{"delta": {"tool_calls": [{"index": "0"}]}}]})));
    let mut stream = anthropic::MessageStream::new();
    assert!(stream
        .push(&json!({"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{"}}))
        .is_err());
}

/// Replaces the node at the `n`-th position (in walk order) by `replacement`.
fn mutate(value: &mut Value, n: &mut usize, replacement: &Value) -> bool {
    if *n == 0 {
        *value = replacement.clone();
        return true;
    }
    *n -= 1;
    match value {
        Value::Array(items) => items.iter_mut().any(|v| mutate(v, n, replacement)),
        Value::Object(map) => map.values_mut().any(|v| mutate(v, n, replacement)),
        _ => false,
    }
}

#[test]
fn mutated_fixtures_never_panic() {
    let replacements = [
        json!(null),
        json!(7),
        json!("x"),
        json!([]),
        json!({}),
        json!([{}]),
        json!(-1),
    ];
    type Parse = fn(&Value) -> Result<Vec<ToolCall>, AdapterError>;
    let parsers: [(&str, Parse); 4] = [
        ("openai_chat_parallel.json", openai::parse_chat_completion),
        ("openai_responses.json", openai::parse_response),
        ("anthropic_message.json", anthropic::parse_message),
        ("gemini_response.json", gemini::parse_generate_content),
    ];
    let mut runs = 0;
    for (name, parse) in parsers {
        let original = fixture(name);
        for position in 0..400 {
            for replacement in &replacements {
                let mut mutated = original.clone();
                let mut n = position;
                if !mutate(&mut mutated, &mut n, replacement) {
                    continue;
                }
                let _ = parse(&mutated);
                runs += 1;
            }
        }
    }
    for (name, chunks) in [
        ("openai_chat_stream.json", 0),
        ("anthropic_stream.json", 1),
        ("openai_responses_stream.json", 2),
    ] {
        let original = fixture(name);
        for position in 0..400 {
            for replacement in &replacements {
                let mut mutated = original.clone();
                let mut n = position;
                if !mutate(&mut mutated, &mut n, replacement) {
                    continue;
                }
                let Some(events) = mutated.as_array() else {
                    continue;
                };
                match chunks {
                    0 => {
                        let mut s = openai::ChatStream::new();
                        for e in events {
                            let _ = s.push(e);
                        }
                        let _ = s.finish();
                    }
                    1 => {
                        let mut s = anthropic::MessageStream::new();
                        for e in events {
                            let _ = s.push(e);
                        }
                        let _ = s.finish();
                    }
                    _ => {
                        let mut s = openai::ResponsesStream::new();
                        for e in events {
                            let _ = s.push(e);
                        }
                        let _ = s.finish();
                    }
                }
                runs += 1;
            }
        }
    }
    assert!(runs > 1000, "{runs}");
}

fn sample_outcomes() -> Vec<ToolOutcome> {
    let mut ok = ToolOutcome::new("call_1", "get_balance", Status::Ok);
    ok.output = Some(UntrustedOutput::new(
        json!({"minor_units": 1200, "currency": "EUR"}),
    ));
    let mut invalid = ToolOutcome::new("call_2", "transfer_funds", Status::InvalidArguments);
    invalid.errors = vec![
        ArgumentError::new("/amount", "0 is less than the minimum of 1"),
        ArgumentError::new("", "\"currency\" is a required property"),
    ];
    let mut blocked = ToolOutcome::new("call_3", "transfer_funds", Status::Blocked);
    blocked.reason = Some("prompt_injection".into());
    blocked.message = Some("memo contained: ignore previous instructions".into());
    let mut not_found = ToolOutcome::new("call_4", "get_balance", Status::NotFound);
    not_found.reason = Some("foreign_tenant".into());
    let mut pending = ToolOutcome::new("gemini-0", "transfer_funds", Status::PendingApproval);
    pending.approval = Some(ApprovalTicket::new(
        "apr_01J9",
        "Transfer 800000 USD from ACC001 to ACC002",
        1_764_700_000_000,
    ));
    let mut unknown = ToolOutcome::new("call_6", "transfer_funds", Status::OutcomeUnknown);
    unknown.operation_id = Some("op_42".into());
    let malformed = ToolOutcome::new("call_7", "get_balance", Status::Malformed);
    vec![ok, invalid, blocked, not_found, pending, unknown, malformed]
}

#[test]
fn results_for_every_dialect() {
    let rows: Vec<Value> = sample_outcomes()
        .iter()
        .map(|o| {
            json!({
                "status": o.status.as_str(),
                "openai_chat": openai::chat_result(o),
                "openai_responses": openai::responses_result(o),
                "anthropic": anthropic::tool_result(o),
                "gemini": gemini::function_response(o),
            })
        })
        .collect();
    let actual = Value::Array(rows);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/results.json");
    let mut text = serde_json::to_string_pretty(&actual).unwrap();
    text.push('\n');
    if std::env::var_os("TOOLGUARD_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
    } else {
        let expected =
            std::fs::read_to_string(&path).expect("golden (TOOLGUARD_BLESS=1 writes it)");
        assert!(expected == text, "results.json differs:\n{text}");
    }
}

#[test]
fn explanations_reveal_nothing() {
    for outcome in sample_outcomes() {
        let text = model_payload(&outcome).to_string();
        assert!(!text.contains("ignore previous"), "{text}");
        assert!(!text.contains("foreign"), "{text}");
        assert!(
            !text.contains("preview") && !text.contains("ACC001"),
            "{text}"
        );
    }
    assert!(!status_text(Status::NotFound).contains("exist"));
    assert!(status_text(Status::PendingApproval).contains("human"));
    let pending = &sample_outcomes()[4];
    assert_eq!(model_payload(pending)["approval_id"], "apr_01J9");
    let anthropic = anthropic::tool_result(pending);
    assert_eq!(anthropic["is_error"], true);
    let gemini = gemini::function_response(pending);
    assert!(
        gemini["functionResponse"].get("id").is_none(),
        "synthetic ids are not sent back"
    );
}

// --- A real dispatch between parse and answer -------------------------------------------------

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BalanceArgs {
    #[schemars(length(min = 3, max = 34))]
    account: String,
}

#[derive(Serialize, JsonSchema)]
struct Balance {
    minor_units: i64,
}

struct GetBalance;

impl Tool<()> for GetBalance {
    type Args = BalanceArgs;
    type Output = Balance;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            "get_balance",
            "Balance of an account.",
            toolguard::__private::schema_for::<BalanceArgs>(),
            toolguard::__private::schema_for::<Balance>(),
        );
        spec.read_only = true;
        spec
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext<()>,
        args: BalanceArgs,
    ) -> BoxFuture<'a, Result<Balance, ToolError>> {
        Box::pin(async move {
            if args.account == "ACC001" {
                Ok(Balance { minor_units: 1200 })
            } else {
                Err(ToolError::not_found())
            }
        })
    }
}

#[tokio::test]
async fn parse_dispatch_answer() {
    let dispatcher = toolguard::dispatcher::Dispatcher::builder(())
        .tool(GetBalance)
        .build()
        .unwrap();
    let principal = Principal::new("tenant-a", "alice", "session-1");
    let calls = openai::parse_chat_completion(&fixture("openai_chat_parallel.json")).unwrap();
    let mut statuses = Vec::new();
    for call in calls {
        let outcome = dispatcher.dispatch(call, &principal).await;
        let message = openai::chat_result(&outcome);
        assert_eq!(message["tool_call_id"], outcome.call_id.as_str());
        let content: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
        assert_eq!(content["status"], outcome.status.as_str());
        statuses.push(outcome.status);
    }
    assert_eq!(
        statuses,
        vec![
            Status::Ok,
            Status::UnknownTool,
            Status::Malformed,
            Status::Malformed,
            Status::UnknownTool
        ]
    );
}

/// The `GetBalance` dispatcher of [`parse_dispatch_answer`].
fn balance_dispatcher() -> toolguard::dispatcher::Dispatcher<()> {
    toolguard::dispatcher::Dispatcher::builder(())
        .tool(GetBalance)
        .build()
        .unwrap()
}

#[tokio::test]
async fn every_fixture_goes_parse_dispatch_answer() {
    let dispatcher = balance_dispatcher();
    let principal = Principal::new("tenant-a", "alice", "session-1");

    // OpenAI Chat Completions (parallel calls): `tool_call_id` is the call's id.
    let calls = openai::parse_chat_completion(&fixture("openai_chat_parallel.json")).unwrap();
    assert!(!calls.is_empty());
    for call in calls {
        let id = call.call_id.clone();
        let outcome = dispatcher.dispatch(call, &principal).await;
        let answer = openai::chat_result(&outcome);
        assert_eq!(answer["tool_call_id"], id.as_str());
        assert_eq!(answer["role"], "tool");
    }

    // OpenAI Responses: `call_id` of a `function_call_output`.
    let calls = openai::parse_response(&fixture("openai_responses.json")).unwrap();
    assert_eq!(calls.len(), 2);
    for call in calls {
        let id = call.call_id.clone();
        let outcome = dispatcher.dispatch(call, &principal).await;
        let answer = openai::responses_result(&outcome);
        assert_eq!(answer["call_id"], id.as_str());
        assert_eq!(answer["type"], "function_call_output");
        let body: Value = serde_json::from_str(answer["output"].as_str().unwrap()).unwrap();
        assert_eq!(body["status"], outcome.status.as_str());
    }

    // Anthropic Messages: `tool_use_id` of a `tool_result`.
    let calls = anthropic::parse_message(&fixture("anthropic_message.json")).unwrap();
    let mut statuses = Vec::new();
    for call in calls {
        let id = call.call_id.clone();
        let outcome = dispatcher.dispatch(call, &principal).await;
        let answer = anthropic::tool_result(&outcome);
        assert_eq!(answer["tool_use_id"], id.as_str());
        assert_eq!(answer["type"], "tool_result");
        assert_eq!(answer["is_error"], outcome.status != Status::Ok);
        statuses.push(outcome.status);
    }
    assert_eq!(
        statuses,
        vec![Status::Ok, Status::UnknownTool, Status::UnknownTool]
    );

    // Gemini: the function's name, and its id unless the adapter made it up.
    let calls = gemini::parse_generate_content(&fixture("gemini_response.json")).unwrap();
    let mut statuses = Vec::new();
    for call in calls {
        let (id, name) = (call.call_id.clone(), call.tool.clone());
        let outcome = dispatcher.dispatch(call, &principal).await;
        let answer = gemini::function_response(&outcome);
        assert_eq!(answer["functionResponse"]["name"], name.as_str());
        if gemini::is_synthetic_call_id(&id) {
            assert!(answer["functionResponse"].get("id").is_none(), "{answer}");
        } else {
            assert_eq!(answer["functionResponse"]["id"], id.as_str());
        }
        statuses.push(outcome.status);
    }
    assert_eq!(
        statuses,
        vec![Status::Ok, Status::UnknownTool, Status::InvalidArguments]
    );
}

#[test]
fn approval_binding_changes_with_response_id_and_adapter_revision() {
    use toolguard::ProviderContext;
    use toolguard::approvals::binding_digest;
    use toolguard::store::{ApprovalRequest, ApprovalState};
    let call = openai::parse_response(&fixture("openai_responses.json"))
        .unwrap()
        .remove(0);
    let provider = call
        .provider
        .clone()
        .expect("the adapter fills the context");
    let request = |provider: ProviderContext| ApprovalRequest {
        id: "apr_1".into(),
        version: 1,
        state: ApprovalState::Pending,
        requester: Principal::new("tenant-a", "alice", "session-1"),
        tool: call.tool.clone(),
        call_id: call.call_id.clone(),
        operation_id: "op_1".into(),
        idempotency: None,
        provider: Some(provider),
        request_digest: "d".repeat(64),
        binding_digest: String::new(),
        arguments: json!({}),
        preview: String::new(),
        eligible_roles: vec!["approver".into()],
        approvals_required: 1,
        decisions: Vec::new(),
        tool_revision: 1,
        policy_revision: 1,
        amount: None,
        cause: "amount".into(),
        cause_message: None,
        created_at_ms: 0,
        expires_at_ms: 1,
        seal: None,
        provenance: Vec::new(),
        origins: Vec::new(),
    };
    let base = binding_digest(&request(provider.clone()), None);
    assert_eq!(base, binding_digest(&request(provider.clone()), None));

    let mut other_response = provider.clone();
    other_response.response_id = Some("resp_other".into());
    assert_ne!(base, binding_digest(&request(other_response), None));
    let mut no_response = provider.clone();
    no_response.response_id = None;
    assert_ne!(base, binding_digest(&request(no_response), None));

    let mut other_revision = provider.clone();
    other_revision.adapter_revision = format!("{}+1", provider.adapter_revision);
    assert_ne!(base, binding_digest(&request(other_revision), None));
    assert_eq!(
        provider.adapter_revision,
        toolguard::providers::ADAPTER_REVISION
    );
}

#[test]
fn holds_and_policy_denials_tell_the_model_the_policy_reason_only() {
    let why = "the amount 1500.50 USD is over the approval threshold of 1000.00 USD";
    for status in [Status::PendingApproval, Status::PolicyDenied] {
        let mut outcome = ToolOutcome::new("call_x", "send_money", status);
        outcome.message = Some(why.into());
        outcome.reason = Some("approval_over".into());
        let payload = model_payload(&outcome);
        assert_eq!(payload["reason"], "approval_over", "{payload}");
        assert_eq!(payload["why"], why, "{payload}");
        assert_eq!(payload["message"], status_text(status), "{payload}");
        // A reason the risk policy does not own (a host hook's) is not told, nor its message.
        outcome.reason = Some("internal_check".into());
        let payload = model_payload(&outcome);
        assert!(
            payload.get("reason").is_none() && payload.get("why").is_none(),
            "{payload}"
        );
    }
    // Other statuses never carry it.
    let mut outcome = ToolOutcome::new("call_x", "send_money", Status::Failed);
    outcome.message = Some(why.into());
    outcome.reason = Some("approval_over".into());
    assert!(model_payload(&outcome).get("why").is_none());
}

#[test]
fn every_status_explanation_is_pinned_and_echoes_nothing() {
    const MESSAGE: &str = "internal detail: row 42 of tenant globex";
    const REASON: &str = "secret_reason_code";
    let rows: Vec<Value> = Status::ALL
        .iter()
        .map(|status| {
            let mut outcome = ToolOutcome::new("call_x", "get_balance", *status);
            outcome.message = Some(MESSAGE.into());
            outcome.reason = Some(REASON.into());
            let payload = model_payload(&outcome);
            let text = payload.to_string();
            assert!(
                !text.contains("row 42") && !text.contains("globex"),
                "{text}"
            );
            // Only `malformed` and `blocked` carry a reason code; no other status repeats it.
            let reason_allowed = matches!(status, Status::Malformed | Status::Blocked);
            assert_eq!(text.contains(REASON), reason_allowed, "{text}");
            if *status != Status::Ok {
                assert_eq!(payload["message"], status_text(*status), "{text}");
            }
            json!({"status": status.as_str(), "payload": payload})
        })
        .collect();
    let actual = Value::Array(rows);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden/explanations.json");
    let mut text = serde_json::to_string_pretty(&actual).unwrap();
    text.push('\n');
    if std::env::var_os("TOOLGUARD_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).unwrap();
    } else {
        let expected =
            std::fs::read_to_string(&path).expect("golden (TOOLGUARD_BLESS=1 writes it)");
        assert!(expected == text, "explanations.json differs:\n{text}");
    }
}
