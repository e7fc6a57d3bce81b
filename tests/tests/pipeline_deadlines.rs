//! Every store call on every entry point runs under the dispatcher's store deadline: a stalled
//! approval store or operation store answers `unavailable` within the deadline on `dispatch`,
//! `approve`, `reject`, `operation_status` and reconciliation, and nothing executes. The stores
//! are each backend's real stores (memory, SQLite, PostgreSQL) behind the `FaultyStore` wrapper.

mod store_support;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use store_support::{Backend, SharedAudit};
use toolguard::store::{
    ApprovalRequest, ApprovalStore, FaultyStore, IdempotencyStore, OperationRecord, OperationState,
    OperationStore, ScopedKey, StoreOp, StoreResult,
};
use toolguard::{Dispatcher, MemoryAuditSink, OperationError, Status, ToolCall, ToolOutcome};
use toolguard_tests::delegate::{Delegate, Hook};
use toolguard_tests::*;

/// The deadline the dispatchers of these tests are built with.
const DEADLINE: Duration = Duration::from_millis(300);
/// A stall far longer than any test runs.
const STALL: Duration = Duration::from_secs(600);

struct Fx {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    faulty: Arc<FaultyStore<Delegate>>,
    name: &'static str,
}

fn fixture(b: &Backend) -> Option<Fx> {
    let (Some(approvals), Some(operations)) = (b.approvals.clone(), b.operations.clone()) else {
        return None;
    };
    // One backend's stores as one value, so that `FaultyStore` can wrap them all.
    let shared = Delegate {
        idempotency: b.idem.clone(),
        ledger: b.ledger.clone(),
        approvals,
        operations,
        hook: (),
    };
    let faulty = Arc::new(FaultyStore::new(Arc::new(shared)));
    let ledger = Arc::new(Ledger::seeded());
    let audit = match &b.audit {
        Some(a) => SharedAudit(a.clone()),
        None => SharedAudit(Arc::new(MemoryAuditSink::new())),
    };
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(SlowPayout)
        .store(faulty.clone())
        .store_deadline(DEADLINE)
        .audit(audit)
        .build()
        .expect("dispatcher");
    Some(Fx {
        d,
        ledger,
        faulty,
        name: b.name,
    })
}

fn transfer(amount: u64, key: &str) -> serde_json::Value {
    json!({
        "from_account": "acc-alice-1",
        "to_account": "acc-bob-1",
        "amount": amount,
        "currency": "USD",
        "idempotency_key": key,
    })
}

impl Fx {
    /// A transfer over the approval threshold: its pending request's id.
    async fn pending(&self, key: &str) -> String {
        let call = ToolCall::new("call-big", "transfer_funds", transfer(1_500_000, key));
        let out = self.d.dispatch(call, &alice()).await;
        assert_eq!(
            out.status,
            Status::PendingApproval,
            "{}: {out:?}",
            self.name
        );
        out.approval.expect("ticket").approval_id
    }

    /// `run` answers within a few deadlines (not after the stall), and its answer.
    async fn timed<T>(&self, run: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let answer = run.await;
        assert!(
            started.elapsed() < DEADLINE * 5,
            "{}: answered after {:?}, not within the store deadline",
            self.name,
            started.elapsed()
        );
        answer
    }

    fn assert_unavailable(&self, out: &ToolOutcome, reason: &str) {
        assert_eq!(out.status, Status::Unavailable, "{}: {out:?}", self.name);
        assert_eq!(
            out.reason.as_deref(),
            Some(reason),
            "{}: {out:?}",
            self.name
        );
        assert_eq!(
            self.ledger.transfers(),
            0,
            "{}: nothing executed",
            self.name
        );
        assert!(out.audit_seq.is_some(), "{}: an audit entry", self.name);
    }
}

async fn dispatch_with_stalled_approval_create(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    f.faulty.stall(StoreOp::ApprovalCreate, STALL);
    let call = ToolCall::new("c", "transfer_funds", transfer(1_500_000, "dl-create-01"));
    let out = f.timed(f.d.dispatch(call, &alice())).await;
    f.assert_unavailable(&out, "approval_store_unavailable");
}

