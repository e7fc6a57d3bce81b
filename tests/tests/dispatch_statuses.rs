//! Every status the pipeline can produce before idempotency and approval come into play: each
//! test asserts the status, whether the handler ran, and the terminal audit entry.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolguard::audit::AuditEntry;
use toolguard::audit::Stage;
use toolguard::{
    Dispatcher, MemoryAuditSink, Principal, RoleAuthorizer, Status, ToolCall, ToolOutcome,
};
use toolguard_tests::*;

struct Harness {
    dispatcher: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
}

fn harness() -> Harness {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let dispatcher = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(GetBalance)
        .tool(EchoNote)
        .tool(Flaky)
        .tool(SlowReport)
        .tool(SlowPayout)
        .tool(PanickyPreflight)
        .tool(PanickyAuthorize)
        .tool(SaveToken)
        .host_keys(toolguard::HostKeys::ephemeral())
        .audit(audit.clone())
        .authorizer(RoleAuthorizer::new().require("flaky", ["operator", "tester"]))
        .build()
        .expect("dispatcher builds");
    Harness {
        dispatcher,
        ledger,
        audit,
    }
}

impl Harness {
    async fn call(&self, tool: &str, args: impl Into<toolguard::RawArguments>) -> ToolOutcome {
        self.call_as(tool, args, &alice().with_role("tester")).await
    }

    async fn call_as(
        &self,
        tool: &str,
        args: impl Into<toolguard::RawArguments>,
        who: &Principal,
    ) -> ToolOutcome {
        let before = self.audit.len();
        let out = self
            .dispatcher
            .dispatch(ToolCall::new("call-1", tool, args), who)
            .await;
        assert_eq!(
            self.audit.len(),
            before + 1,
            "every call writes exactly one audit entry ({out:?})"
        );
        out
    }

    /// The terminal entry of `outcome`, checked to be the last one written.
    fn entry(&self, outcome: &ToolOutcome) -> AuditEntry {
        let seq = outcome.audit_seq.expect("every outcome has an audit entry");
        let entries = self.audit.entries();
        assert_eq!(
            entries.last().map(|e| e.seq),
            Some(seq),
            "exactly one entry per call"
        );
        self.audit.get(seq).unwrap()
    }
}

fn transfer(amount: u64, key: &str) -> serde_json::Value {
    json!({
        "from_account": "acc-alice-1",
        "to_account": "acc-alice-2",
        "amount": amount,
        "currency": "USD",
        "idempotency_key": key,
    })
}

#[tokio::test]
async fn ok_executes_and_audits_the_sanitized_arguments() {
    let h = harness();
    let out = h
        .call("transfer_funds", transfer(2_500, "key-ok-0001"))
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert_eq!(out.data().unwrap()["balance"], 100_000_000 - 2_500);
    assert_eq!(out.output.as_ref().unwrap().trust, "untrusted");
    assert!(out.operation_id.as_deref().unwrap().starts_with("op_"));
    assert_eq!(h.ledger.transfers(), 1);
    assert_eq!(h.ledger.balance("acc-alice-2"), 2_500);
    let e = h.entry(&out);
    assert_eq!(e.record.status, Some(Status::Ok));
    assert_eq!(e.record.stage, Stage::Envelope);
    assert_eq!(
        (e.record.tenant.as_str(), e.record.subject.as_str()),
        ("acme", "alice")
    );
    assert_eq!(e.record.session, "sess-alice");
    assert_eq!(e.record.tool, "transfer_funds");
    assert_eq!(e.record.call_id, "call-1");
    assert_eq!(e.record.idempotency_key.as_deref(), Some("key-ok-0001"));
    assert_eq!(e.record.operation_id, out.operation_id);
    // Keyed under the host key: `<key id>:<64 hex digits>`.
    let digest = e.record.request_digest.as_deref().unwrap();
    let hex = digest.strip_prefix("ephemeral:").expect("a keyed digest");
    assert_eq!(hex.len(), 64, "{digest}");
    assert_eq!(e.record.arguments.as_ref().unwrap()["amount"], 2_500);
}

