//! The approval workflow: pending outcomes stored under the key, eligible approvers only, digest
//! binding, expiry at the boundary, rejection, dual control, TOCTOU rechecks, and audit entries.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolguard::audit::AuditEvent;
use toolguard::store::{ApprovalStore, MemoryStore};
use toolguard::{
    Dispatcher, ManualClock, MemoryAuditSink, RiskPolicy, Status, ToolCall, ToolOutcome,
};
use toolguard_tests::*;

fn transfer(amount: u64, key: &str) -> serde_json::Value {
    json!({
        "from_account": "acc-alice-1",
        "to_account": "acc-bob-1",
        "amount": amount,
        "currency": "USD",
        "memo": "quarterly rent",
        "idempotency_key": key,
    })
}

struct H {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
    clock: Arc<ManualClock>,
    store: Arc<MemoryStore>,
}

fn harness() -> H {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let store = Arc::new(MemoryStore::new());
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(CloseAccount)
        .tool(WireOut)
        .tool(ShakyClose)
        .tool(RegisterWebhook)
        .audit(audit.clone())
        .clock(clock.clone())
        .store(store.clone())
        .policy(RiskPolicy::new().approver_roles(["approver"]))
        .build()
        .unwrap();
    H {
        d,
        ledger,
        audit,
        clock,
        store,
    }
}

impl H {
    async fn call(&self, tool: &str, args: serde_json::Value) -> ToolOutcome {
        self.d
            .dispatch(ToolCall::new("call-big", tool, args), &alice())
            .await
    }

    async fn pending_transfer(&self, key: &str) -> (ToolOutcome, String) {
        let out = self.call("transfer_funds", transfer(1_500_000, key)).await;
        assert_eq!(out.status, Status::PendingApproval, "{out:?}");
        let id = out.approval.as_ref().unwrap().approval_id.clone();
        (out, id)
    }
}