async fn approve_with_stalled_approval_get(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    let id = f.pending("dl-get-0001").await;
    f.faulty.stall(StoreOp::ApprovalGet, STALL);
    let out = f.timed(f.d.approvals().approve(&bob_approver(), &id)).await;
    f.assert_unavailable(&out, "approval_store_unavailable");
    f.faulty.heal_all();
    let approved = f.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(approved.status, Status::Ok, "{}: {approved:?}", f.name);
    assert_eq!(f.ledger.transfers(), 1);
}

async fn approve_with_stalled_approval_update(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    let id = f.pending("dl-update-01").await;
    f.faulty.stall(StoreOp::ApprovalUpdate, STALL);
    let out = f.timed(f.d.approvals().approve(&bob_approver(), &id)).await;
    f.assert_unavailable(&out, "approval_store_unavailable");
}

async fn reject_with_stalled_approval_store(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    let id = f.pending("dl-reject-01").await;
    f.faulty.stall(StoreOp::ApprovalGet, STALL);
    let out = f
        .timed(f.d.approvals().reject(&bob_approver(), &id, "no"))
        .await;
    f.assert_unavailable(&out, "approval_store_unavailable");
    f.faulty.heal_all();
    f.faulty.stall(StoreOp::ApprovalUpdate, STALL);
    // The rejection could not be stored: the request stays pending, nothing is settled.
    let out = f
        .timed(f.d.approvals().reject(&bob_approver(), &id, "no"))
        .await;
    f.assert_unavailable(&out, "approval_store_unavailable");
    f.faulty.heal_all();
    let pending = f.d.approvals().pending(&bob_approver()).await.unwrap();
    assert!(
        pending.iter().any(|r| r.id == id),
        "{}: still pending",
        f.name
    );
}

async fn pending_with_stalled_approval_store(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    f.faulty.stall(StoreOp::ApprovalPending, STALL);
    let listed = f.timed(f.d.approvals().pending(&bob_approver())).await;
    assert!(listed.is_err(), "{}: a store error, not a hang", f.name);
}

async fn retry_of_pending_call_with_stalled_approval_store(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    let id = f.pending("dl-replay-01").await;
    f.faulty.stall(StoreOp::ApprovalGet, STALL);
    let call = ToolCall::new(
        "call-big",
        "transfer_funds",
        transfer(1_500_000, "dl-replay-01"),
    );
    let retry = f.timed(f.d.dispatch(call, &alice())).await;
    assert_eq!(
        retry.status,
        Status::PendingApproval,
        "{}: {retry:?}",
        f.name
    );
    assert_eq!(retry.approval.unwrap().approval_id, id);
}

async fn dispatch_with_stalled_operation_put(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    f.faulty.stall(StoreOp::OperationPut, STALL);
    let call = ToolCall::new("c", "transfer_funds", transfer(1_000, "dl-put-0001"));
    let out = f.timed(f.d.dispatch(call, &alice())).await;
    f.assert_unavailable(&out, "operation_store_unavailable");
}

async fn status_with_stalled_operation_get(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    let call = ToolCall::new("c", "transfer_funds", transfer(1_000, "dl-opget-01"));
    let out = f.d.dispatch(call, &alice()).await;
    assert_eq!(out.status, Status::Ok, "{}: {out:?}", f.name);
    let op = out.operation_id.expect("operation id");
    f.faulty.stall(StoreOp::OperationGet, STALL);
    let report = f.timed(f.d.operation_status(&alice(), &op)).await;
    assert_eq!(report, Err(OperationError::Unavailable), "{}", f.name);
    f.faulty.heal_all();
    let report = f.d.operation_status(&alice(), &op).await.expect("report");
    assert_eq!(report.state, OperationState::Ok, "{}", f.name);
}