#[tokio::test]
async fn sync_low_risk_tool_runs() {
    let h = harness();
    let out = h
        .call("echo_note", r#"{"note": "O'Brien; hi", "times": 2}"#)
        .await;
    assert_eq!(out.status, Status::Ok);
    assert_eq!(out.data().unwrap(), "O'Brien; hiO'Brien; hi");
    assert_eq!(h.ledger.runs(), 1);
    assert!(
        out.operation_id.is_some(),
        "a tool that is not read-only gets an operation id"
    );
}

async fn assert_malformed(h: &Harness, args: impl Into<toolguard::RawArguments>, reason: &str) {
    let out = h.call("echo_note", args).await;
    assert_eq!(out.status, Status::Malformed);
    assert_eq!(out.reason.as_deref(), Some(reason));
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Parse);
    assert_eq!(e.record.status, Some(Status::Malformed));
    assert!(e.record.arguments.is_none(), "no raw payload in the audit");
}

#[tokio::test]
async fn malformed_arguments_never_reach_the_handler() {
    let h = harness();
    assert_malformed(&h, r#"{"note": "a", "note": "b"}"#, "duplicate_key").await;
    assert_malformed(&h, r#"["note"]"#, "not_an_object").await;
    assert_malformed(&h, json!("note"), "not_an_object").await;
    assert_malformed(&h, r#"{"note": "a""#, "invalid_json").await;
    assert_malformed(&h, "", "empty").await;
    assert_malformed(&h, r#"{"note": "a"} {"note": "b"}"#, "trailing_data").await;
    assert_eq!(h.ledger.runs(), 0);
}

#[tokio::test]
async fn unknown_tool_is_refused_without_echoing_the_name() {
    let h = harness();
    let out = h.call("transfer_funds_now<script>", "{}").await;
    assert_eq!(out.status, Status::UnknownTool);
    assert!(!out.message.as_deref().unwrap().contains("script"));
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Registry);
    assert_eq!(e.record.status, Some(Status::UnknownTool));
    assert_eq!(h.ledger.runs(), 0, "no handler ran");
    assert_eq!(h.ledger.transfers(), 0, "no handler ran");
}

async fn assert_invalid(h: &Harness, args: serde_json::Value, pointer: &str) {
    let out = h.call("transfer_funds", args).await;
    assert_eq!(out.status, Status::InvalidArguments, "{out:?}");
    assert!(
        out.errors.iter().any(|e| e.pointer == pointer),
        "expected an error at {pointer:?}, got {:?}",
        out.errors
    );
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Validate);
    assert_eq!(e.record.status, Some(Status::InvalidArguments));
}

#[tokio::test]
async fn invalid_arguments_are_reported_with_pointers() {
    let h = harness();
    let mut missing = transfer(100, "key-inv-0001");
    missing.as_object_mut().unwrap().remove("to_account");
    assert_invalid(&h, missing, "").await;

    let mut wrong_type = transfer(100, "key-inv-0002");
    wrong_type["amount"] = json!("100");
    assert_invalid(&h, wrong_type, "/amount").await;

    let mut unknown = transfer(100, "key-inv-0003");
    unknown["tenant"] = json!("globex");
    assert_invalid(&h, unknown, "").await;

    assert_invalid(&h, transfer(0, "key-inv-0004"), "/amount").await;
    assert_invalid(&h, transfer(100_000_001, "key-inv-0005"), "/amount").await;

    let mut bad_enum = transfer(100, "key-inv-0006");
    bad_enum["currency"] = json!("BTC");
    assert_invalid(&h, bad_enum, "/currency").await;

    assert_invalid(&h, transfer(100, "short"), "/idempotency_key").await;

    let mut too_long = transfer(100, "key-inv-0007");
    too_long["memo"] = json!("x".repeat(141));
    assert_invalid(&h, too_long, "/memo").await;

    let out = h.call("echo_note", json!({"note": "hi", "times": 4})).await;
    assert_eq!(out.status, Status::InvalidArguments);
    assert_eq!(out.errors[0].pointer, "/times");

    assert_eq!(h.ledger.transfers(), 0);
    assert_eq!(h.ledger.runs(), 0);
}

#[tokio::test]
async fn pattern_mismatch_is_invalid() {
    let h = harness();
    // The key's pattern is ^[A-Za-z0-9_-]{8,128}$.
    assert_invalid(&h, transfer(100, "key with spaces"), "/idempotency_key").await;
    assert_eq!(h.ledger.transfers(), 0);
}

#[tokio::test]
async fn precondition_failed_stops_before_execution() {
    let h = harness();
    let mut args = transfer(100, "key-pre-0001");
    args["from_account"] = json!("acc-alice-2"); // balance 0
    let out = h.call("transfer_funds", args).await;
    assert_eq!(out.status, Status::PreconditionFailed);
    assert_eq!(h.ledger.transfers(), 0);
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Preflight);
}

#[tokio::test]
async fn forbidden_when_the_principal_lacks_the_role_or_is_stale() {
    let h = harness();
    let out = h.call_as("flaky", "{}", &alice()).await;
    assert_eq!(out.status, Status::Forbidden);
    assert_eq!(h.ledger.runs(), 0);
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Permit);
    assert_eq!(e.record.reason.as_deref(), Some("missing_role"));

    let stale = alice().authenticated_at(SystemTime::now() - Duration::from_secs(13 * 3600));
    let out = h
        .call_as("get_balance", json!({"account": "acc-alice-1"}), &stale)
        .await;
    assert_eq!(out.status, Status::Forbidden);
    assert_eq!(
        h.entry(&out).record.reason.as_deref(),
        Some("stale_principal")
    );
    assert_eq!(h.ledger.runs(), 0);
}