#[tokio::test]
async fn large_transfer_waits_for_a_human_and_retries_get_the_same_request() {
    let h = harness();
    let (out, id) = h.pending_transfer("big-key-0001").await;
    assert_eq!(h.ledger.transfers(), 0);
    assert_eq!(
        h.ledger.balance("acc-alice-1"),
        100_000_000,
        "balance unchanged while pending"
    );
    let ticket = out.approval.unwrap();
    assert!(
        ticket.preview.contains("amount: 1500000"),
        "{}",
        ticket.preview
    );
    assert!(ticket.preview.contains("to_account: \"acc-bob-1\""));
    assert!(ticket.preview.contains("requested by alice"));
    assert!(
        !ticket.preview.contains("big-key-0001"),
        "the preview shows the action, not the key"
    );

    let retry = h
        .call("transfer_funds", transfer(1_500_000, "big-key-0001"))
        .await;
    assert_eq!(retry.status, Status::PendingApproval);
    assert!(retry.replayed);
    assert_eq!(retry.approval.unwrap().approval_id, id);
    assert_eq!(
        h.d.approvals()
            .pending(&toolguard::Principal::new("acme", "viewer", "console"))
            .await
            .unwrap()
            .len(),
        1,
        "no second request"
    );
    assert!(
        h.d.approvals()
            .pending(&toolguard::Principal::new("globex", "viewer", "console"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn only_an_eligible_other_person_of_the_tenant_can_approve() {
    let h = harness();
    let (_, id) = h.pending_transfer("big-key-0002").await;

    let by_requester =
        h.d.approvals()
            .approve(&alice().with_role("approver"), &id)
            .await;
    assert_eq!(by_requester.status, Status::Forbidden);
    assert_eq!(
        h.audit
            .get(by_requester.audit_seq.unwrap())
            .unwrap()
            .record
            .reason
            .as_deref(),
        Some("self_approval")
    );

    let no_role =
        h.d.approvals()
            .approve(&toolguard::Principal::new("acme", "eve", "s"), &id)
            .await;
    assert_eq!(no_role.status, Status::Forbidden);

    let foreign =
        h.d.approvals()
            .approve(&carol_foreign_approver(), &id)
            .await;
    assert_eq!(
        foreign.status,
        Status::NotFound,
        "another tenant cannot even see it"
    );

    let stale = bob_approver().authenticated_at(SystemTime::now() - Duration::from_secs(24 * 3600));
    assert_eq!(
        h.d.approvals().approve(&stale, &id).await.status,
        Status::Forbidden
    );

    assert_eq!(h.ledger.transfers(), 0);

    let approved = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(approved.status, Status::Ok, "{approved:?}");
    assert_eq!(
        approved.call_id, "call-big",
        "the outcome answers the original call"
    );
    assert_eq!(h.ledger.transfers(), 1);
    assert_eq!(h.ledger.balance("acc-bob-1"), 500_000 + 1_500_000);

    let entry = h.audit.get(approved.audit_seq.unwrap()).unwrap();
    assert_eq!(entry.record.event, AuditEvent::Decision);
    assert_eq!(entry.record.approval_id.as_deref(), Some(id.as_str()));
    assert_eq!(entry.record.approver.as_deref(), Some("bob"));
    assert_eq!(
        entry.record.subject, "alice",
        "the entry names the requester"
    );

    let retry = h
        .call("transfer_funds", transfer(1_500_000, "big-key-0002"))
        .await;
    assert_eq!(retry.status, Status::Ok);
    assert!(retry.replayed);
    assert_eq!(retry.output, approved.output);
    assert_eq!(h.ledger.transfers(), 1);

    let again = h.d.approvals().approve(&dave_approver(), &id).await;
    assert_eq!(
        again.status,
        Status::PreconditionFailed,
        "decided requests stay decided"
    );
    assert_eq!(h.ledger.transfers(), 1);
    h.audit.verify().unwrap();
}

#[tokio::test]
async fn approvals_expire_at_the_boundary() {
    let h = harness();
    let (out, id) = h.pending_transfer("big-key-0003").await;
    let expires = out.approval.unwrap().expires_at_ms;
    let now_ms = toolguard::clock::unix_millis(toolguard::Clock::now(&*h.clock));
    assert_eq!(expires - now_ms, 15 * 60 * 1000, "15 minutes by default");
    h.clock.advance(Duration::from_millis(expires - now_ms)); // now == expires_at: void
    let late = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(late.status, Status::ApprovalExpired);
    assert_eq!(h.ledger.transfers(), 0);
    let retry = h
        .call("transfer_funds", transfer(1_500_000, "big-key-0003"))
        .await;
    assert_eq!(retry.status, Status::ApprovalExpired);
    assert!(
        h.d.approvals()
            .pending(&toolguard::Principal::new("acme", "viewer", "console"))
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn a_retry_after_expiry_learns_it_expired() {
    let h = harness();
    let (_, _id) = h.pending_transfer("big-key-0004").await;
    h.clock.advance(Duration::from_secs(16 * 60));
    let retry = h
        .call("transfer_funds", transfer(1_500_000, "big-key-0004"))
        .await;
    assert_eq!(retry.status, Status::ApprovalExpired);
    assert_eq!(h.ledger.transfers(), 0);
}

#[tokio::test]
async fn rejection_is_stored_for_retries() {
    let h = harness();
    let (_, id) = h.pending_transfer("big-key-0005").await;
    let out =
        h.d.approvals()
            .reject(&bob_approver(), &id, "looks odd")
            .await;
    assert_eq!(out.status, Status::ApprovalRejected);
    let entry = h.audit.get(out.audit_seq.unwrap()).unwrap();
    assert_eq!(
        (entry.record.event, entry.record.approver.as_deref()),
        (AuditEvent::Decision, Some("bob"))
    );
    let retry = h
        .call("transfer_funds", transfer(1_500_000, "big-key-0005"))
        .await;
    assert_eq!(retry.status, Status::ApprovalRejected);
    assert!(retry.replayed);
    assert_eq!(
        h.d.approvals().approve(&dave_approver(), &id).await.status,
        Status::ApprovalRejected,
        "a rejected request answers approval_rejected"
    );
    assert_eq!(
        h.d.approvals()
            .reject(&dave_approver(), &id, "again")
            .await
            .status,
        Status::ApprovalRejected
    );
    assert_eq!(h.ledger.transfers(), 0);
}

#[tokio::test]
async fn a_tampered_request_is_refused_at_approval() {
    let h = harness();
    let (_, id) = h.pending_transfer("big-key-0006").await;
    let mut stored = ApprovalStore::get(&*h.store, &id).await.unwrap().unwrap();
    stored.arguments["to_account"] = json!("acc-carol-1");
    let v = stored.version;
    assert!(h.store.update(&stored, v).await.unwrap());
    let out = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(out.status, Status::ApprovalRejected);
    assert_eq!(out.reason.as_deref(), Some("binding_mismatch"));
    assert_eq!(h.ledger.transfers(), 0);
    assert_eq!(h.ledger.balance("acc-carol-1"), 500_000);
}

#[tokio::test]
async fn a_changed_argument_is_a_new_intent_needing_a_new_approval() {
    let h = harness();
    let (_, first) = h.pending_transfer("big-key-0007").await;
    let mut changed = transfer(1_500_000, "big-key-0008");
    changed["memo"] = json!("changed memo");
    let out = h.call("transfer_funds", changed).await;
    assert_eq!(out.status, Status::PendingApproval);
    assert_ne!(out.approval.unwrap().approval_id, first);
    assert_eq!(
        h.d.approvals()
            .pending(&toolguard::Principal::new("acme", "viewer", "console"))
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn state_is_rechecked_before_an_approved_action_executes() {
    let h = harness();
    let (_, id) = h.pending_transfer("big-key-0009").await;
    let (_, id2) = h.pending_transfer("big-key-0010").await;
    // While the request waits, the account is drained.
    h.ledger
        .accounts
        .lock()
        .unwrap()
        .get_mut("acc-alice-1")
        .unwrap()
        .balance = 100;
    let out = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(out.status, Status::PreconditionFailed);
    assert_eq!(h.ledger.transfers(), 0);
    // And when the account changes hands, the requester no longer owns it.
    h.ledger
        .accounts
        .lock()
        .unwrap()
        .get_mut("acc-alice-1")
        .unwrap()
        .balance = 100_000_000;
    h.ledger
        .accounts
        .lock()
        .unwrap()
        .get_mut("acc-alice-1")
        .unwrap()
        .owner = "mallory".into();
    let out = h.d.approvals().approve(&bob_approver(), &id2).await;
    assert_eq!(out.status, Status::NotFound);
    assert_eq!(h.ledger.transfers(), 0);
}

#[tokio::test]
async fn critical_tools_always_need_approval() {
    let h = harness();
    let out = h
        .call(
            "close_account",
            json!({"account": "acc-alice-2", "idempotency_key": "close-key-1"}),
        )
        .await;
    assert_eq!(out.status, Status::PendingApproval);
    assert_eq!(h.ledger.runs(), 0);
    let id = out.approval.unwrap().approval_id;
    assert_eq!(
        h.d.approvals().approve(&bob_approver(), &id).await.status,
        Status::Ok
    );
    assert_eq!(h.ledger.runs(), 1);
}

#[tokio::test]
async fn dual_control_needs_two_distinct_approvers() {
    let h = harness();
    let out = h
        .call(
            "wire_out",
            json!({"amount": 50, "idempotency_key": "wire-key-01"}),
        )
        .await;
    let id = out.approval.unwrap().approval_id;
    let first = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(first.status, Status::PendingApproval);
    assert_eq!(h.ledger.transfers(), 0);
    let twice = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(
        twice.status,
        Status::Forbidden,
        "the same approver does not count twice"
    );
    let second = h.d.approvals().approve(&dave_approver(), &id).await;
    assert_eq!(second.status, Status::Ok);
    assert_eq!(h.ledger.transfers(), 1);
    let request = h.d.approvals().get(&alice(), &id).await.unwrap().unwrap();
    assert_eq!(request.approvers(), vec!["bob", "dave"]);
    assert!(request.decisions.iter().all(|d| d.digest.len() == 64));
    assert_ne!(
        request.decisions[0].digest, request.decisions[1].digest,
        "each digest binds its approver"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_approvals_execute_once() {
    let h = Arc::new(harness());
    let (_, id) = h.pending_transfer("big-key-0011").await;
    let mut tasks = Vec::new();
    for i in 0..20 {
        let h = h.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let who = toolguard::Principal::new("acme", format!("approver-{i}"), "s")
                .with_role("approver");
            h.d.approvals().approve(&who, &id).await.status
        }));
    }
    let statuses: Vec<Status> = futures_join(tasks).await;
    assert_eq!(
        statuses.iter().filter(|s| **s == Status::Ok).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(h.ledger.transfers(), 1);
}

async fn futures_join(tasks: Vec<tokio::task::JoinHandle<Status>>) -> Vec<Status> {
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn deciding_on_an_expired_request_answers_approval_expired() {
    let h = harness();
    let (_, id) = h.pending_transfer("big-key-0012").await;
    h.clock.advance(Duration::from_secs(16 * 60));
    assert!(
        h.d.approvals()
            .pending(&toolguard::Principal::new("acme", "viewer", "console"))
            .await
            .unwrap()
            .is_empty(),
        "expired requests are not listed as pending"
    );
    let first = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(first.status, Status::ApprovalExpired);
    for out in [
        h.d.approvals().approve(&dave_approver(), &id).await,
        h.d.approvals().reject(&dave_approver(), &id, "late").await,
    ] {
        assert_eq!(out.status, Status::ApprovalExpired, "{out:?}");
        assert_eq!(out.reason.as_deref(), Some("expired"));
    }
    assert_eq!(h.ledger.transfers(), 0);
}

#[tokio::test]
async fn a_handler_failure_after_approval_is_not_replayed() {
    let h = harness();
    let args = json!({"account": "acc-alice-2", "idempotency_key": "shaky-key-01"});
    let out = h.call("shaky_close", args.clone()).await;
    assert_eq!(out.status, Status::PendingApproval);
    let first_id = out.approval.unwrap().approval_id;
    let approved = h.d.approvals().approve(&bob_approver(), &first_id).await;
    assert_eq!(approved.status, Status::Failed, "{approved:?}");
    assert_eq!(h.ledger.runs(), 1);
    // The failure is not stored under the key: the retry is a new request, not a replay.
    let retry = h.call("shaky_close", args).await;
    assert_eq!(retry.status, Status::PendingApproval, "{retry:?}");
    assert!(!retry.replayed);
    let second_id = retry.approval.unwrap().approval_id;
    assert_ne!(second_id, first_id);
    let approved = h.d.approvals().approve(&bob_approver(), &second_id).await;
    assert_eq!(approved.status, Status::Ok, "{approved:?}");
    assert_eq!(h.ledger.runs(), 2);
}

#[tokio::test]
async fn an_approved_handler_sees_the_checked_addresses() {
    let h = harness();
    let out = h
        .call(
            "register_webhook",
            json!({"target": "https://93.184.216.34/hook", "idempotency_key": "hook-key-01"}),
        )
        .await;
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    let id = out.approval.unwrap().approval_id;
    let approved = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(approved.status, Status::Ok, "{approved:?}");
    assert_eq!(
        approved.data(),
        Some(&json!("93.184.216.34 via [93.184.216.34]"))
    );
}

#[tokio::test]
async fn a_huge_approval_ttl_does_not_overflow() {
    let ledger = Arc::new(Ledger::seeded());
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(CloseAccount)
        .audit(MemoryAuditSink::new())
        .policy(RiskPolicy::new().approval_ttl(Duration::MAX))
        .build()
        .unwrap();
    let out = d
        .dispatch(
            ToolCall::new(
                "c",
                "close_account",
                json!({"account": "acc-alice-2", "idempotency_key": "close-key-max"}),
            ),
            &alice(),
        )
        .await;
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    let ticket = out.approval.unwrap();
    assert_eq!(ticket.expires_at_ms, u64::MAX);
    assert_eq!(
        d.approvals()
            .approve(&bob_approver(), &ticket.approval_id)
            .await
            .status,
        Status::Ok
    );
    assert_eq!(ledger.runs(), 1);
}