async fn reconciliation_with_stalled_stores(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    let args = json!({"cents": 7, "delay_ms": 500, "idempotency_key": "dl-recon-01"});
    let out =
        f.d.dispatch(ToolCall::new("c", "slow_payout", args), &alice())
            .await;
    assert_eq!(out.status, Status::OutcomeUnknown, "{}: {out:?}", f.name);
    let op = out.operation_id.expect("operation id");
    f.ledger.landed.lock().unwrap().insert(op.to_string(), 7);
    // The resolved outcome cannot be settled: the query still answers within the deadline.
    f.faulty.stall(StoreOp::Replace, STALL);
    f.faulty.stall(StoreOp::OperationPut, STALL);
    let report = f.timed(f.d.operation_status(&alice(), &op)).await;
    assert!(report.is_ok(), "{}: {report:?}", f.name);
    f.faulty.heal_all();
    // Nothing was stored, so the next query reconciles again; the operation store stalling on
    // the load answers unavailable.
    f.faulty.stall(StoreOp::OperationGet, STALL);
    let report = f.timed(f.d.operation_status(&alice(), &op)).await;
    assert_eq!(report, Err(OperationError::Unavailable), "{}", f.name);
    f.faulty.heal_all();
    let report = f.d.operation_status(&alice(), &op).await.expect("report");
    assert_eq!(
        (report.state, report.reconciled),
        (OperationState::Ok, true),
        "{}",
        f.name
    );
}

/// A reconciled operation whose record cannot be written leaves its key as it was: the key's
/// outcome is never stored before the record that says the same, so a retry does not replay a
/// reconciled outcome the operation record does not hold. Once the store answers, the record
/// holds it, and the key follows.
async fn reconciliation_settles_the_key_after_its_record(b: Arc<Backend>) {
    let Some(f) = fixture(&b) else { return };
    let args = json!({"cents": 9, "delay_ms": 500, "idempotency_key": "dl-recon-02"});
    let call = || ToolCall::new("c", "slow_payout", args.clone());
    let out = f.d.dispatch(call(), &alice()).await;
    assert_eq!(out.status, Status::OutcomeUnknown, "{}: {out:?}", f.name);
    let op = out.operation_id.expect("operation id");
    f.ledger.landed.lock().unwrap().insert(op.to_string(), 9);
    f.faulty.stall(StoreOp::OperationPut, STALL);
    let report = f.timed(f.d.operation_status(&alice(), &op)).await;
    let report = report.expect("report");
    assert_eq!(report.state, OperationState::Ok, "{}", f.name);
    let retried = f.timed(f.d.dispatch(call(), &alice())).await;
    assert_ne!(
        retried.status,
        Status::Ok,
        "{}: the key replayed the reconciled outcome before the record held it: {retried:?}",
        f.name
    );
    f.faulty.heal_all();
    let report = f.d.operation_status(&alice(), &op).await.expect("report");
    assert_eq!(report.state, OperationState::Ok, "{}", f.name);
    let replayed = f.d.dispatch(call(), &alice()).await;
    assert_eq!(
        (replayed.status, replayed.replayed),
        (Status::Ok, true),
        "{}: {replayed:?}",
        f.name
    );
}

macro_rules! on_backends {
    ($($test:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test]
                async fn $test() {
                    let backend = crate::store_support::memory(stringify!($test)).await;
                    crate::store_support::run(backend, super::$test).await;
                }
            )*
        }
        #[cfg(feature = "sqlite")]
        mod sqlite {
            $(
                #[tokio::test]
                async fn $test() {
                    let backend = crate::store_support::sqlite(stringify!($test)).await;
                    crate::store_support::run(backend, super::$test).await;
                }
            )*
        }
        #[cfg(feature = "postgres")]
        mod postgres {
            $(
                #[tokio::test]
                #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
                async fn $test() {
                    let backend = crate::store_support::postgres(stringify!($test)).await;
                    crate::store_support::run(backend, super::$test).await;
                }
            )*
        }
    };
}

on_backends!(
    dispatch_with_stalled_approval_create,
    approve_with_stalled_approval_get,
    approve_with_stalled_approval_update,
    reject_with_stalled_approval_store,
    pending_with_stalled_approval_store,
    retry_of_pending_call_with_stalled_approval_store,
    dispatch_with_stalled_operation_put,
    status_with_stalled_operation_get,
    reconciliation_with_stalled_stores,
    reconciliation_settles_the_key_after_its_record,
);