#[tokio::test]
async fn missing_and_foreign_resources_look_the_same_outside() {
    let h = harness();
    let missing = h
        .call("get_balance", json!({"account": "acc-nobody"}))
        .await;
    let same_tenant = h.call("get_balance", json!({"account": "acc-bob-1"})).await;
    let other_tenant = h
        .call("get_balance", json!({"account": "acc-carol-1"}))
        .await;
    for out in [&missing, &same_tenant, &other_tenant] {
        assert_eq!(out.status, Status::NotFound);
        assert_eq!(out.reason, None);
        assert_eq!(out.message, missing.message);
    }
    assert_eq!(
        h.audit
            .get(missing.audit_seq.unwrap())
            .unwrap()
            .record
            .reason
            .as_deref(),
        Some("missing")
    );
    assert_eq!(
        h.audit
            .get(same_tenant.audit_seq.unwrap())
            .unwrap()
            .record
            .reason
            .as_deref(),
        Some("foreign_subject")
    );
    assert_eq!(
        h.audit
            .get(other_tenant.audit_seq.unwrap())
            .unwrap()
            .record
            .reason
            .as_deref(),
        Some("foreign_tenant")
    );

    // The transfer tool checks ownership in its authorize hook: nothing moves.
    let mut args = transfer(100, "key-nf-00001");
    args["from_account"] = json!("acc-carol-1");
    let runs_before = h.ledger.runs();
    let out = h.call("transfer_funds", args).await;
    assert_eq!(h.ledger.runs(), runs_before, "no handler ran");
    assert_eq!(out.status, Status::NotFound);
    assert_eq!(h.entry(&out).record.stage, Stage::Authorize);
    assert_eq!(
        h.entry(&out).record.reason.as_deref(),
        Some("foreign_tenant")
    );
    assert_eq!(h.ledger.balance("acc-carol-1"), 500_000);
    assert_eq!(h.ledger.transfers(), 0);
}

