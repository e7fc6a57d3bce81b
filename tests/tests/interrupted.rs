//! Work a dead process left half done is settled by whoever meets it next: the call's terminal
//! audit entry is written before its key settles (so a retry never replays an execution that no
//! entry records), a key settled from its operation record, a key abandoned before its operation
//! was recorded freed, a decision that died mid-way reconciled or expired, a decision waiting
//! for the call that opened its request, and a holder past its lease margin that does not run.
//! The crash harness (`tests/crash.rs`) kills real processes at these points; these tests put
//! the stores in the states such a kill leaves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolguard::audit::AuditEvent;
use toolguard::store::{
    ApprovalDecision, ApprovalState, ApprovalStore, FaultyStore, IdempotencyStore, OperationStore,
    ScopedKey, StoreOp,
};
use toolguard::{
    BoxFuture, CustomStage, Dispatcher, ManualClock, MemoryAuditSink, MemoryStore, OperationState,
    Refusal, RiskPolicy, StageInput, StagePoint, Status, ToolCall, ToolOutcome,
};
use toolguard_tests::{Ledger, SlowPayout, alice, bob_approver};

/// Payouts of this many cents or more wait for a human.
const APPROVAL_FROM: u64 = 500;

/// A custom stage that, while switched on, takes longer than the lease margin (5 s).
struct Dawdle(Arc<AtomicBool>);

impl CustomStage for Dawdle {
    fn check<'a>(&'a self, _input: StageInput<'a>) -> BoxFuture<'a, Result<(), Refusal>> {
        Box::pin(async move {
            if self.0.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5_200)).await;
            }
            Ok(())
        })
    }
}

struct H {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
    clock: Arc<ManualClock>,
    store: Arc<FaultyStore<MemoryStore>>,
    dawdle: Arc<AtomicBool>,
}

fn harness() -> H {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
    let dawdle = Arc::new(AtomicBool::new(false));
    let policy = RiskPolicy::new()
        .approver_roles(["approver"])
        .require_approval_when(|_, args, _| {
            args["cents"].as_u64().is_some_and(|c| c >= APPROVAL_FROM)
        });
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(SlowPayout)
        .audit(audit.clone())
        .clock(clock.clone())
        .store(store.clone())
        .policy(policy)
        .custom_stage(StagePoint::AfterPolicy, Dawdle(dawdle.clone()))
        .build()
        .unwrap();
    H {
        d,
        ledger,
        audit,
        clock,
        store,
        dawdle,
    }
}

fn payout(cents: u64, key: &str) -> ToolCall {
    let args = json!({ "cents": cents, "delay_ms": 0, "idempotency_key": key });
    ToolCall::new(format!("c-{key}"), "slow_payout", args)
}

fn scoped(key: &str) -> ScopedKey {
    ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "slow_payout".into(),
        key: key.into(),
    }
}

impl H {
    async fn call(&self, cents: u64, key: &str) -> ToolOutcome {
        self.d.dispatch(payout(cents, key), &alice()).await
    }

    fn runs(&self) -> usize {
        self.ledger.runs.load(Ordering::SeqCst)
    }

    /// The request digest of the last call entry.
    fn last_digest(&self) -> String {
        let entry = self.audit.entries().last().cloned().expect("an entry");
        entry.record.request_digest.expect("a digest")
    }

    /// Puts `key` back in flight under operation `op`, as a holder that has not settled it (or
    /// died) leaves it.
    async fn in_flight(&self, key: &str, digest: &str, op: &str, lease: Duration) {
        let store = self.store.inner();
        let now = self.clock_now();
        if let Some(record) = IdempotencyStore::get(&**store, &scoped(key), now)
            .await
            .unwrap()
        {
            let held = record.operation_id.expect("an operation");
            assert!(store.remove(&scoped(key), &held).await.unwrap());
        }
        let ttl = Duration::from_secs(3600);
        store
            .reserve(&scoped(key), digest, Some(op), lease, ttl, now)
            .await
            .unwrap();
    }

    fn clock_now(&self) -> SystemTime {
        use toolguard::Clock;
        self.clock.now()
    }

    /// A pending payout: its approval id and operation id.
    async fn pending(&self, key: &str) -> (String, String) {
        let out = self.call(700, key).await;
        assert_eq!(out.status, Status::PendingApproval, "{out:?}");
        let id = out.approval.expect("a ticket").approval_id;
        (id, out.operation_id.expect("an operation").to_string())
    }

