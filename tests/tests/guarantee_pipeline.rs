//! Guarantees wired into the pipeline, attacked through `dispatch`: idempotency keys never
//! collide through sanitizing, whatever the tool declared for its key field; a host-supplied key
//! is held to the same rule; an approval record altered in the store is refused; an approved
//! action does not run for a stale requester.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolguard::Clock;
use toolguard::store::{ApprovalRequest, ApprovalState, ApprovalStore, MemoryStore};
use toolguard::{
    Dispatcher, HostKeys, ManualClock, MemoryAuditSink, Principal, RiskPolicy, Status, ToolCall,
    ToolOutcome,
};
use toolguard_tests::*;

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
        self.audit
            .get(seq)
            .expect("the entry")
            .record
            .reason
            .map(String::from)
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
        ("-", "idempotency_key_punctuation_only"),
        ("._~", "idempotency_key_punctuation_only"),
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

/// A dispatcher whose approval requests are sealed under the host keys, over a store the test
/// can write to directly.
fn approvals_harness(keys: bool) -> (Dispatcher<Ledger>, Arc<Ledger>, Arc<MemoryStore>) {
    let ledger = Arc::new(Ledger::seeded());
    let store = Arc::new(MemoryStore::new());
    let mut b = Dispatcher::builder_arc(ledger.clone())
        .tool(WireOut)
        .store(store.clone())
        .policy(RiskPolicy::new().approver_roles(["approver"]));
    if keys {
        b = b.host_keys(HostKeys::ephemeral());
    }
    (b.build().expect("dispatcher builds"), ledger, store)
}

/// Opens a dual-control wire of `amount` and returns its approval id.
async fn open_wire(d: &Dispatcher<Ledger>, key: &str) -> String {
    let call = ToolCall::new(
        key,
        "wire_out",
        json!({"amount": 50, "idempotency_key": key}),
    );
    let out = d.dispatch(call, &alice()).await;
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    out.approval.expect("a ticket").approval_id
}

type Edit = fn(&mut ApprovalRequest);

/// Store writes that would turn a request into a different authority.
fn edits() -> Vec<(&'static str, Edit)> {
    vec![
        ("dual control lowered to one approver", |r| {
            r.approvals_required = 1
        }),
        ("eligible roles widened", |r| {
            r.eligible_roles.push("support".to_owned())
        }),
        ("expiry extended", |r| {
            r.expires_at_ms = r.expires_at_ms.saturating_add(86_400_000)
        }),
        ("amount lowered", |r| r.amount = r.amount.map(|a| a / 2)),
        ("requester changed", |r| {
            r.requester.subject = "mallory".into()
        }),
    ]
}

#[tokio::test]
async fn a_sealed_approval_altered_in_the_store_is_refused() {
    let (d, ledger, store) = approvals_harness(true);
    for (i, (what, edit)) in edits().into_iter().enumerate() {
        let id = open_wire(&d, &format!("wire-tamper-{i}")).await;
        let mut stored = ApprovalStore::get(&*store, &id).await.unwrap().unwrap();
        edit(&mut stored);
        let v = stored.version;
        assert!(store.update(&stored, v).await.unwrap(), "{what}");
        let out = d.approvals().approve(&bob_approver(), &id).await;
        assert_eq!(out.status, Status::ApprovalRejected, "{what}: {out:?}");
        assert_eq!(out.reason.as_deref(), Some("binding_mismatch"), "{what}");
        let closed = ApprovalStore::get(&*store, &id).await.unwrap().unwrap();
        assert_eq!(closed.state, ApprovalState::Rejected, "{what}");
        assert_eq!(ledger.transfers(), 0, "{what}: nothing executes");
    }
}