#[tokio::test]
async fn handler_error_is_failed() {
    let h = harness();
    let out = h.call("flaky", "{}").await;
    assert_eq!(out.status, Status::Failed);
    assert_eq!(out.message.as_deref(), Some("downstream said no"));
    assert_eq!(h.ledger.runs(), 1);
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Execute);
    assert_eq!(e.record.reason.as_deref(), Some("handler_error"));
}

#[tokio::test]
async fn deadline_is_failed_for_read_only_and_outcome_unknown_otherwise() {
    let h = harness();
    let out = h.call("slow_report", "{}").await;
    assert_eq!(out.status, Status::Failed);
    assert_eq!(out.reason.as_deref(), Some("deadline_exceeded"));
    assert_eq!(h.ledger.runs(), 1);

    let out = h
        .call(
            "slow_payout",
            json!({"cents": 5, "delay_ms": 2_000, "idempotency_key": "key-slow-0001"}),
        )
        .await;
    assert_eq!(out.status, Status::OutcomeUnknown);
    assert!(out.operation_id.is_some(), "a status reference to query");
    assert_eq!(h.ledger.runs(), 2);
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Execute);
    assert_eq!(e.record.status, Some(Status::OutcomeUnknown));
}

#[tokio::test]
async fn tampering_with_one_entry_is_detected_at_that_entry() {
    let h = harness();
    for i in 0..6 {
        h.call("echo_note", json!({"note": format!("n{i}")})).await;
    }
    h.audit.verify().expect("untouched chain verifies");
    h.audit.with_storage(|entries| {
        entries[3].record.arguments = Some(std::sync::Arc::new(json!({"note": "forged"})));
    });
    let seq = h.audit.entries()[3].seq;
    let broken = h.audit.verify().unwrap_err();
    assert_eq!(broken.seq(), seq);

    // Removing an entry breaks the link at its successor.
    let h = harness();
    for i in 0..4 {
        h.call("echo_note", json!({"note": format!("n{i}")})).await;
    }
    h.audit.with_storage(|entries| {
        entries.remove(1);
    });
    assert_eq!(h.audit.verify().unwrap_err().seq(), 3);

    // Removing the oldest entries is detected too: the chain is anchored at entry 1.
    let h = harness();
    for i in 0..4 {
        h.call("echo_note", json!({"note": format!("n{i}")})).await;
    }
    h.audit.with_storage(|entries| {
        entries.drain(..2);
    });
    assert_eq!(h.audit.verify().unwrap_err().seq(), 3);
    let h = harness();
    h.call("echo_note", json!({"note": "only"})).await;
    h.audit.with_storage(|entries| entries.clear());
    h.audit
        .verify()
        .expect("an empty trail has nothing to break");
}

/// The error `build` gives for a dispatcher holding `tool` alone.
fn refused(tool: impl toolguard::Tool<Ledger>) -> toolguard::BuildError {
    Dispatcher::builder(Ledger::seeded())
        .tool(tool)
        .build()
        .expect_err("the builder refuses the tool")
}

