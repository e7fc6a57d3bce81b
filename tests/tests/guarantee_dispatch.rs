//! Guarantees checked through a real dispatcher that the per-backend approval suite
//! (`guarantee_approvals.rs`) does not cover:
//!
//! - a `sensitive` 4-digit PIN cannot be recovered from any digest the dispatcher stores or
//!   logs by trying the 10,000 candidates, and appears in no idempotency record, audit entry,
//!   preview or message;
//! - `operation_status` refuses a stale caller before it reads any store;
//! - the `.sqlite(path)` shortcut seals the trail under the host keys and writes checkpoints, so
//!   deleting the newest entry is detected; checkpoints are refused where they cannot apply;
//! - without host keys, a store writer who recomputes the plain binding still cannot lower dual
//!   control (it is recomputed from configuration), but can change what is not (the
//!   documented downgrade).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolguard::audit::AuditEvent;
use toolguard::digest::request_digest;
use toolguard::sqlite::SqliteBuilderExt as _;
use toolguard::store::{
    ApprovalStore, FaultyStore, IdempotencyStore, MemoryStore, OperationStore, ScopedKey, StoreOp,
};
use toolguard::{
    BuildError, Clock, Dispatcher, FieldSpec, HostKeys, ManualClock, MemoryAuditSink,
    OperationError, Risk, RiskPolicy, Status, ToolCall,
};
use toolguard_tests::*;

/// A critical tool (approval needed) with a `sensitive` PIN and a model-supplied key.
fn pin_tool() -> SpecTool {
    let mut tool = SpecTool::new("unlock_safe", json!({"type": "boolean"}), json!(true));
    tool.spec.risk = Risk::Critical;
    tool.spec.idempotent = true;
    tool.spec.idempotency_key_field = Some("key".to_owned());
    let mut pin = FieldSpec::new("pin");
    pin.sensitive = true;
    tool.spec.fields = vec![pin, FieldSpec::new("key"), FieldSpec::new("safe")];
    tool
}

#[tokio::test]
async fn sensitive_values_are_not_guessable_from_anything_stored() {
    let bank = Arc::new(Ledger::seeded());
    let store = Arc::new(MemoryStore::new());
    let audit = Arc::new(MemoryAuditSink::new());
    let tool = pin_tool();
    let revision = tool.spec.revision;
    let d = Dispatcher::builder_arc(bank.clone())
        .tool(tool)
        .host_keys(HostKeys::new("k1", [7u8; 32]).unwrap())
        .store(store.clone())
        .audit(audit.clone())
        .build()
        .expect("dispatcher builds");
    let pin = "7391";
    let args = json!({"pin": pin, "safe": "vault-3", "key": "pin-key-1"});
    let out = d
        .dispatch(ToolCall::new("c1", "unlock_safe", args), &alice())
        .await;
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    let ticket = out.approval.clone().unwrap();
    assert!(!ticket.preview.contains(pin), "{}", ticket.preview);
    let done = d
        .approvals()
        .approve(&bob_approver(), &ticket.approval_id)
        .await;
    assert_eq!(done.status, Status::Ok, "{done:?}");
    assert_eq!(bank.runs(), 1);

    // Everything that is meant to be readable without the approval store's arguments.
    let key = ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "unlock_safe".into(),
        key: "pin-key-1".into(),
    };
    let record = IdempotencyStore::get(&*store, &key, SystemTime::now())
        .await
        .unwrap()
        .expect("the outcome is stored");
    let request = ApprovalStore::get(&*store, &ticket.approval_id)
        .await
        .unwrap()
        .unwrap();
    let op = out.operation_id.clone().expect("an operation id");
    let operation = OperationStore::get(&*store, &op).await.unwrap().unwrap();
    let mut readable = vec![
        serde_json::to_string(&record).unwrap(),
        request.preview.clone(),
        request.request_digest.clone(),
        request.binding_digest.clone(),
        serde_json::to_string(&request.decisions).unwrap(),
        format!("{out:?} {done:?}"),
    ];
    readable.extend(
        audit
            .entries()
            .iter()
            .map(|e| serde_json::to_string(e).unwrap()),
    );
    for text in &readable {
        assert!(!text.contains(&format!("\"{pin}\"")), "{text}");
        assert!(!text.contains(&format!(": {pin}")), "{text}");
    }
    // No plain digest of any candidate, with or without the key field, appears in any stored
    // artifact, the approval body and operation record included.
    let mut everything = readable.join("\n");
    everything.push_str(&serde_json::to_string(&request).unwrap());
    everything.push_str(&serde_json::to_string(&operation).unwrap());
    for n in 0..10_000 {
        let guess = format!("{n:04}");
        for args in [
            json!({"pin": guess, "safe": "vault-3"}),
            json!({"pin": guess, "safe": "vault-3", "key": "pin-key-1"}),
        ] {
            let plain = request_digest("unlock_safe", revision, &args, "acme", "alice");
            assert!(
                !everything.contains(&plain),
                "plain digest of {guess} found"
            );
        }
    }
    assert!(request.request_digest.starts_with("k1:"));
    assert!(request.binding_digest.starts_with("k1:"));
}

