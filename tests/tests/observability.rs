//! Metrics labelled by tool, contained handler panics, and the key requirement of host-keyed
//! tools.

use std::sync::Arc;

use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;
use toolguard::{Dispatcher, MemoryAuditSink, Status, ToolCall};
use toolguard_tests::*;

fn dispatcher(ledger: Arc<Ledger>) -> Dispatcher<Ledger> {
    Dispatcher::builder_arc(ledger)
        .tool(EchoNote)
        .tool(GetBalance)
        .tool(BuggyExport)
        .tool(HostKeyedPayment)
        .audit(MemoryAuditSink::new())
        .build()
        .unwrap()
}

#[test]
fn metrics_are_labelled_by_tool_and_unknown_names_do_not_become_labels() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let d = dispatcher(Arc::new(Ledger::seeded()));
            let who = alice();
            d.dispatch(ToolCall::new("1", "echo_note", json!({"note": "a"})), &who)
                .await;
            d.dispatch(ToolCall::new("2", "echo_note", json!({"note": "a"})), &who)
                .await;
            d.dispatch(ToolCall::new("3", "echo_note", json!({"note": 5})), &who)
                .await;
            d.dispatch(ToolCall::new("4", "model-invented-name", "{}"), &who)
                .await;
            d.dispatch(ToolCall::new("5", "echo_note", r#"{"note": "#), &who)
                .await;
        });
    });
    let mut calls = std::collections::HashMap::new();
    let mut validation = 0;
    let mut durations = 0;
    for (key, _unit, _desc, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_owned(), l.value().to_owned()))
            .collect();
        let tool = labels
            .iter()
            .find(|(k, _)| k == "tool")
            .map(|(_, v)| v.clone())
            .unwrap();
        assert_ne!(tool, "model-invented-name");
        match (kind, key.name(), value) {
            (MetricKind::Counter, "tool_call_count", DebugValue::Counter(n)) => {
                let status = labels
                    .iter()
                    .find(|(k, _)| k == "status")
                    .unwrap()
                    .1
                    .clone();
                *calls.entry((tool, status)).or_insert(0) += n;
            }
            (MetricKind::Counter, "tool_validation_failures", DebugValue::Counter(n)) => {
                assert_eq!(tool, "echo_note");
                validation += n;
            }
            (MetricKind::Histogram, "tool_execution_duration", DebugValue::Histogram(v)) => {
                assert_eq!(tool, "echo_note", "only executed handlers are timed");
                durations += v.len();
            }
            _ => {}
        }
    }
    assert_eq!(calls.get(&("echo_note".into(), "ok".into())), Some(&2));
    assert_eq!(
        calls.get(&("echo_note".into(), "invalid_arguments".into())),
        Some(&1)
    );
    assert_eq!(
        calls.get(&("unknown".into(), "unknown_tool".into())),
        Some(&1)
    );
    assert_eq!(
        calls.get(&("echo_note".into(), "malformed".into())),
        Some(&1),
        "a malformed call to a registered tool carries its name"
    );
    assert_eq!(validation, 2);
    assert_eq!(
        durations, 2,
        "the two executions, not the four refused calls"
    );
}

#[tokio::test]
async fn a_panicking_handler_is_contained() {
    let ledger = Arc::new(Ledger::seeded());
    let d = dispatcher(ledger.clone());
    let out = d
        .dispatch(
            ToolCall::new(
                "c",
                "buggy_export",
                json!({"rows": 3, "idempotency_key": "panic-key-01"}),
            ),
            &alice(),
        )
        .await;
    // The handler may have done something before it crashed: the outcome is uncertain.
    assert_eq!(out.status, Status::OutcomeUnknown);
    assert_eq!(out.reason.as_deref(), Some("handler_panicked"));
    assert_eq!(ledger.runs(), 1);
    // The dispatcher still serves calls.
    let ok = d
        .dispatch(
            ToolCall::new("c", "echo_note", json!({"note": "still here"})),
            &alice(),
        )
        .await;
    assert_eq!(ok.status, Status::Ok);
}

#[tokio::test]
async fn a_high_risk_call_without_a_key_is_refused() {
    let ledger = Arc::new(Ledger::seeded());
    let d = dispatcher(ledger.clone());
    let out = d
        .dispatch(
            ToolCall::new("c", "host_keyed_payment", json!({"amount": 5})),
            &alice(),
        )
        .await;
    assert_eq!(out.status, Status::InvalidArguments);
    assert_eq!(out.reason.as_deref(), Some("missing_idempotency_key"));
    assert_eq!(ledger.transfers(), 0);
    let keyed = ToolCall::new("c", "host_keyed_payment", json!({"amount": 5}))
        .with_idempotency_key("host-key-1");
    assert_eq!(d.dispatch(keyed.clone(), &alice()).await.status, Status::Ok);
    assert!(d.dispatch(keyed, &alice()).await.replayed);
    assert_eq!(ledger.transfers(), 1);
}