#[tokio::test]
async fn registry_refuses_duplicates_and_unsafe_declarations() {
    let err = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .tool(EchoNote)
        .build()
        .err()
        .unwrap();
    assert_eq!(
        err,
        toolguard::BuildError::DuplicateTool("echo_note".into())
    );

    let mut bad_schema = SpecTool::new("bad_schema", json!({"type": "string"}), json!("x"));
    bad_schema.spec.input_schema = json!({"type": 12});
    let err = refused(bad_schema);
    assert!(
        matches!(
            &err,
            toolguard::BuildError::InvalidSchema { tool, which: "input", .. } if tool == "bad_schema"
        ),
        "{err:?}"
    );
    // The schema compiler's error is kept as the source, and the message names where it failed.
    let source = std::error::Error::source(&err).expect("the compiler's error is the source");
    assert!(source.to_string().contains("/type"), "{source}");
    assert!(err.to_string().contains("bad_schema"), "{err}");

    let bad_output = SpecTool::new("bad_output", json!({"type": 12}), json!("x"));
    let err = refused(bad_output);
    assert!(
        matches!(
            &err,
            toolguard::BuildError::InvalidSchema {
                which: "output",
                ..
            }
        ),
        "{err:?}"
    );

    let mut unsafe_tool = SpecTool::new("unsafe_payout", json!({"type": "string"}), json!("x"));
    unsafe_tool.spec.risk = toolguard::Risk::High;
    let err = refused(unsafe_tool);
    assert!(
        matches!(&err, toolguard::BuildError::UnsafeDeclaration { tool, .. } if tool == "unsafe_payout"),
        "{err:?}"
    );

    // Branches that multiply level after level: checking `{"xs": []}` would never end.
    let nested = multiplying_schema("xs", 16, 20);
    for (input, output, which) in [
        (nested.clone(), json!({}), "input"),
        (json!({"type": "object"}), nested, "output"),
    ] {
        let mut tool = SpecTool::new("nested", output, json!({}));
        tool.spec.input_schema = input;
        let err = refused(tool);
        let toolguard::BuildError::UnsafeDeclaration { tool, message } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(tool, "nested");
        assert!(
            message.contains(&format!("its {which} schema")),
            "{message}"
        );
        assert!(message.contains("flatten the schema"), "{message}");
    }
}

#[tokio::test]
async fn panicking_hooks_are_contained() {
    let h = harness();
    for (tool, stage) in [
        ("panicky_preflight", Stage::Preflight),
        ("panicky_authorize", Stage::Authorize),
    ] {
        let out = h.call(tool, json!({"label": "x"})).await;
        assert_eq!(out.status, Status::Failed, "{out:?}");
        assert_eq!(out.reason.as_deref(), Some("panicked"));
        let e = h.entry(&out);
        assert_eq!(e.record.status, Some(Status::Failed));
        assert_eq!(e.record.stage, stage);
        assert_eq!(e.record.tool, tool);
    }
    assert_eq!(h.ledger.runs(), 0, "no handler ran");
    let ok = h.call("echo_note", json!({"note": "still here"})).await;
    assert_eq!(ok.status, Status::Ok);
    h.audit.verify().unwrap();
}

#[tokio::test]
async fn a_value_stripped_to_nothing_is_invalid() {
    let h = harness();
    let out = h
        .call("echo_note", json!({"note": "\u{200B}\u{200B}\u{2060}"}))
        .await;
    assert_eq!(out.status, Status::InvalidArguments, "{out:?}");
    assert_eq!(out.reason.as_deref(), Some("schema_after_sanitize"));
    assert!(out.errors.iter().any(|e| e.pointer == "/note"), "{out:?}");
    assert_eq!(h.ledger.runs(), 0);
    let e = h.entry(&out);
    assert_eq!(e.record.stage, Stage::Sanitize);
    assert_eq!(e.record.status, Some(Status::InvalidArguments));
}

#[tokio::test]
async fn sensitive_values_never_reach_the_audit_trail() {
    let h = harness();
    let secret = "sk-live-0123456789abcdef";
    let out = h
        .call("save_token", json!({"service": "mailer", "token": secret}))
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert_eq!(h.ledger.runs(), 1);
    let e = h.entry(&out);
    let args = e.record.arguments.as_ref().unwrap();
    assert_eq!(args["token"], toolguard::audit::REDACTED);
    assert_eq!(args["service"], "mailer");
    for entry in h.audit.entries() {
        let text = serde_json::to_string(&entry).unwrap();
        assert!(!text.contains(secret), "{text}");
    }
    // The audited digest is keyed: the plain digest of the request (which anyone could
    // recompute from a guessed token) appears nowhere.
    let digest = e.record.request_digest.clone().expect("a request digest");
    assert!(digest.starts_with("ephemeral:"), "{digest}");
    let plain = toolguard::digest::request_digest(
        "save_token",
        toolguard::Tool::<Ledger>::spec(&SaveToken).revision,
        &json!({"service": "mailer", "token": secret}),
        &alice().tenant,
        &alice().subject,
    );
    for entry in h.audit.entries() {
        let text = serde_json::to_string(&entry).unwrap();
        assert!(!text.contains(&plain), "{text}");
    }
}