#[tokio::test]
async fn operation_status_refuses_a_stale_caller_before_reading() {
    let bank = Arc::new(Ledger::seeded());
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let audit = Arc::new(MemoryAuditSink::new());
    let d = Dispatcher::builder_arc(bank.clone())
        .tool(CreditPoints)
        .store(store.clone())
        .clock(clock.clone())
        .audit(audit.clone())
        .principal_max_age(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut alice = alice();
    alice.authenticated_at = clock.now();
    let out = d
        .dispatch(
            ToolCall::new(
                "c1",
                "credit_points",
                json!({"points": 5, "idempotency_key": "status-1"}),
            ),
            &alice,
        )
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    let op = out.operation_id.expect("an operation id");
    clock.advance(Duration::from_secs(120));
    // A read would fail `unavailable`; a stale caller is refused before any.
    store.fail(StoreOp::OperationGet);
    let refused = d.operation_status(&alice, &op).await;
    assert!(
        matches!(refused, Err(OperationError::Forbidden)),
        "{refused:?}"
    );
    let entry = audit.entries().pop().unwrap();
    assert_eq!(entry.record.event, AuditEvent::OperationStatus);
    assert_eq!(entry.record.status, Some(Status::Forbidden));
    // The reason is the one `dispatch` gives a stale caller.
    let stale_call = d
        .dispatch(
            ToolCall::new(
                "c2",
                "credit_points",
                json!({"points": 5, "idempotency_key": "status-2"}),
            ),
            &alice,
        )
        .await;
    assert_eq!(stale_call.status, Status::Forbidden);
    assert_eq!(entry.record.reason, stale_call.reason);
    assert_eq!(bank.runs(), 1, "nothing ran again");
    // A fresh caller reads it once the store answers.
    store.heal_all();
    alice.authenticated_at = clock.now();
    let report = d.operation_status(&alice, &op).await.expect("a report");
    assert_eq!(report.operation_id, op);
}

#[tokio::test]
async fn without_host_keys_the_binding_is_recomputable_but_configuration_is_not() {
    let bank = Arc::new(Ledger::seeded());
    let store = Arc::new(MemoryStore::new());
    let d = Dispatcher::builder_arc(bank.clone())
        .tool(WireOut)
        .store(store.clone())
        .policy(RiskPolicy::new().approver_roles(["approver"]))
        .build()
        .unwrap();
    let requester = alice();
    let open = |key: &'static str| {
        let call = ToolCall::new(
            key,
            "wire_out",
            json!({"amount": 50, "idempotency_key": key}),
        );
        d.dispatch(call, &requester)
    };
    let rewrite = |id: &str, edit: fn(&mut toolguard::store::ApprovalRequest)| {
        store.with_approvals(|map| {
            let r = map.get_mut(id).unwrap();
            assert!(r.seal.is_none(), "nothing seals it without keys");
            edit(r);
            r.binding_digest = toolguard::approvals::binding_digest(r, None);
        })
    };
    // Dual control lowered, with the plain binding recomputed: still refused, because the
    // approvers required are recomputed from the tool's declaration.
    let id = open("unsealed-1").await.approval.unwrap().approval_id;
    rewrite(&id, |r| r.approvals_required = 1);
    let out = d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(out.reason.as_deref(), Some("binding_mismatch"), "{out:?}");
    assert_eq!(bank.transfers(), 0);
    // The downgrade: what configuration does not determine (here the recorded cause) can be
    // rewritten by anyone who recomputes the plain binding.
    let id = open("unsealed-2").await.approval.unwrap().approval_id;
    rewrite(&id, |r| r.cause = "forged".to_owned());
    assert_eq!(
        d.approvals().approve(&bob_approver(), &id).await.status,
        Status::PendingApproval
    );
    let out = d.approvals().approve(&dave_approver(), &id).await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert_eq!(bank.transfers(), 1);
}

#[test]
fn audit_checkpoints_need_keys_and_a_built_in_sink() {
    use toolguard::audit::{CheckpointPolicy, MemoryCheckpoints};
    let checkpoints = Arc::new(MemoryCheckpoints::new());
    let no_keys = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .audit_checkpoints(checkpoints.clone(), CheckpointPolicy::default())
        .build()
        .expect_err("refused without keys");
    assert!(
        matches!(&no_keys, BuildError::Audit(m) if m.contains("host_keys")),
        "{no_keys}"
    );
    let own_sink = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .host_keys(HostKeys::ephemeral())
        .audit(MemoryAuditSink::new())
        .audit_checkpoints(checkpoints, CheckpointPolicy::default())
        .build()
        .expect_err("refused for a sink the host built");
    assert!(
        matches!(&own_sink, BuildError::Audit(m) if m.contains("AuditAnchor")),
        "{own_sink}"
    );
}

