//! Idempotency semantics: replay, conflict, key-wins, exactly-once under concurrency, errors not
//! stored, uncertain outcomes stored, TTL, fail-closed store errors, and key scoping.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolguard::audit::AuditEvent;
use toolguard::audit::Stage;
use toolguard::store::{FaultyStore, StoreOp};
use toolguard::{
    Dispatcher, ManualClock, MemoryAuditSink, MemoryStore, Principal, Status, ToolCall,
};
use toolguard_tests::*;

fn transfer(amount: u64, key: &str) -> serde_json::Value {
    json!({
        "from_account": "acc-alice-1",
        "to_account": "acc-alice-2",
        "amount": amount,
        "currency": "USD",
        "idempotency_key": key,
    })
}

struct H {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
    clock: Arc<ManualClock>,
    store: Arc<FaultyStore<MemoryStore>>,
}

fn harness() -> H {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let clock = Arc::new(ManualClock::new(std::time::SystemTime::now()));
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(GetBalance)
        .tool(CreditPoints)
        .tool(FlakyOnce)
        .tool(SlowPayout)
        .audit(audit.clone())
        .clock(clock.clone())
        .store(store.clone())
        .idempotency_ttl("credit_points", Duration::from_secs(60))
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
    async fn call(&self, tool: &str, args: serde_json::Value) -> toolguard::ToolOutcome {
        self.d
            .dispatch(ToolCall::new("c", tool, args), &alice())
            .await
    }
}

#[tokio::test]
async fn same_key_same_request_replays_without_executing() {
    let h = harness();
    let first = h
        .call("transfer_funds", transfer(1_000, "key-replay-1"))
        .await;
    let second = h
        .call("transfer_funds", transfer(1_000, "key-replay-1"))
        .await;
    assert_eq!((first.status, second.status), (Status::Ok, Status::Ok));
    assert!(!first.replayed && second.replayed);
    assert_eq!(first.output, second.output);
    assert_eq!(
        first.operation_id, second.operation_id,
        "the replay names the original operation"
    );
    assert_eq!(h.ledger.transfers(), 1);
    assert_eq!(h.ledger.balance("acc-alice-2"), 1_000);
    let hit = h.audit.get(second.audit_seq.unwrap()).unwrap();
    assert!(hit.record.replayed);
    assert_eq!(hit.record.stage, Stage::Idempotency);
    assert_eq!(hit.record.event, AuditEvent::Call);
}

#[tokio::test]
async fn same_key_other_request_conflicts() {
    let h = harness();
    assert_eq!(
        h.call("transfer_funds", transfer(1_000, "key-conflict"))
            .await
            .status,
        Status::Ok
    );
    let out = h
        .call("transfer_funds", transfer(2_000, "key-conflict"))
        .await;
    assert_eq!(out.status, Status::IdempotencyConflict);
    assert_eq!(h.ledger.transfers(), 1);
    assert_eq!(h.ledger.balance("acc-alice-2"), 1_000);
    // A different memo is a different request too.
    let mut memo = transfer(1_000, "key-conflict");
    memo["memo"] = json!("rent");
    assert_eq!(
        h.call("transfer_funds", memo).await.status,
        Status::IdempotencyConflict
    );
}