/// Fails the writes that mark an approval request `executed` while `down` is set (a store
/// that stays down past the deadline after the action ran).
#[derive(Default)]
struct ExecutedDown {
    down: std::sync::atomic::AtomicBool,
}

impl Hook for ExecutedDown {
    fn updating(&self, request: &ApprovalRequest) -> StoreResult<()> {
        let down = self.down.load(std::sync::atomic::Ordering::SeqCst);
        if down && request.state == toolguard::store::ApprovalState::Executed {
            return Err(toolguard::store::StoreError::new("down".to_owned()));
        }
        Ok(())
    }
}

/// A dispatcher of `transfer_funds` and `credit_points` on `memory`'s stores, one of them swapped
/// (or anything else set) by `swap`, and the seeded ledger its tools work on.
fn on_memory(
    memory: &Arc<toolguard::MemoryStore>,
    swap: impl FnOnce(toolguard::DispatcherBuilder<Ledger>) -> toolguard::DispatcherBuilder<Ledger>,
) -> (Dispatcher<Ledger>, Arc<Ledger>) {
    let ledger = Arc::new(Ledger::seeded());
    let builder = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(CreditPoints)
        .store(memory.clone())
        .store_deadline(DEADLINE)
        .audit(MemoryAuditSink::new());
    (swap(builder).build().expect("dispatcher"), ledger)
}

/// The transfer over the approval threshold under `key`, approved by bob: the request's id, once
/// the action ran (within a few store deadlines, whatever the stores do after it).
async fn approved_transfer(d: &Dispatcher<Ledger>, ledger: &Ledger, key: &str) -> String {
    let call = ToolCall::new("call-big", "transfer_funds", transfer(1_500_000, key));
    let out = d.dispatch(call, &alice()).await;
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    let id = out.approval.expect("ticket").approval_id;
    let started = Instant::now();
    let approved = d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(approved.status, Status::Ok, "{approved:?}");
    assert!(
        started.elapsed() < DEADLINE * 5,
        "answered without waiting for the store"
    );
    assert_eq!(ledger.transfers(), 1);
    id
}