#[tokio::test]
async fn dual_control_cannot_be_lowered_by_a_store_write() {
    // With keys: one approval on a request edited down to one approver does not execute.
    let (d, ledger, store) = approvals_harness(true);
    let id = open_wire(&d, "wire-dual-1").await;
    let mut stored = ApprovalStore::get(&*store, &id).await.unwrap().unwrap();
    stored.approvals_required = 1;
    let v = stored.version;
    assert!(store.update(&stored, v).await.unwrap());
    let out = d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(out.reason.as_deref(), Some("binding_mismatch"), "{out:?}");
    assert_eq!(ledger.transfers(), 0);
    // An untampered request still needs and accepts two approvers.
    let id = open_wire(&d, "wire-dual-2").await;
    let first = d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(first.status, Status::PendingApproval, "{first:?}");
    let second = d.approvals().approve(&dave_approver(), &id).await;
    assert_eq!(second.status, Status::Ok, "{second:?}");
    assert_eq!(ledger.transfers(), 1);
    let done = ApprovalStore::get(&*store, &id).await.unwrap().unwrap();
    assert_eq!(done.state, ApprovalState::Executed);
    assert!(done.seal.is_some(), "every write is sealed");
}

/// A dual-control dispatcher whose principals go stale after one minute, on a manual clock.
fn stale_harness(
    refresher: bool,
) -> (
    Dispatcher<Ledger>,
    Arc<Ledger>,
    Arc<ManualClock>,
    Arc<MemoryAuditSink>,
) {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let audit = Arc::new(MemoryAuditSink::new());
    let mut b = Dispatcher::builder_arc(ledger.clone())
        .tool(WireOut)
        .host_keys(HostKeys::ephemeral())
        .clock(clock.clone())
        .audit(audit.clone())
        .principal_max_age(Duration::from_secs(60))
        .policy(RiskPolicy::new().approver_roles(["approver"]));
    if refresher {
        let c = clock.clone();
        b = b.principal_refresher(move |p: &Principal| {
            let mut fresh = p.clone();
            fresh.authenticated_at = c.now();
            Some(fresh)
        });
    }
    (b.build().expect("dispatcher builds"), ledger, clock, audit)
}

/// `p` as authenticated at the clock's current time.
fn now_as(p: Principal, clock: &ManualClock) -> Principal {
    let mut p = p;
    p.authenticated_at = clock.now();
    p
}

#[tokio::test]
async fn a_stale_requester_fails_closed_without_a_refresher() {
    let (d, ledger, clock, audit) = stale_harness(false);
    let alice = now_as(alice(), &clock);
    let call = ToolCall::new(
        "w",
        "wire_out",
        json!({"amount": 50, "idempotency_key": "stale-key-1"}),
    );
    let out = d.dispatch(call, &alice).await;
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    let id = out.approval.unwrap().approval_id;
    clock.advance(Duration::from_secs(120));
    let first = d
        .approvals()
        .approve(&now_as(bob_approver(), &clock), &id)
        .await;
    assert_eq!(first.status, Status::PendingApproval, "{first:?}");
    let second = d
        .approvals()
        .approve(&now_as(dave_approver(), &clock), &id)
        .await;
    assert_eq!(second.status, Status::Forbidden, "{second:?}");
    assert_eq!(second.reason.as_deref(), Some("requester_stale"));
    assert_eq!(ledger.transfers(), 0, "the stored snapshot does not run");
    let entry = audit.get(second.audit_seq.unwrap()).unwrap();
    assert_eq!(entry.record.reason.as_deref(), Some("requester_stale"));
}

#[tokio::test]
async fn a_refreshed_requester_runs_once() {
    let (d, ledger, clock, _) = stale_harness(true);
    let alice = now_as(alice(), &clock);
    let call = ToolCall::new(
        "w",
        "wire_out",
        json!({"amount": 50, "idempotency_key": "fresh-key-1"}),
    );
    let id = d.dispatch(call, &alice).await.approval.unwrap().approval_id;
    clock.advance(Duration::from_secs(120));
    let first = d
        .approvals()
        .approve(&now_as(bob_approver(), &clock), &id)
        .await;
    assert_eq!(first.status, Status::PendingApproval, "{first:?}");
    let second = d
        .approvals()
        .approve(&now_as(dave_approver(), &clock), &id)
        .await;
    assert_eq!(second.status, Status::Ok, "{second:?}");
    assert_eq!(ledger.transfers(), 1);
}