#[tokio::test]
async fn key_wins_returns_the_first_outcome() {
    let h = harness();
    let first = h
        .call(
            "credit_points",
            json!({"points": 10, "idempotency_key": "pts-key-001"}),
        )
        .await;
    let second = h
        .call(
            "credit_points",
            json!({"points": 99, "idempotency_key": "pts-key-001"}),
        )
        .await;
    assert_eq!(first.data(), Some(&json!(10)));
    assert_eq!(second.status, Status::Ok);
    assert!(second.replayed);
    assert_eq!(
        second.data(),
        Some(&json!(10)),
        "the amount of the retry is ignored"
    );
    assert_eq!(h.ledger.runs(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_calls_on_one_key_execute_once() {
    let h = Arc::new(harness());
    let mut tasks = Vec::new();
    for _ in 0..1_000 {
        let h = h.clone();
        tasks.push(tokio::spawn(async move {
            h.call("transfer_funds", transfer(10, "key-storm-0001"))
                .await
                .status
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match t.await.unwrap() {
            Status::Ok => ok += 1,
            Status::InProgress => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert!(ok >= 1);
    assert_eq!(h.ledger.transfers(), 1);
    assert_eq!(h.ledger.balance("acc-alice-2"), 10);
    assert_eq!(h.audit.len(), 1_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hundred_keys_times_a_hundred_tasks_execute_a_hundred_times() {
    let h = Arc::new(harness());
    let mut tasks = Vec::new();
    for task in 0..100 {
        for key in 0..100 {
            let h = h.clone();
            let _ = task;
            tasks.push(tokio::spawn(async move {
                h.call("transfer_funds", transfer(1, &format!("key-grid-{key:04}")))
                    .await
                    .status
            }));
        }
    }
    for t in tasks {
        let s = t.await.unwrap();
        assert!(matches!(s, Status::Ok | Status::InProgress), "{s}");
    }
    assert_eq!(h.ledger.transfers(), 100);
    assert_eq!(h.ledger.balance("acc-alice-2"), 100);
}

#[tokio::test]
async fn handler_errors_are_not_stored() {
    let h = harness();
    let args = json!({"label": "x", "idempotency_key": "flaky-key-01"});
    let first = h.call("flaky_once", args.clone()).await;
    assert_eq!(first.status, Status::Failed);
    let retry = h.call("flaky_once", args).await;
    assert_eq!(retry.status, Status::Ok);
    assert!(!retry.replayed, "the retry executed");
    assert_eq!(h.ledger.runs(), 2);
}

#[tokio::test]
async fn outcome_unknown_is_stored_and_not_blindly_retried() {
    let h = harness();
    let args = json!({"cents": 5, "delay_ms": 1_000, "idempotency_key": "payout-key-1"});
    let first = h.call("slow_payout", args.clone()).await;
    assert_eq!(first.status, Status::OutcomeUnknown);
    let retry = h.call("slow_payout", args).await;
    assert_eq!(retry.status, Status::OutcomeUnknown);
    assert!(retry.replayed);
    assert_eq!(retry.operation_id, first.operation_id);
    assert_eq!(h.ledger.runs(), 1, "the retry did not execute");
}

#[tokio::test]
async fn expired_records_execute_again() {
    let h = harness();
    let args = json!({"points": 5, "idempotency_key": "ttl-key-0001"});
    assert!(!h.call("credit_points", args.clone()).await.replayed);
    h.clock.advance(Duration::from_secs(59));
    assert!(h.call("credit_points", args.clone()).await.replayed);
    h.clock.advance(Duration::from_secs(2));
    let after = h.call("credit_points", args).await;
    assert_eq!(after.status, Status::Ok);
    assert!(!after.replayed);
    assert_eq!(h.ledger.runs(), 2);
}

#[tokio::test]
async fn store_errors_fail_closed() {
    let h = harness();
    h.store.fail(StoreOp::Reserve);
    let out = h
        .call("transfer_funds", transfer(1_000, "key-down-001"))
        .await;
    assert_eq!(out.status, Status::Unavailable);
    assert_eq!(h.ledger.transfers(), 0);
    let e = h.audit.get(out.audit_seq.unwrap()).unwrap();
    assert_eq!(e.record.status, Some(Status::Unavailable));
    assert_eq!(e.record.stage, Stage::Idempotency);

    h.store.heal_all();
    h.store.fail(StoreOp::OperationPut);
    let out = h
        .call("transfer_funds", transfer(1_000, "key-down-002"))
        .await;
    assert_eq!(
        out.status,
        Status::Unavailable,
        "no operation record, no execution"
    );
    assert_eq!(h.ledger.transfers(), 0);

    h.store.heal_all();
    let out = h
        .call("transfer_funds", transfer(1_000, "key-down-002"))
        .await;
    assert_eq!(
        out.status,
        Status::Ok,
        "the key was released, the retry executes"
    );
    assert_eq!(h.ledger.transfers(), 1);
}

#[tokio::test]
async fn keys_are_scoped_by_tenant_and_subject() {
    let h = harness();
    let alice_out = h
        .call(
            "credit_points",
            json!({"points": 1, "idempotency_key": "shared-key-1"}),
        )
        .await;
    let mallory = Principal::new("globex", "alice", "s-m");
    let other_tenant =
        h.d.dispatch(
            ToolCall::new(
                "c",
                "credit_points",
                json!({"points": 2, "idempotency_key": "shared-key-1"}),
            ),
            &mallory,
        )
        .await;
    let bob = Principal::new("acme", "bob", "s-b");
    let other_subject =
        h.d.dispatch(
            ToolCall::new(
                "c",
                "credit_points",
                json!({"points": 3, "idempotency_key": "shared-key-1"}),
            ),
            &bob,
        )
        .await;
    for out in [&alice_out, &other_tenant, &other_subject] {
        assert_eq!(out.status, Status::Ok);
        assert!(!out.replayed, "an independent operation");
    }
    assert_eq!(other_tenant.data(), Some(&json!(2)));
    assert_eq!(other_subject.data(), Some(&json!(3)));
    assert_eq!(h.ledger.runs(), 3);
}

#[tokio::test]
async fn host_supplied_keys_take_precedence_and_are_checked() {
    let h = harness();
    let call = ToolCall::new("c", "transfer_funds", transfer(10, "model-key-01"))
        .with_idempotency_key("host.turn-7.call-1");
    let a = h.d.dispatch(call.clone(), &alice()).await;
    let mut other = call.clone();
    other.arguments = transfer(10, "model-key-02").into();
    let b = h.d.dispatch(other, &alice()).await;
    assert_eq!(a.status, Status::Ok);
    assert_eq!(b.status, Status::Ok);
    assert!(
        b.replayed,
        "the host key identifies the operation, the model's key is ignored"
    );
    let mut changed = call.clone();
    changed.arguments = transfer(11, "model-key-01").into();
    assert_eq!(
        h.d.dispatch(changed, &alice()).await.status,
        Status::IdempotencyConflict
    );
    let bad = call.with_idempotency_key("has spaces and ünicode");
    assert_eq!(
        h.d.dispatch(bad, &alice()).await.status,
        Status::InvalidArguments
    );
    assert_eq!(h.ledger.transfers(), 1);
}

#[tokio::test]
async fn a_retry_replays_even_when_the_first_call_changed_the_state_its_checks_read() {
    let h = harness();
    let bob = Principal::new("acme", "bob", "s-bob");
    let all_of_it = json!({
        "from_account": "acc-bob-1", "to_account": "acc-alice-2", "amount": 500_000,
        "currency": "USD", "idempotency_key": "drain-key-01",
    });
    let first =
        h.d.dispatch(
            ToolCall::new("c", "transfer_funds", all_of_it.clone()),
            &bob,
        )
        .await;
    assert_eq!(first.status, Status::Ok);
    // The account is empty now, so the preflight alone would say precondition_failed.
    let retry =
        h.d.dispatch(
            ToolCall::new("c", "transfer_funds", all_of_it.clone()),
            &bob,
        )
        .await;
    assert_eq!(retry.status, Status::Ok);
    assert!(retry.replayed);
    assert_eq!(retry.output, first.output);
    // A new request on the empty account is still refused.
    let mut fresh = all_of_it.clone();
    fresh["idempotency_key"] = json!("drain-key-02");
    assert_eq!(
        h.d.dispatch(ToolCall::new("c", "transfer_funds", fresh), &bob)
            .await
            .status,
        Status::PreconditionFailed
    );
    // Someone else using the same key sees nothing of bob's outcome.
    let out = h.call("transfer_funds", all_of_it).await;
    assert_eq!(out.status, Status::NotFound);
    assert_eq!(h.ledger.transfers(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_may_wait_for_the_call_that_holds_their_key() {
    let h = Arc::new(harness());
    let args = json!({"cents": 3, "delay_ms": 10, "idempotency_key": "wait-key-001"});
    let mut tasks = Vec::new();
    for i in 0..10 {
        let h = h.clone();
        let args = args.clone();
        tasks.push(tokio::spawn(async move {
            let call = ToolCall::new(format!("c{i}"), "slow_payout", args)
                .wait_in_progress(Duration::from_secs(5));
            h.d.dispatch(call, &alice()).await
        }));
    }
    let mut replayed = 0;
    for t in tasks {
        let out = t.await.unwrap();
        assert_eq!(out.status, Status::Ok, "{out:?}");
        assert_eq!(out.data(), Some(&json!("paid 3")));
        replayed += usize::from(out.replayed);
    }
    assert_eq!(
        replayed, 9,
        "one executes, the others wait and replay its outcome"
    );
    assert_eq!(h.ledger.runs(), 1);
}

#[tokio::test]
async fn a_huge_wait_does_not_overflow() {
    let h = harness();
    let args = json!({"cents": 4, "delay_ms": 0, "idempotency_key": "wait-key-max"});
    let call = ToolCall::new("c", "slow_payout", args).wait_in_progress(Duration::MAX);
    let out = h.d.dispatch(call.clone(), &alice()).await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    let again = h.d.dispatch(call, &alice()).await;
    assert_eq!(again.status, Status::Ok);
    assert!(again.replayed);
    assert_eq!(h.ledger.runs(), 1);
}

/// Transfers over `store` under a session limit of 1,000,000 an hour (denied beyond), so that a
/// second transfer of 600,000 is refused.
fn limited<B>(store: Arc<B>, audit: Arc<MemoryAuditSink>) -> Dispatcher<Ledger>
where
    B: toolguard::store::IdempotencyStore
        + toolguard::store::ApprovalStore
        + toolguard::store::SessionLedger
        + toolguard::store::OperationStore,
{
    use toolguard::{OnExceed, RiskPolicy};
    Dispatcher::builder(Ledger::seeded())
        .tool(TransferFunds)
        .audit(audit)
        .store(store)
        .policy(RiskPolicy::new().session_limit(
            "transfer_funds",
            1_000_000,
            Duration::from_secs(3600),
            OnExceed::Deny,
        ))
        .build()
        .unwrap()
}

/// A retry that a limit would refuse because its own earlier attempt used the room: while that
/// attempt still holds the key the retry is `in_progress`, and once its holder's lease ran out
/// (a process that died after the effect) it is `outcome_unknown`, never `policy_denied`, which
/// would tell the caller that nothing was done.
#[tokio::test]
async fn a_limit_never_hides_the_callers_own_earlier_attempt() {
    use toolguard::store::{IdempotencyStore, OperationStore, ScopedKey};
    let store = Arc::new(MemoryStore::new());
    let audit = Arc::new(MemoryAuditSink::new());
    let d = limited(store.clone(), audit.clone());
    let call = |id: &str| ToolCall::new(id, "transfer_funds", transfer(600_000, "key-held"));
    let first = d.dispatch(call("c1"), &alice()).await;
    assert_eq!(first.status, Status::Ok, "{first:?}");
    let entry = audit.entries().last().cloned().expect("an entry");
    let digest = entry.record.request_digest.clone().expect("a digest");
    let op = entry.record.operation_id.clone().expect("an operation");
    let key = ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        key: "key-held".into(),
    };
    // The record is put back in flight, as a holder that has not stored its outcome yet leaves
    // it (the amount stays booked).
    let hold = |lease: Duration| {
        let (store, key, digest, op) = (store.clone(), key.clone(), digest.clone(), op.clone());
        async move {
            let now = std::time::SystemTime::now();
            assert!(
                IdempotencyStore::get(&*store, &key, now)
                    .await
                    .unwrap()
                    .is_some()
            );
            assert!(store.remove(&key, &op).await.unwrap());
            store
                .reserve(
                    &key,
                    &digest,
                    Some(&op),
                    lease,
                    Duration::from_secs(3600),
                    now,
                )
                .await
                .unwrap();
        }
    };
    // Another request over the limit is refused as before.
    let other = ToolCall::new("c0", "transfer_funds", transfer(600_000, "key-other"));
    assert_eq!(
        d.dispatch(other, &alice()).await.status,
        Status::PolicyDenied
    );

    hold(Duration::from_secs(60)).await;
    let retry = d.dispatch(call("c2"), &alice()).await;
    assert_eq!(retry.status, Status::InProgress, "{retry:?}");

    // A holder that died mid-execution (its operation record still `executing`).
    hold(Duration::ZERO).await;
    let mut record = OperationStore::get(&*store, &op).await.unwrap().unwrap();
    let finished = record.clone();
    record.state = toolguard::OperationState::Executing;
    store.put(record).await.unwrap();
    let after_death = d.dispatch(call("c3"), &alice()).await;
    assert_eq!(
        after_death.status,
        Status::OutcomeUnknown,
        "{after_death:?}"
    );
    assert_eq!(after_death.operation_id.as_deref(), Some(&*op));

    // One that died after its record held the outcome: the key gets it, and it is replayed.
    store.put(finished).await.unwrap();
    let after_record = d.dispatch(call("c4"), &alice()).await;
    assert_eq!(after_record.status, Status::Ok, "{after_record:?}");
    assert!(after_record.replayed);
}

/// A retry that a limit would refuse, while the idempotency store does not answer: the retry
/// cannot learn whether its own earlier attempt ran, so it is `unavailable` (retry), never
/// `policy_denied`; once the store answers, the earlier attempt's outcome is replayed.
#[tokio::test]
async fn a_limit_never_answers_for_a_key_the_store_cannot_look_up() {
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let d = limited(store.clone(), Arc::new(MemoryAuditSink::new()));
    let call = |id: &str| ToolCall::new(id, "transfer_funds", transfer(600_000, "key-looked-up"));
    let first = d.dispatch(call("c1"), &alice()).await;
    assert_eq!(first.status, Status::Ok, "{first:?}");
    store.fail(StoreOp::Reserve);
    let blind = d.dispatch(call("c2"), &alice()).await;
    assert_eq!(blind.status, Status::Unavailable, "{blind:?}");
    assert_eq!(
        blind.reason.as_deref(),
        Some("idempotency_store_unavailable")
    );
    store.heal_all();
    let seen = d.dispatch(call("c3"), &alice()).await;
    assert_eq!(seen.status, Status::Ok, "{seen:?}");
    assert!(seen.replayed);
}

#[tokio::test]
async fn a_refusal_is_kept_under_its_key_so_that_no_attempt_of_the_key_runs_after_it() {
    use toolguard::{OnExceed, RiskPolicy};
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(std::time::SystemTime::now()));
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .audit(Arc::new(MemoryAuditSink::new()))
        .clock(clock.clone())
        .policy(
            RiskPolicy::new()
                .approver_roles(["approver"])
                .session_limit(
                    "transfer_funds",
                    2_000_000,
                    Duration::from_secs(3600),
                    OnExceed::Deny,
                ),
        )
        .build()
        .unwrap();
    let call = |id: &str, amount: u64, key: &str| {
        ToolCall::new(id, "transfer_funds", transfer(amount, key))
    };
    // A large transfer waits for a human and holds 1,500,000 of the session's 2,000,000.
    let held = d
        .dispatch(call("c1", 1_500_000, "key-big-0001"), &alice())
        .await;
    assert_eq!(held.status, Status::PendingApproval, "{held:?}");
    let id = held.approval.expect("a ticket").approval_id;
    let refused = d
        .dispatch(call("c2", 600_000, "key-small-01"), &alice())
        .await;
    assert_eq!(refused.status, Status::PolicyDenied, "{refused:?}");
    // The hold goes away; an attempt of the refused key that was already past its own checks
    // when the refusal was given (here: any attempt within the next five seconds) replays it.
    let rejected = d.approvals().reject(&bob_approver(), &id, "no").await;
    assert_eq!(rejected.status, Status::ApprovalRejected, "{rejected:?}");
    let again = d
        .dispatch(call("c3", 600_000, "key-small-01"), &alice())
        .await;
    assert_eq!(again.status, Status::PolicyDenied, "{again:?}");
    assert!(again.replayed, "{again:?}");
    assert_eq!(ledger.transfers(), 0);
    // Once it lapsed, the key is judged afresh.
    clock.advance(Duration::from_secs(6));
    let later = d
        .dispatch(call("c4", 600_000, "key-small-01"), &alice())
        .await;
    assert_eq!(later.status, Status::Ok, "{later:?}");
    assert!(!later.replayed);
    assert_eq!(ledger.transfers(), 1);
}