/// An approved action ran, and its request could not be marked `executed` within the store
/// deadline: the decision answers `ok` without waiting longer, and the request is marked in the
/// background once the store answers again (no one need ask about it).
#[tokio::test]
async fn a_request_marked_executed_after_the_deadline_is_marked_once_the_store_is_back() {
    let memory = Arc::new(toolguard::MemoryStore::new());
    let down = ExecutedDown::default();
    down.down.store(true, std::sync::atomic::Ordering::SeqCst);
    let approvals = Arc::new(Delegate::of(memory.clone()).hook(down));
    let (d, ledger) = on_memory(&memory, |b| b.approval_store(approvals.clone()));
    let id = approved_transfer(&d, &ledger, "dl-late-0001").await;
    let state = |memory: Arc<toolguard::MemoryStore>, id: String| async move {
        ApprovalStore::get(&*memory, &id)
            .await
            .unwrap()
            .unwrap()
            .state
    };
    // Still down: the request is left executing, and tried again.
    tokio::time::sleep(DEADLINE * 2).await;
    assert_eq!(
        state(memory.clone(), id.clone()).await,
        toolguard::store::ApprovalState::Executing
    );
    approvals
        .hook
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let back = Instant::now();
    loop {
        let now = state(memory.clone(), id.clone()).await;
        if now == toolguard::store::ApprovalState::Executed {
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "the request is still {now:?} after the store came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(ledger.transfers(), 1, "nothing ran twice");
}

/// Fails the writes of a finished operation record (`ok`, `failed`) while `down` is set; the
/// records written before an action runs go through.
#[derive(Default)]
struct FinishedRecordDown {
    down: std::sync::atomic::AtomicBool,
}

impl Hook for FinishedRecordDown {
    fn putting(&self, record: &OperationRecord) -> StoreResult<()> {
        let finished = matches!(record.state, OperationState::Ok | OperationState::Failed);
        if finished && self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(toolguard::store::StoreError::new("down".to_owned()));
        }
        Ok(())
    }
}

/// An approved action ran and its operation record could not be written in time: the request is
/// marked `executed`, but the call's key keeps its pending outcome rather than an outcome the
/// record does not hold. Once the record is written (in the background), a retry of the call
/// answers the action's outcome from it.
#[tokio::test]
async fn an_approved_action_whose_record_is_late_leaves_its_key_to_the_record() {
    let memory = Arc::new(toolguard::MemoryStore::new());
    let down = FinishedRecordDown::default();
    down.down.store(true, std::sync::atomic::Ordering::SeqCst);
    let operations = Arc::new(Delegate::of(memory.clone()).hook(down));
    let (d, ledger) = on_memory(&memory, |b| b.operation_store(operations.clone()));
    approved_transfer(&d, &ledger, "dl-late-record-01").await;
    let key = ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        key: "dl-late-record-01".into(),
    };
    let stored = |memory: Arc<toolguard::MemoryStore>, key: ScopedKey| async move {
        IdempotencyStore::get(&*memory, &key, SystemTime::now())
            .await
            .unwrap()
            .and_then(|r| match r.state {
                toolguard::store::RecordState::Done { outcome } => Some(outcome.status),
                toolguard::store::RecordState::InFlight { .. } => None,
            })
    };
    assert_eq!(
        stored(memory.clone(), key.clone()).await,
        Some(Status::PendingApproval),
        "the key was settled before the record that says the same"
    );
    operations
        .hook
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let back = Instant::now();
    loop {
        let call = ToolCall::new(
            "call-big",
            "transfer_funds",
            transfer(1_500_000, "dl-late-record-01"),
        );
        let retried = d.dispatch(call, &alice()).await;
        if retried.status == Status::Ok {
            assert!(retried.replayed, "{retried:?}");
            break;
        }
        assert!(
            back.elapsed() < Duration::from_secs(5),
            "the retry still answers {retried:?} after the store came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ledger.transfers(), 1, "nothing ran twice");
    assert_eq!(
        stored(memory.clone(), key).await,
        Some(Status::Ok),
        "the key follows its record"
    );
}

/// A call that ran and stored its outcome under its key, but whose final operation record was
/// not written (and its process then died: the record stays `executing`): a status query past
/// the call's lease answers the outcome under the key, for a tool that cannot reconcile, and
/// writes it into the record.
#[tokio::test]
async fn a_status_query_takes_the_outcome_a_call_left_under_its_key() {
    let memory = Arc::new(toolguard::MemoryStore::new());
    let down = FinishedRecordDown::default();
    down.down.store(true, std::sync::atomic::Ordering::SeqCst);
    let operations = Arc::new(Delegate::of(memory.clone()).hook(down));
    let clock = Arc::new(toolguard::ManualClock::new(SystemTime::now()));
    let (d, ledger) = on_memory(&memory, |b| {
        b.operation_store(operations.clone()).clock(clock.clone())
    });
    let args = json!({"points": 40, "idempotency_key": "dl-kept-01"});
    let out = d
        .dispatch(ToolCall::new("c", "credit_points", args), &alice())
        .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    let op = out.operation_id.expect("operation id");
    let stored = OperationStore::get(&*memory, &op)
        .await
        .unwrap()
        .expect("record");
    assert_eq!(
        stored.state,
        OperationState::Executing,
        "the final record was refused"
    );
    // The process is gone; the store takes writes again.
    operations
        .hook
        .down
        .store(false, std::sync::atomic::Ordering::SeqCst);
    clock.advance(Duration::from_secs(120));
    let report = d.operation_status(&alice(), &op).await.expect("report");
    assert_eq!(report.state, OperationState::Ok, "{report:?}");
    assert_eq!(
        report.outcome.and_then(|o| o.output),
        Some(json!(40)),
        "the call's own result"
    );
    let stored = OperationStore::get(&*memory, &op)
        .await
        .unwrap()
        .expect("record");
    assert_eq!(stored.state, OperationState::Ok, "the record now says it");
    assert_eq!(ledger.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
}