    /// Moves request `id` to `executing` as a decision does, with no decision time (its
    /// decider is long gone), and sets the operation record's state.
    async fn died_deciding(&self, id: &str, op: &str, state: OperationState) {
        let store = self.store.inner();
        let mut request = ApprovalStore::get(&**store, id).await.unwrap().unwrap();
        let version = request.version;
        request.state = ApprovalState::Executing;
        assert!(store.update(&request, version).await.unwrap());
        let mut record = OperationStore::get(&**store, op).await.unwrap().unwrap();
        record.state = state;
        record.updated_at_ms = 0;
        store.put(record).await.unwrap();
    }

    async fn request_state(&self, id: &str) -> ApprovalState {
        let store = self.store.inner();
        ApprovalStore::get(&**store, id)
            .await
            .unwrap()
            .unwrap()
            .state
    }
}

#[tokio::test]
async fn the_terminal_entry_is_written_before_the_key_is_settled() {
    let h = harness();
    h.store.stall(StoreOp::Complete, Duration::from_millis(300));
    let d = h.d.clone();
    let call = tokio::spawn(async move { d.dispatch(payout(100, "order-1"), &alice()).await });
    tokio::time::sleep(Duration::from_millis(120)).await;
    // The key is still being settled, and the execution is already in the trail.
    assert!(!call.is_finished());
    let entries = h.audit.entries();
    let entry = entries.last().expect("the call's entry");
    assert_eq!(entry.record.event, AuditEvent::Call);
    assert_eq!(entry.record.status, Some(Status::Ok));
    assert!(!entry.record.replayed);
    let out = call.await.unwrap();
    assert_eq!(out.status, Status::Ok, "{out:?}");
    assert_eq!(out.audit_seq, Some(entry.seq));
}

#[tokio::test]
async fn a_key_whose_settlement_was_lost_is_settled_from_the_operation_record() {
    let h = harness();
    // The process "dies" between the operation record and the key: the key stays in flight.
    h.store.fail(StoreOp::Complete);
    let out = h.call(100, "order-2").await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    h.store.heal_all();
    let op = out.operation_id.expect("an operation");
    let retry = h.call(100, "order-2").await;
    assert_eq!(retry.status, Status::InProgress, "{retry:?}");
    // Once the lease ran out, the status query finds the outcome in the record (the retry
    // would find it there too, `idempotency.rs`).
    h.clock.advance(Duration::from_secs(6));
    let report = h.d.operation_status(&alice(), &op).await.unwrap();
    assert_eq!(report.state, OperationState::Ok);
    assert!(!report.reconciled);
    // The record held the outcome: the key holds it now, and retries replay it.
    let retry = h.call(100, "order-2").await;
    assert_eq!(retry.status, Status::Ok, "{retry:?}");
    assert!(retry.replayed);
    assert_eq!(h.runs(), 1);
}

#[tokio::test]
async fn a_key_abandoned_before_its_operation_was_recorded_is_freed() {
    let h = harness();
    let first = h.call(100, "order-3").await;
    assert_eq!(first.status, Status::Ok, "{first:?}");
    let digest = h.last_digest();
    // A holder that died between its reservation and its operation record: nothing ran.
    h.in_flight(
        "order-3",
        &digest,
        "op-never-recorded",
        Duration::from_secs(30),
    )
    .await;
    let retry = h.call(100, "order-3").await;
    assert_eq!(retry.status, Status::InProgress, "{retry:?}");
    h.clock.advance(Duration::from_secs(31));
    let retry = h.call(100, "order-3").await;
    assert_eq!(retry.status, Status::Ok, "{retry:?}");
    assert!(!retry.replayed, "the freed key executes: {retry:?}");
    assert_eq!(h.runs(), 2);
    let record = IdempotencyStore::get(&**h.store.inner(), &scoped("order-3"), h.clock_now()).await;
    let held_by = record.unwrap().unwrap().operation_id.unwrap();
    assert_ne!(held_by, "op-never-recorded");
    // A holder that recorded its operation as executing may have run: `outcome_unknown`.
    let op = retry.operation_id.expect("an operation").to_string();
    h.in_flight("order-3", &digest, &op, Duration::ZERO).await;
    let store = h.store.inner();
    let mut record = OperationStore::get(&**store, &op).await.unwrap().unwrap();
    record.state = OperationState::Executing;
    store.put(record).await.unwrap();
    let retry = h.call(100, "order-3").await;
    assert_eq!(retry.status, Status::OutcomeUnknown, "{retry:?}");
    assert_eq!(h.runs(), 2);
}