#[cfg(feature = "sqlite")]
mod store_support;

/// `.sqlite(path)` with host keys and checkpoints every entry: after calls through the
/// dispatcher, deleting the newest entry in the file is reported as truncation; the intact trail
/// verifies against the same checkpoints.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_shortcut_anchors_the_trail() {
    use toolguard::audit::{
        AuditAnchor, AuditQuery, ChainBreak, CheckpointPolicy, MemoryCheckpoints, VerifyError,
    };
    use toolguard::sqlite::Durability;
    use toolguard::sqlite::SqliteAuditSink;

    let path = store_support::sqlite_path("sqlite_shortcut_anchors_the_trail");
    let keys = || HostKeys::new("k1", [9u8; 32]).unwrap();
    let checkpoints = Arc::new(MemoryCheckpoints::new());
    let policy = CheckpointPolicy {
        every_entries: 1,
        every: Duration::from_secs(3600),
    };
    let d = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .sqlite(&path)
        .unwrap()
        .host_keys(keys())
        .audit_checkpoints(checkpoints.clone(), policy)
        .build()
        .unwrap();
    for i in 0..4 {
        let out = d
            .dispatch(
                ToolCall::new(format!("c{i}"), "echo_note", json!({"note": "hi"})),
                &alice(),
            )
            .await;
        assert_eq!(out.status, Status::Ok, "{out:?}");
    }
    assert_eq!(checkpoints.latest().map(|c| c.seq), Some(4));
    let reader = || {
        SqliteAuditSink::open_anchored(&path, Durability::Full, AuditAnchor::new(Arc::new(keys())))
            .unwrap()
    };
    let report = reader()
        .verify_against(&checkpoints.all())
        .await
        .expect("the intact trail verifies");
    assert_eq!(report.entries, 4);
    // Without the key, the trail does not verify as a plain chain: it was sealed.
    let plain = SqliteAuditSink::open(&path).unwrap();
    assert!(plain.verify().await.is_err(), "entries are keyed");
    let c = rusqlite::Connection::open(&path).unwrap();
    c.execute("DELETE FROM toolguard_audit WHERE seq = 4", [])
        .unwrap();
    let broken = reader().verify_against(&checkpoints.all()).await;
    assert!(
        matches!(
            broken,
            Err(VerifyError::Broken(ChainBreak::Truncated {
                expected: 4,
                last: 3
            }))
        ),
        "{broken:?}"
    );
    drop(d);
    store_support::remove_sqlite(&path);
}

/// A `Deny` subject limit counts what waits for approval in every session of the subject: a
/// second session's request that does not fit is refused with `subject_limit`, and no request
/// is stored for it.
#[tokio::test]
async fn a_subject_limit_counts_pending_requests_of_every_session() {
    let bank = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let policy = RiskPolicy::new()
        .approver_roles(["approver"])
        .subject_limit(
            "wire_out",
            100,
            Duration::from_secs(3600),
            toolguard::OnExceed::Deny,
        );
    let d = Dispatcher::builder_arc(bank.clone())
        .tool(WireOut)
        .host_keys(HostKeys::ephemeral())
        .audit(audit.clone())
        .policy(policy)
        .build()
        .unwrap();
    let wire = async |session: &str, key: &str| {
        let p = toolguard::Principal::new("acme", "alice", session);
        let call = ToolCall::new(
            key,
            "wire_out",
            json!({"amount": 60, "idempotency_key": key}),
        );
        d.dispatch(call, &p).await
    };
    let first = wire("sess-a", "subject-key-1").await;
    assert_eq!(first.status, Status::PendingApproval, "{first:?}");
    let second = wire("sess-b", "subject-key-2").await;
    assert_eq!(second.status, Status::PolicyDenied, "{second:?}");
    assert_eq!(second.reason.as_deref(), Some("subject_limit"));
    // The message names the scope that refused: the user's limit, not this session's.
    let message = second.message.clone().unwrap_or_default();
    assert!(message.contains("limit for this user"), "{message}");
    let entry = audit.get(second.audit_seq.unwrap()).unwrap();
    assert_eq!(entry.record.reason.as_deref(), Some("subject_limit"));
    let open = d.approvals().pending(&bob_approver()).await.unwrap();
    assert_eq!(open.len(), 1, "only the first request was stored");
    assert_eq!(bank.transfers(), 0);
}
