//! Guarantees wired into the pipeline, attacked through `dispatch`: idempotency keys never
//! collide through sanitizing, whatever the tool declared for its key field; a host-supplied key
//! is held to the same rule.

use std::sync::Arc;

use serde_json::json;
use toolguard::{Dispatcher, HostKeys, MemoryAuditSink, Status, ToolCall, ToolOutcome};
use toolguard_suite::*;

struct H {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
}

/// A state-changing, idempotent tool whose key field has no declared pattern or kind.
fn harness() -> H {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let mut tool = SpecTool::new("set_flag", json!({"type": "integer"}), json!(1));
    tool.spec.idempotent = true;
    tool.spec.idempotency_key_field = Some("key".to_owned());
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(tool)
        .host_keys(HostKeys::ephemeral())
        .audit(audit.clone())
        .build()
        .expect("dispatcher builds");
    H { d, ledger, audit }
}

impl H {
    async fn call(&self, id: &str, key: &str) -> ToolOutcome {
        let call = ToolCall::new(id, "set_flag", json!({"flag": "on", "key": key}));
        self.d.dispatch(call, &alice()).await
    }

    fn reason(&self, out: &ToolOutcome) -> Option<String> {
        let seq = out.audit_seq.expect("every outcome has an audit entry");
        self.audit.get(seq).expect("the entry").record.reason
    }
}

#[tokio::test]
async fn idempotency_keys_never_collide_through_sanitizing() {
    let h = harness();
    let cases = [
        ("key\u{200b}1", "idempotency_key_non_ascii"),
        ("key\u{0007}1", "idempotency_key_control_char"),
        ("key 1", "idempotency_key_whitespace"),
        ("key%31", "idempotency_key_disallowed_char"),
        ("ｋｅｙ1", "idempotency_key_non_ascii"),
    ];
    for (i, (key, reason)) in cases.iter().enumerate() {
        let out = h.call(&format!("bad-{i}"), key).await;
        assert_eq!(out.status, Status::InvalidArguments, "{key:?}: {out:?}");
        assert_eq!(out.reason.as_deref(), Some(*reason), "{key:?}");
        assert_eq!(
            h.reason(&out).as_deref(),
            Some(*reason),
            "audit entry for {key:?}"
        );
        assert!(!out.replayed);
    }
    assert_eq!(h.ledger.runs(), 0, "no refused key executes");
    // The key every refused one would have folded into runs once, as a fresh operation.
    let out = h.call("good", "key1").await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert!(!out.replayed, "nothing was stored under a refused key");
    assert_eq!(h.ledger.runs(), 1);
    let again = h.call("good-again", "key1").await;
    assert!(again.replayed);
    assert_eq!(h.ledger.runs(), 1);
}

#[tokio::test]
async fn host_supplied_keys_follow_the_same_rule() {
    let h = harness();
    let call = ToolCall::new("h1", "set_flag", json!({"flag": "on", "key": "model-1"}))
        .with_idempotency_key("turn\u{200d}7");
    let out = h.d.dispatch(call, &alice()).await;
    assert_eq!(out.status, Status::InvalidArguments);
    assert_eq!(h.reason(&out).as_deref(), Some("idempotency_key_non_ascii"));
    assert!(
        out.message
            .as_ref()
            .is_some_and(|m| m.contains("host-supplied")),
        "{out:?}"
    );
    assert_eq!(h.ledger.runs(), 0);
}