#[tokio::test]
async fn a_call_that_opened_a_request_and_died_before_its_key_answers_pending() {
    let h = harness();
    // Killed between the operation record (`pending`) and the key.
    h.store.fail(StoreOp::Complete);
    let first = h.call(700, "order-9").await;
    assert_eq!(first.status, Status::PendingApproval, "{first:?}");
    h.store.heal_all();
    let id = first.approval.expect("a ticket").approval_id;
    h.clock.advance(Duration::from_secs(6));
    let retry = h.call(700, "order-9").await;
    assert_eq!(retry.status, Status::PendingApproval, "{retry:?}");
    assert!(retry.replayed);
    assert_eq!(retry.approval.expect("a ticket").approval_id, id);
    // The key holds the request now: the decision runs it.
    let approved = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(approved.status, Status::Ok, "{approved:?}");
    assert_eq!(h.runs(), 1);
}

#[tokio::test]
async fn a_decision_that_died_while_executing_is_reconciled_and_its_request_closed() {
    let h = harness();
    let (id, op) = h.pending("order-4").await;
    h.died_deciding(&id, &op, OperationState::Executing).await;
    h.ledger.landed.lock().unwrap().insert(op.clone(), 700);
    // The key no longer answers `pending_approval` for good: the operation is to be queried.
    let retry = h.call(700, "order-4").await;
    assert_eq!(retry.status, Status::OutcomeUnknown, "{retry:?}");
    assert_eq!(retry.operation_id.as_deref(), Some(op.as_str()));
    let report = h.d.operation_status(&alice(), &op).await.unwrap();
    assert!(report.reconciled);
    assert_eq!(report.state, OperationState::Ok);
    assert_eq!(h.request_state(&id).await, ApprovalState::Executed);
    let retry = h.call(700, "order-4").await;
    assert_eq!(retry.status, Status::Ok, "{retry:?}");
    assert!(retry.replayed);
    assert_eq!(h.runs(), 0, "reconciled, never run again");
}

#[tokio::test]
async fn a_decision_that_died_before_the_action_ran_expires_its_request() {
    let h = harness();
    let (id, op) = h.pending("order-5").await;
    h.died_deciding(&id, &op, OperationState::Pending).await;
    let retry = h.call(700, "order-5").await;
    assert_eq!(retry.status, Status::ApprovalExpired, "{retry:?}");
    assert_eq!(retry.reason.as_deref(), Some("decision_interrupted"));
    assert_eq!(h.request_state(&id).await, ApprovalState::Expired);
    let again = h.call(700, "order-5").await;
    assert_eq!(again.status, Status::ApprovalExpired, "{again:?}");
    assert_eq!(h.runs(), 0);
}

#[tokio::test]
async fn a_decision_in_progress_keeps_its_request_pending_for_the_caller() {
    let h = harness();
    let (id, op) = h.pending("order-6").await;
    h.died_deciding(&id, &op, OperationState::Executing).await;
    // A decision made just now: its process may still be running the action.
    let store = h.store.inner();
    let mut request = ApprovalStore::get(&**store, &id).await.unwrap().unwrap();
    let version = request.version;
    let at_ms = h
        .clock_now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    request.decisions.push(ApprovalDecision {
        approver: "bob".into(),
        approve: true,
        at_ms,
        digest: String::new(),
        reason: None,
    });
    assert!(store.update(&request, version).await.unwrap());
    let retry = h.call(700, "order-6").await;
    assert_eq!(retry.status, Status::PendingApproval, "{retry:?}");
    // Once the tool's deadline and the lease margin have passed, it is the operation to query.
    h.clock.advance(Duration::from_secs(6));
    let retry = h.call(700, "order-6").await;
    assert_eq!(retry.status, Status::OutcomeUnknown, "{retry:?}");
}

#[tokio::test]
async fn a_decision_waits_for_the_call_that_opened_its_request_to_settle() {
    let h = harness();
    let (id, op) = h.pending("order-7").await;
    let digest = h.last_digest();
    h.in_flight("order-7", &digest, &op, Duration::from_secs(30))
        .await;
    let early = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(early.status, Status::InProgress, "{early:?}");
    assert_eq!(early.reason.as_deref(), Some("request_opening"));
    assert_eq!(h.runs(), 0);
}

#[tokio::test]
async fn a_decision_that_reaches_the_tool_after_its_lease_margin_does_not_run_it() {
    let h = harness();
    let (id, _op) = h.pending("order-8").await;
    h.dawdle.store(true, Ordering::SeqCst);
    let late = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(late.status, Status::Unavailable, "{late:?}");
    assert_eq!(late.reason.as_deref(), Some("lease_spent"));
    assert_eq!(h.runs(), 0, "the tool never ran");
}