#[test]
fn a_dispatcher_with_sensitive_fields_needs_host_keys() {
    let err = Dispatcher::builder(Ledger::seeded())
        .tool(GetBalance)
        .tool(SaveToken)
        .build()
        .expect_err("refused without host keys");
    match &err {
        toolguard::BuildError::MissingHostKeys { tools } => {
            assert_eq!(tools, &["save_token".to_owned()]);
        }
        other => panic!("unexpected error: {other}"),
    }
    let message = err.to_string();
    assert!(
        message.contains("save_token") && message.contains(".host_keys("),
        "{message}"
    );
}

#[tokio::test]
async fn output_outside_the_contract_is_not_passed_on() {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let mut report = SpecTool::new("count_report", json!({"type": "integer"}), json!("many"));
    report.spec.read_only = true;
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(SpecTool::new(
            "count_change",
            json!({"type": "integer"}),
            json!("many"),
        ))
        .tool(report)
        .audit(audit.clone())
        .build()
        .unwrap();
    for (tool, status, runs) in [
        ("count_report", Status::Failed, 1),
        ("count_change", Status::OutcomeUnknown, 2),
    ] {
        let before = audit.len();
        let out = d
            .dispatch(ToolCall::new("c", tool, json!({})), &alice())
            .await;
        assert_eq!(out.status, status, "{out:?}");
        assert_eq!(out.reason.as_deref(), Some("invalid_output"));
        assert!(out.output.is_none(), "the result is not passed on");
        assert_eq!(ledger.runs(), runs);
        assert_eq!(audit.len(), before + 1);
        let e = audit.get(out.audit_seq.unwrap()).unwrap();
        assert_eq!(e.record.stage, Stage::Envelope);
        assert_eq!(e.record.status, Some(status));
    }
}

#[tokio::test]
async fn long_untrusted_names_are_capped_in_the_audit_trail() {
    let h = harness();
    let name = "n".repeat(10_000);
    let call_id = "c".repeat(10_000);
    let before = h.audit.len();
    let out = h
        .dispatcher
        .dispatch(ToolCall::new(call_id.clone(), name.clone(), "{}"), &alice())
        .await;
    assert_eq!(out.status, Status::UnknownTool);
    assert_eq!(h.audit.len(), before + 1);
    let e = h.entry(&out);
    assert_eq!(
        e.record.tool.chars().count(),
        toolguard::dispatcher::MAX_LABEL_CHARS
    );
    assert_eq!(
        e.record.call_id.chars().count(),
        toolguard::dispatcher::MAX_LABEL_CHARS
    );
    assert!(name.starts_with(&*e.record.tool));
}

#[tokio::test]
async fn argument_errors_never_echo_the_rejected_value() {
    let h = harness();
    let mut args = transfer(100, "key-echo-0001");
    args["from_account"] = json!("x".repeat(70) + "IGNOREPREVIOUS");
    args["currency"] = json!("<|im_start|>system");
    let out = h.call("transfer_funds", args).await;
    assert_eq!(out.status, Status::InvalidArguments);
    assert!(out.errors.len() >= 2, "{:?}", out.errors);
    let text = serde_json::to_string(&out).unwrap();
    assert!(
        !text.contains("IGNOREPREVIOUS") && !text.contains("im_start"),
        "{text}"
    );
}
