//! One conformance suite for every store backend: the same test functions run against memory,
//! SQLite (feature `sqlite`), PostgreSQL (feature `postgres`, `TOOLGUARD_PG_URL`) and Redis
//! (feature `redis`, `TOOLGUARD_REDIS_URL`). Redis provides idempotency and ledgers only; the
//! approval, operation and audit tests skip it.

mod store_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::json;
use store_support::{Backend, SharedAudit, TamperKind};
use toolguard::audit::{AuditEvent, AuditRecord, ChainBreak, VerifyError};
use toolguard::store::{
    ApprovalRequest, ApprovalState, FaultyStore, IdempotencyStore, OperationRecord, OperationState,
    RecordState, Reservation, ScopeLimit, ScopedKey, StoreOp, StoredOutcome,
};
use toolguard::{
    Dispatcher, ManualClock, MemoryAuditSink, Principal, RiskPolicy, Status, ToolCall,
};
use toolguard_tests::*;

const LEASE: Duration = Duration::from_secs(10);
const TTL: Duration = Duration::from_secs(3600);

fn key(k: &str) -> ScopedKey {
    ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        key: k.into(),
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

struct H {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    clock: Arc<ManualClock>,
    audit: Arc<dyn store_support::AuditBackend>,
}

fn harness_with(b: &Backend, idem: Arc<dyn IdempotencyStore>, fail_open: bool) -> H {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let audit: Arc<dyn store_support::AuditBackend> = match &b.audit {
        Some(a) => a.clone(),
        None => Arc::new(MemoryAuditSink::new()),
    };
    let mut builder = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(GetBalance)
        .tool(CreditPoints)
        .tool(SlowPayout)
        .tool(HangingPayout)
        .tool(CrashingPayout)
        .audit(SharedAudit(audit.clone()))
        .clock(clock.clone())
        .idempotency_store(idem)
        .session_ledger(b.ledger.clone())
        .policy(RiskPolicy::new().approver_roles(["approver"]))
        .idempotency_ttl("credit_points", Duration::from_secs(60))
        .fail_open_read_only(fail_open);
    if let Some(a) = &b.approvals {
        builder = builder.approval_store(a.clone());
    }
    if let Some(o) = &b.operations {
        builder = builder.operation_store(o.clone());
    }
    H {
        d: builder.build().expect("dispatcher"),
        ledger,
        clock,
        audit,
    }
}

fn harness(b: &Backend) -> H {
    harness_with(b, b.idem.clone(), false)
}

impl H {
    async fn call(&self, tool: &str, args: serde_json::Value) -> toolguard::ToolOutcome {
        self.d
            .dispatch(ToolCall::new("c", tool, args), &alice())
            .await
    }
}

// ---------------------------------------------------------------- idempotency, raw trait

async fn reserve_complete_replay(b: Arc<Backend>) {
    let s = &b.idem;
    let now = SystemTime::now();
    let k = key("raw-1");
    let owner = match s
        .reserve(&k, "d1", Some("op-1"), LEASE, TTL, now)
        .await
        .unwrap()
    {
        Reservation::Reserved { owner } => owner,
        other => panic!("{}: expected a reservation, got {other:?}", b.name),
    };
    match s
        .reserve(&k, "d1", Some("op-2"), LEASE, TTL, now)
        .await
        .unwrap()
    {
        Reservation::Existing(r) => {
            assert_eq!(r.request_digest, "d1");
            assert_eq!(r.operation_id.as_deref(), Some("op-1"));
            assert!(matches!(r.state, RecordState::InFlight { owner: ref o, .. } if *o == owner));
        }
        other => panic!("{}: {other:?}", b.name),
    }
    let mut out = StoredOutcome::new(Status::Ok);
    out.output = Some(json!({"paid": 5}));
    out.operation_id = Some("op-1".into());
    assert!(
        !s.complete(&k, "not-the-owner", out.clone(), TTL, now)
            .await
            .unwrap()
    );
    // Neither a part of the owner's token nor one longer completes the record.
    for other in [&owner[..owner.len() - 1], &format!("{owner}0"), ""] {
        assert!(!s.complete(&k, other, out.clone(), TTL, now).await.unwrap());
    }
    assert!(s.complete(&k, &owner, out.clone(), TTL, now).await.unwrap());
    assert!(
        !s.complete(&k, &owner, out.clone(), TTL, now).await.unwrap(),
        "a done record is not completed twice"
    );
    let rec = s.get(&k, now).await.unwrap().expect("record");
    assert_eq!(
        rec.state,
        RecordState::Done {
            outcome: out.clone()
        }
    );
    // Completing keeps what the reservation recorded.
    assert_eq!(rec.request_digest, "d1", "{}", b.name);
    assert_eq!(rec.operation_id.as_deref(), Some("op-1"), "{}", b.name);
    match s.reserve(&k, "d2", None, LEASE, TTL, now).await.unwrap() {
        Reservation::Existing(r) => {
            assert_eq!(
                r.request_digest, "d1",
                "the conflict is visible to the caller"
            );
            assert_eq!(r.state, RecordState::Done { outcome: out });
        }
        other => panic!("{}: {other:?}", b.name),
    }
}

async fn release_renew_replace_remove(b: Arc<Backend>) {
    let s = &b.idem;
    let now = SystemTime::now();
    let k = key("raw-2");
    let Reservation::Reserved { owner } = s.reserve(&k, "d", None, LEASE, TTL, now).await.unwrap()
    else {
        panic!("reserve")
    };
    assert!(!s.renew(&k, "other", LEASE, now).await.unwrap());
    assert!(
        s.renew(&k, &owner, Duration::from_secs(60), now)
            .await
            .unwrap()
    );
    match s.get(&k, now).await.unwrap().unwrap().state {
        RecordState::InFlight { lease_until_ms, .. } => {
            assert!(lease_until_ms >= toolguard::clock::unix_millis(now) + 59_000)
        }
        other => panic!("{other:?}"),
    }
    assert!(!s.release(&k, "other").await.unwrap());
    assert!(s.release(&k, &owner).await.unwrap());
    assert!(s.get(&k, now).await.unwrap().is_none());
    assert!(matches!(
        s.reserve(&k, "d", Some("op-r2"), LEASE, TTL, now)
            .await
            .unwrap(),
        Reservation::Reserved { .. }
    ));
    let mut out = StoredOutcome::new(Status::ApprovalRejected);
    out.reason = Some("rejected".into());
    assert!(s.replace(&k, "op-r2", out.clone(), TTL, now).await.unwrap());
    assert_eq!(
        s.get(&k, now).await.unwrap().unwrap().state,
        RecordState::Done { outcome: out }
    );
    assert!(s.remove(&k, "op-r2").await.unwrap());
    assert!(s.get(&k, now).await.unwrap().is_none());
    // Replacing a missing record is a no-op.
    assert!(
        !s.replace(
            &key("raw-missing"),
            "op-r2",
            StoredOutcome::new(Status::Ok),
            TTL,
            now,
        )
        .await
        .unwrap()
    );
    assert!(s.get(&key("raw-missing"), now).await.unwrap().is_none());
    assert!(!s.remove(&key("raw-missing"), "op-r2").await.unwrap());
}

/// Reconciliation or an approval closing for an old operation must leave alone the record of a
/// newer call that re-reserved the key after the old record expired.
async fn replace_remove_only_own_operation(b: Arc<Backend>) {
    let s = &b.idem;
    let t0 = SystemTime::now();
    let k = key("raw-owner");
    let short = Duration::from_secs(1);
    assert!(matches!(
        s.reserve(&k, "d", Some("op-old"), short, short, t0)
            .await
            .unwrap(),
        Reservation::Reserved { .. }
    ));
    let t1 = t0 + Duration::from_secs(5);
    let Reservation::Reserved { owner } = s
        .reserve(&k, "d", Some("op-new"), LEASE, TTL, t1)
        .await
        .unwrap()
    else {
        panic!("{}: the expired key is reserved again", b.name)
    };
    let in_flight = s.get(&k, t1).await.unwrap().expect("the newer record");
    assert!(
        !s.replace(&k, "op-old", StoredOutcome::new(Status::Ok), TTL, t1)
            .await
            .unwrap(),
        "{}: another operation's record is not overwritten",
        b.name
    );
    assert!(
        !s.remove(&k, "op-old").await.unwrap(),
        "{}: another operation's record is not deleted",
        b.name
    );
    assert_eq!(s.get(&k, t1).await.unwrap().as_ref(), Some(&in_flight));
    assert!(matches!(
        in_flight.state,
        RecordState::InFlight { owner: ref o, .. } if *o == owner
    ));
    assert_eq!(in_flight.operation_id.as_deref(), Some("op-new"));
    let out = StoredOutcome::new(Status::Ok);
    assert!(s.complete(&k, &owner, out.clone(), TTL, t1).await.unwrap());
    assert!(
        s.remove(&k, "op-new").await.unwrap(),
        "its own operation may"
    );
    assert!(s.get(&k, t1).await.unwrap().is_none());
}

async fn lease_expiry_and_take_over(b: Arc<Backend>) {
    let s = &b.idem;
    let t0 = SystemTime::now();
    let k = key("raw-3");
    let Reservation::Reserved { owner: first } = s
        .reserve(&k, "d", Some("op"), Duration::from_secs(1), TTL, t0)
        .await
        .unwrap()
    else {
        panic!("reserve")
    };
    assert_eq!(
        s.take_over(&k, LEASE, t0).await.unwrap(),
        None,
        "lease still live"
    );
    let t1 = t0 + Duration::from_secs(2);
    let second = s
        .take_over(&k, LEASE, t1)
        .await
        .unwrap()
        .expect("taken over");
    assert_ne!(second, first);
    assert_eq!(
        s.take_over(&k, LEASE, t1).await.unwrap(),
        None,
        "the new lease is live"
    );
    // The replica whose lease expired can neither complete, renew nor release.
    let out = StoredOutcome::new(Status::Ok);
    assert!(!s.complete(&k, &first, out.clone(), TTL, t1).await.unwrap());
    assert!(!s.renew(&k, &first, LEASE, t1).await.unwrap());
    assert!(!s.release(&k, &first).await.unwrap());
    assert!(s.complete(&k, &second, out.clone(), TTL, t1).await.unwrap());
    assert_eq!(
        s.get(&k, t1).await.unwrap().unwrap().state,
        RecordState::Done { outcome: out }
    );
    assert_eq!(
        s.take_over(&k, LEASE, t1 + LEASE * 2).await.unwrap(),
        None,
        "done records stay"
    );
}

async fn ttl_expiry(b: Arc<Backend>) {
    let s = &b.idem;
    let t0 = SystemTime::now();
    let k = key("raw-4");
    let ttl = Duration::from_secs(10);
    let Reservation::Reserved { owner } = s.reserve(&k, "d", None, LEASE, ttl, t0).await.unwrap()
    else {
        panic!("reserve")
    };
    assert!(
        s.complete(&k, &owner, StoredOutcome::new(Status::Ok), ttl, t0)
            .await
            .unwrap()
    );
    assert!(
        s.get(&k, t0 + Duration::from_secs(9))
            .await
            .unwrap()
            .is_some()
    );
    let later = t0 + Duration::from_secs(11);
    assert!(s.get(&k, later).await.unwrap().is_none(), "expired");
    assert!(
        matches!(
            s.reserve(&k, "other", None, LEASE, ttl, later)
                .await
                .unwrap(),
            Reservation::Reserved { .. }
        ),
        "an expired record counts as absent"
    );
}

/// A TTL shorter than the lease never frees a key mid-flight, neither at reservation nor after
/// a renewal or take-over that extends the lease.
async fn ttl_never_before_lease(b: Arc<Backend>) {
    let s = &b.idem;
    let t0 = SystemTime::now();
    let k = key("raw-short-ttl");
    let secs = Duration::from_secs;
    let Reservation::Reserved { owner } = s
        .reserve(&k, "d", Some("op-a"), secs(10), secs(1), t0)
        .await
        .unwrap()
    else {
        panic!("reserve")
    };
    let mid = t0 + secs(5);
    let rec = s.get(&k, mid).await.unwrap();
    assert!(
        rec.as_ref()
            .is_some_and(|r| r.expires_at_ms >= toolguard::clock::unix_millis(t0 + secs(10))),
        "{}: {rec:?}",
        b.name
    );
    assert!(
        matches!(
            s.reserve(&k, "d", Some("op-b"), secs(10), secs(1), mid)
                .await
                .unwrap(),
            Reservation::Existing(_)
        ),
        "{}: the key is still held",
        b.name
    );
    // A renewal past the expiry keeps the record for the new lease.
    assert!(s.renew(&k, &owner, secs(20), mid).await.unwrap());
    assert!(
        s.get(&k, t0 + secs(20)).await.unwrap().is_some(),
        "{}",
        b.name
    );
    assert!(
        s.get(&k, t0 + secs(26)).await.unwrap().is_none(),
        "{}",
        b.name
    );
    // A take-over keeps the record for the taker's lease too.
    let k2 = key("raw-short-ttl-2");
    assert!(matches!(
        s.reserve(&k2, "d", Some("op-c"), secs(1), secs(3), t0)
            .await
            .unwrap(),
        Reservation::Reserved { .. }
    ));
    let taker = s.take_over(&k2, secs(10), t0 + secs(2)).await.unwrap();
    assert!(taker.is_some(), "{}: expired lease taken over", b.name);
    assert!(
        s.get(&k2, t0 + secs(8)).await.unwrap().is_some(),
        "{}",
        b.name
    );
    assert!(
        s.get(&k2, t0 + secs(13)).await.unwrap().is_none(),
        "{}",
        b.name
    );
}

async fn concurrent_reserve_one_winner(b: Arc<Backend>) {
    let now = SystemTime::now();
    let mut tasks = Vec::new();
    for _ in 0..64 {
        let s = b.idem.clone();
        tasks.push(tokio::spawn(async move {
            matches!(
                s.reserve(&key("raw-storm"), "d", None, LEASE, TTL, now)
                    .await
                    .unwrap(),
                Reservation::Reserved { .. }
            )
        }));
    }
    let mut winners = 0;
    for t in tasks {
        winners += t.await.unwrap() as usize;
    }
    assert_eq!(winners, 1, "{}: exactly one winner", b.name);
}

// ---------------------------------------------------------------- idempotency, dispatcher

async fn dispatch_replay_and_conflict(b: Arc<Backend>) {
    let h = harness(&b);
    let first = h.call("transfer_funds", transfer(1_000, "dkey-0001")).await;
    let second = h.call("transfer_funds", transfer(1_000, "dkey-0001")).await;
    assert_eq!(
        (first.status, second.status),
        (Status::Ok, Status::Ok),
        "{first:?}"
    );
    assert!(!first.replayed && second.replayed);
    assert_eq!(first.output, second.output);
    assert_eq!(first.operation_id, second.operation_id);
    let conflict = h.call("transfer_funds", transfer(2_000, "dkey-0001")).await;
    assert_eq!(conflict.status, Status::IdempotencyConflict);
    assert_eq!(h.ledger.transfers(), 1);
    assert_eq!(h.ledger.balance("acc-alice-2"), 1_000);
}

async fn dispatch_concurrent_one_key(b: Arc<Backend>) {
    let h = Arc::new(harness(&b));
    let mut tasks = Vec::new();
    for _ in 0..100 {
        let h = h.clone();
        tasks.push(tokio::spawn(async move {
            h.call("transfer_funds", transfer(10, "dstorm-0001"))
                .await
                .status
        }));
    }
    for t in tasks {
        let s = t.await.unwrap();
        assert!(matches!(s, Status::Ok | Status::InProgress), "{s}");
    }
    assert_eq!(h.ledger.transfers(), 1, "{}", b.name);
}

async fn dispatch_ttl(b: Arc<Backend>) {
    let h = harness(&b);
    let args = json!({"points": 5, "idempotency_key": "ttl-key-01"});
    assert!(!h.call("credit_points", args.clone()).await.replayed);
    h.clock.advance(Duration::from_secs(59));
    assert!(h.call("credit_points", args.clone()).await.replayed);
    h.clock.advance(Duration::from_secs(2));
    let after = h.call("credit_points", args).await;
    assert_eq!(after.status, Status::Ok);
    assert!(!after.replayed);
    assert_eq!(h.ledger.runs(), 2);
}

/// `hanging_payout` with a reconcile function that asks the ledger what landed.
struct CrashingPayout;

impl toolguard::Tool<Ledger> for CrashingPayout {
    type Args = HangingPayoutArgs;
    type Output = String;

    fn spec(&self) -> toolguard::ToolSpec {
        let mut spec = HangingPayout.spec();
        spec.name = "crashing_payout".to_owned();
        spec
    }

    fn reconcile<'a>(
        &'a self,
        ctx: &'a toolguard::ToolContext<Ledger>,
        _args: &'a HangingPayoutArgs,
    ) -> toolguard::BoxFuture<'a, Result<toolguard::tool::Reconciled<String>, toolguard::ToolError>>
    {
        Box::pin(async move {
            let landed = ctx.state().landed.lock().unwrap();
            Ok(match ctx.operation_id().and_then(|op| landed.get(op)) {
                Some(cents) => toolguard::tool::Reconciled::Completed(format!("paid {cents}")),
                None => toolguard::tool::Reconciled::Unknown,
            })
        })
    }

    fn call<'a>(
        &'a self,
        ctx: &'a toolguard::ToolContext<Ledger>,
        args: HangingPayoutArgs,
    ) -> toolguard::BoxFuture<'a, Result<String, toolguard::ToolError>> {
        HangingPayout.call(ctx, args)
    }
}

/// The executing task dies after the reservation and before completion; a retry after the
/// lease must not execute again: it answers `outcome_unknown` until reconciled. The operation
/// left `executing` is reported as `outcome_unknown` and can be reconciled.
async fn crash_after_reservation(b: Arc<Backend>) {
    let h = Arc::new(harness(&b));
    let args = json!({"cents": 7, "idempotency_key": "crash-key-1"});
    let h2 = h.clone();
    let a2 = args.clone();
    let task = tokio::spawn(async move { h2.call("crashing_payout", a2).await });
    for _ in 0..500 {
        if h.ledger.transfers() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(h.ledger.transfers(), 1, "the handler started");
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let during = h.call("crashing_payout", args.clone()).await;
    assert_eq!(during.status, Status::InProgress, "lease still live");
    h.clock.advance(Duration::from_secs(36));
    let retry = h.call("crashing_payout", args.clone()).await;
    assert_eq!(retry.status, Status::OutcomeUnknown, "{retry:?}");
    let op = retry
        .operation_id
        .clone()
        .expect("names the operation to reconcile");
    let again = h.call("crashing_payout", args.clone()).await;
    assert_eq!(again.status, Status::OutcomeUnknown);
    assert_eq!(h.ledger.transfers(), 1, "never executed twice");

    // The operation status query sees the crash, and reconciles once the effect is known.
    let unknown = h.d.operation_status(&alice(), &op).await.unwrap();
    assert_eq!(unknown.state, OperationState::OutcomeUnknown, "{}", b.name);
    assert!(!unknown.reconciled);
    assert_eq!(
        unknown.outcome.map(|o| o.status),
        Some(Status::OutcomeUnknown)
    );
    h.ledger.landed.lock().unwrap().insert(op.to_string(), 7);
    let resolved = h.d.operation_status(&alice(), &op).await.unwrap();
    assert_eq!(resolved.state, OperationState::Ok, "{}", b.name);
    assert!(resolved.reconciled);
    assert_eq!(
        resolved.outcome.and_then(|o| o.output),
        Some(json!("paid 7"))
    );
    let replayed = h.call("crashing_payout", args).await;
    assert_eq!(replayed.status, Status::Ok, "{}: {replayed:?}", b.name);
    assert!(replayed.replayed);
    assert_eq!(h.ledger.transfers(), 1, "never executed twice");
}

// ---------------------------------------------------------------- approvals

fn request(id: &str, created: u64) -> ApprovalRequest {
    ApprovalRequest {
        id: id.into(),
        version: 0,
        state: ApprovalState::Pending,
        requester: alice(),
        tool: "transfer_funds".into(),
        call_id: "call-1".into(),
        operation_id: format!("op-{id}"),
        idempotency: Some(key(id)),
        provider: None,
        request_digest: "digest".into(),
        binding_digest: "binding".into(),
        arguments: json!({"amount": 5}),
        preview: "transfer 5".into(),
        eligible_roles: vec!["approver".into()],
        approvals_required: 1,
        decisions: Vec::new(),
        tool_revision: 1,
        policy_revision: 1,
        amount: Some(5),
        cause: "approval_over".into(),
        cause_message: None,
        created_at_ms: created,
        expires_at_ms: created + 60_000,
        seal: None,
        provenance: Vec::new(),
        origins: Vec::new(),
    }
}

async fn approval_lifecycle_and_cas(b: Arc<Backend>) {
    let Some(s) = b.approvals.clone() else {
        eprintln!("{}: no approval store (not applicable)", b.name);
        return;
    };
    let first = request("ap-1", 1_000);
    s.create(&request("ap-2", 2_000)).await.unwrap();
    s.create(&first).await.unwrap();
    let mut foreign = request("ap-3", 500);
    foreign.requester = Principal::new("globex", "carol", "s");
    s.create(&foreign).await.unwrap();
    let pending = s.pending("acme").await.unwrap();
    assert_eq!(
        pending.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["ap-1", "ap-2"],
        "oldest first, own tenant only"
    );
    let stored = s.get("ap-1").await.unwrap().unwrap();
    assert_eq!(stored, first);
    assert!(s.get("ap-missing").await.unwrap().is_none());

    // Concurrent decisions: exactly one compare-and-set wins.
    let seen = s.get("ap-1").await.unwrap().unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let s = s.clone();
        let mut next = seen.clone();
        tasks.push(tokio::spawn(async move {
            let expected = next.version;
            next.state = ApprovalState::Executing;
            next.decisions.push(toolguard::store::ApprovalDecision {
                approver: format!("approver-{i}"),
                approve: true,
                at_ms: 1_500,
                digest: "d".into(),
                reason: None,
            });
            s.update(&next, expected).await.unwrap()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        wins += t.await.unwrap() as usize;
    }
    assert_eq!(wins, 1, "{}: one CAS winner", b.name);
    let after = s.get("ap-1").await.unwrap().unwrap();
    assert_eq!(after.version, 1);
    assert_eq!(after.state, ApprovalState::Executing);
    assert_eq!(after.decisions.len(), 1);
    assert!(!s.update(&after, 0).await.unwrap(), "stale version loses");
    let mut done = after.clone();
    done.state = ApprovalState::Executed;
    assert!(s.update(&done, 1).await.unwrap());
    assert_eq!(s.get("ap-1").await.unwrap().unwrap().version, 2);
    // Creating an existing id again is an error and never resets the decided request.
    assert!(
        s.create(&first).await.is_err(),
        "{}: create is an insert",
        b.name
    );
    let kept = s.get("ap-1").await.unwrap().unwrap();
    assert_eq!(
        (kept.state, kept.version, kept.decisions.len()),
        (ApprovalState::Executed, 2, 1),
        "{}",
        b.name
    );
    assert_eq!(
        s.pending("acme")
            .await
            .unwrap()
            .iter()
            .map(|r| r.id.clone())
            .collect::<Vec<_>>(),
        ["ap-2"]
    );
}

async fn approval_via_dispatcher(b: Arc<Backend>) {
    if b.approvals.is_none() {
        eprintln!("{}: no approval store (not applicable)", b.name);
        return;
    }
    let h = harness(&b);
    let out = h
        .call("transfer_funds", transfer(1_500_000, "big-key-1"))
        .await;
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    let id = out.approval.unwrap().approval_id;
    let retry = h
        .call("transfer_funds", transfer(1_500_000, "big-key-1"))
        .await;
    assert!(retry.replayed);
    assert_eq!(retry.status, Status::PendingApproval);
    let approved = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(approved.status, Status::Ok, "{approved:?}");
    let twice = h.d.approvals().approve(&dave_approver(), &id).await;
    assert_ne!(twice.status, Status::Ok);
    assert_eq!(h.ledger.transfers(), 1);
    let replay = h
        .call("transfer_funds", transfer(1_500_000, "big-key-1"))
        .await;
    assert_eq!(replay.status, Status::Ok);
    assert!(replay.replayed);
    assert_eq!(h.ledger.transfers(), 1);
}

/// A host switch a custom stage reads: while it is on, transfers stop.
struct TransfersOff(Arc<std::sync::atomic::AtomicBool>);

impl toolguard::custom::CustomStage for TransfersOff {
    fn check<'a>(
        &'a self,
        _input: toolguard::custom::StageInput<'a>,
    ) -> toolguard::BoxFuture<'a, Result<(), toolguard::custom::Refusal>> {
        let off = self.0.load(Ordering::SeqCst);
        Box::pin(async move {
            if off {
                return Err(toolguard::custom::Refusal::new(
                    Status::Forbidden,
                    "transfers_off",
                    "transfers are switched off",
                ));
            }
            Ok(())
        })
    }
}

/// The approval path runs the custom stages as dispatch does: a request approved after the
/// host switched transfers off stops at the custom stage, with its reason, whatever backend
/// holds the request; nothing executes, and the requester's retry does not run it either.
async fn approval_runs_the_custom_stages(b: Arc<Backend>) {
    let (Some(approvals), Some(operations)) = (&b.approvals, &b.operations) else {
        eprintln!("{}: no approval store (not applicable)", b.name);
        return;
    };
    let off = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ledger = Arc::new(Ledger::seeded());
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .audit(MemoryAuditSink::new())
        .idempotency_store(b.idem.clone())
        .session_ledger(b.ledger.clone())
        .approval_store(approvals.clone())
        .operation_store(operations.clone())
        .policy(RiskPolicy::new().approver_roles(["approver"]))
        .custom_stage(
            toolguard::custom::StagePoint::AfterPolicy,
            TransfersOff(off.clone()),
        )
        .build()
        .expect("dispatcher");
    let call = ToolCall::new("c-off", "transfer_funds", transfer(1_500_000, "off-key-1"));
    let out = d.dispatch(call.clone(), &alice()).await;
    assert_eq!(out.status, Status::PendingApproval, "{}: {out:?}", b.name);
    off.store(true, Ordering::SeqCst);
    let id = out.approval.unwrap().approval_id;
    let decided = d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(decided.status, Status::Forbidden, "{}: {decided:?}", b.name);
    assert_eq!(
        decided.reason.as_deref(),
        Some("transfers_off"),
        "{}",
        b.name
    );
    assert_eq!(ledger.transfers(), 0, "{}", b.name);
    d.dispatch(call, &alice()).await;
    assert_eq!(ledger.transfers(), 0, "{}: the retry runs nothing", b.name);
}

// ---------------------------------------------------------------- session ledger

async fn ledger_admit_atomic(b: Arc<Backend>) {
    let l = &b.ledger;
    let now = SystemTime::now();
    let hour = Duration::from_secs(3600);
    let wide = ScopeLimit {
        scope: "l:wide".into(),
        limit: 100,
        window: hour,
    };
    let narrow = ScopeLimit {
        scope: "l:narrow".into(),
        limit: 30,
        window: hour,
    };
    assert!(
        !l.admit("e0", 50, &[wide.clone(), narrow.clone()], now)
            .await
            .unwrap()
    );
    assert_eq!(
        l.total("l:wide", hour, now).await.unwrap(),
        0,
        "nothing added on refusal"
    );
    assert!(
        l.admit("e1", 20, &[wide.clone(), narrow.clone()], now)
            .await
            .unwrap()
    );
    assert_eq!(l.total("l:wide", hour, now).await.unwrap(), 20);
    assert_eq!(l.total("l:narrow", hour, now).await.unwrap(), 20);
    l.retract("e1", &["l:wide".into(), "l:narrow".into()])
        .await
        .unwrap();
    assert_eq!(l.total("l:narrow", hour, now).await.unwrap(), 0);
    l.record("e2", 500, &["l:wide".into()], now).await.unwrap();
    assert_eq!(
        l.total("l:wide", hour, now).await.unwrap(),
        500,
        "record skips the limit"
    );
    let later = now + hour + Duration::from_secs(1);
    assert_eq!(
        l.total("l:wide", hour, later).await.unwrap(),
        0,
        "outside the window"
    );

    // Concurrent admissions never exceed the limit of any scope.
    let limits = vec![
        ScopeLimit {
            scope: "c:a".into(),
            limit: 100,
            window: hour,
        },
        ScopeLimit {
            scope: "c:b".into(),
            limit: 1_000,
            window: hour,
        },
    ];
    let admitted = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..40 {
        let l = b.ledger.clone();
        let limits = limits.clone();
        let admitted = admitted.clone();
        tasks.push(tokio::spawn(async move {
            if l.admit(&format!("c{i}"), 10, &limits, now).await.unwrap() {
                admitted.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(admitted.load(Ordering::SeqCst), 10, "{}", b.name);
    assert_eq!(l.total("c:a", hour, now).await.unwrap(), 100);
    assert_eq!(l.total("c:b", hour, now).await.unwrap(), 100);

    // Rate counting.
    let minute = Duration::from_secs(60);
    for _ in 0..3 {
        assert!(l.hit("r:alice", 3, minute, now).await.unwrap());
    }
    assert!(!l.hit("r:alice", 3, minute, now).await.unwrap());
    assert!(
        l.hit(
            "r:alice",
            3,
            minute,
            now + minute + Duration::from_millis(1)
        )
        .await
        .unwrap()
    );
}

/// Replicas read their clocks before they book: an entry booked first under a later time (a
/// replica whose clock read came later) still counts against a caller whose `now` is earlier,
/// for amounts, reservations and call rates alike.
async fn ledger_counts_entries_booked_under_a_later_clock(b: Arc<Backend>) {
    let l = &b.ledger;
    let now = SystemTime::now();
    let later = now + Duration::from_millis(40);
    let hour = Duration::from_secs(3600);
    let limit = |scope: &str| ScopeLimit {
        scope: scope.into(),
        limit: 100,
        window: hour,
    };
    assert!(
        l.admit("late", 60, &[limit("k:amount")], later)
            .await
            .unwrap()
    );
    assert!(
        !l.admit("early", 60, &[limit("k:amount")], now)
            .await
            .unwrap(),
        "{}: the entry booked under a later clock was left out of the limit check",
        b.name
    );
    assert_eq!(
        l.total("k:amount", hour, now).await.unwrap(),
        60,
        "{}",
        b.name
    );
    let until = now + hour;
    assert!(
        !l.reserve("hold", 60, &[limit("k:amount")], until, now)
            .await
            .unwrap(),
        "{}: a reservation left the later entry out",
        b.name
    );
    let minute = Duration::from_secs(60);
    for _ in 0..3 {
        assert!(l.hit("k:rate", 3, minute, later).await.unwrap());
    }
    assert!(
        !l.hit("k:rate", 3, minute, now).await.unwrap(),
        "{}: calls counted under a later clock were left out of the rate",
        b.name
    );
}

// ---------------------------------------------------------------- operations

async fn operation_records(b: Arc<Backend>) {
    let Some(s) = b.operations.clone() else {
        eprintln!("{}: no operation store (not applicable)", b.name);
        return;
    };
    let mut rec = OperationRecord {
        id: "op-9".into(),
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        call_id: "c".into(),
        state: OperationState::Executing,
        outcome: None,
        arguments: json!({"amount": 1}).into(),
        idempotency: Some(key("k")),
        approval_id: None,
        updated_at_ms: 1,
    };
    s.put(rec.clone()).await.unwrap();
    assert_eq!(s.get("op-9").await.unwrap().as_ref(), Some(&rec));
    rec.state = OperationState::OutcomeUnknown;
    rec.outcome = Some(StoredOutcome::new(Status::OutcomeUnknown));
    rec.updated_at_ms = 2;
    s.put(rec.clone()).await.unwrap();
    assert_eq!(s.get("op-9").await.unwrap(), Some(rec));
    assert!(s.get("op-missing").await.unwrap().is_none());
}

/// A completion with the call's final operation record: the record in the operation store
/// (the backend itself where it keeps them, else a memory store), the outcome under the key; a
/// stale owner completes nothing, and its record is written all the same.
async fn completion_with_record(b: Arc<Backend>) {
    let memory = toolguard::store::MemoryStore::new();
    let ops: &dyn toolguard::store::OperationStore = match &b.operations {
        Some(o) => &**o,
        None => &memory,
    };
    let now = SystemTime::now();
    let k = key("with-record");
    let owner = match b
        .idem
        .reserve(&k, "d", Some("op-wr"), LEASE, TTL, now)
        .await
        .unwrap()
    {
        Reservation::Reserved { owner } => owner,
        other => panic!("{}: the key was free: {other:?}", b.name),
    };
    let record = |id: &str| OperationRecord {
        id: id.into(),
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        call_id: "c".into(),
        state: OperationState::Ok,
        outcome: Some(StoredOutcome::new(Status::Ok)),
        arguments: json!({"amount": 1}).into(),
        idempotency: Some(k.clone()),
        approval_id: None,
        updated_at_ms: 2,
    };
    let outcome = StoredOutcome::new(Status::Ok);
    let (written, done) = b
        .idem
        .complete_with_record(&k, &owner, outcome.clone(), TTL, now, record("op-wr"), ops)
        .await;
    written.unwrap();
    assert!(done.unwrap(), "{}: the owner completes the key", b.name);
    assert_eq!(ops.get("op-wr").await.unwrap(), Some(record("op-wr")));
    let held = b.idem.get(&k, now).await.unwrap().expect("record");
    assert_eq!(
        held.state,
        RecordState::Done {
            outcome: outcome.clone()
        },
        "{}",
        b.name
    );

    let (written, done) = b
        .idem
        .complete_with_record(&k, "stale", outcome, TTL, now, record("op-stale"), ops)
        .await;
    written.unwrap();
    assert!(
        !done.unwrap(),
        "{}: a stale owner completes nothing",
        b.name
    );
    assert_eq!(ops.get("op-stale").await.unwrap(), Some(record("op-stale")));
}

// ---------------------------------------------------------------- audit

fn record(i: u64) -> AuditRecord {
    AuditRecord {
        event: AuditEvent::Call,
        time_ms: 1_000_000 + i * 10,
        tenant: if i.is_multiple_of(2) {
            "acme"
        } else {
            "globex"
        }
        .into(),
        subject: format!("user-{}", i % 4).into(),
        session: "s".into(),
        tool: format!("tool-{}", i % 3).into(),
        call_id: format!("call-{i}").into(),
        status: Some(Status::Ok),
        arguments: Some(std::sync::Arc::new(json!({"n": i, "note": "é"}))),
        ..AuditRecord::default()
    }
}

async fn audit_append_and_query(b: Arc<Backend>) {
    let Some(a) = b.audit.clone() else {
        eprintln!("{}: no audit sink (not applicable)", b.name);
        return;
    };
    let mut seqs = Vec::new();
    for i in 0..30 {
        seqs.push(a.append(record(i)).await.unwrap());
    }
    assert_eq!(seqs, (1..=30).collect::<Vec<_>>());
    // Concurrent appends get distinct, gap-free numbers.
    let mut tasks = Vec::new();
    for i in 30..130 {
        let a = a.clone();
        tasks.push(tokio::spawn(
            async move { a.append(record(i)).await.unwrap() },
        ));
    }
    let mut more = Vec::new();
    for t in tasks {
        more.push(t.await.unwrap());
    }
    more.sort_unstable();
    assert_eq!(more, (31..=130).collect::<Vec<_>>());

    let actor = a.by_actor("acme", "user-2", 5).await.unwrap();
    assert_eq!(actor.len(), 5);
    assert!(
        actor
            .iter()
            .all(|e| e.record.tenant == "acme" && e.record.subject == "user-2")
    );
    assert!(
        actor.windows(2).all(|w| w[0].seq > w[1].seq),
        "newest first"
    );
    let tool = a.by_tool("tool-1", 1_000).await.unwrap();
    assert_eq!(tool.len(), (0..130).filter(|i| i % 3 == 1).count());
    assert!(tool.iter().all(|e| e.record.tool == "tool-1"));
    let window = a.by_time(1_000_100, 1_000_200, 100).await.unwrap();
    assert_eq!(
        window
            .iter()
            .map(|e| e.record.call_id.clone())
            .collect::<Vec<_>>(),
        (10..20).map(|i| format!("call-{i}")).collect::<Vec<_>>()
    );
    assert_eq!(a.by_time(0, u64::MAX, 7).await.unwrap().len(), 7);
    assert_eq!(window[0].record, record(10), "records read back unchanged");
    a.verify().await.expect("an intact chain verifies");
}

async fn audit_tamper_detection(b: Arc<Backend>) {
    let (Some(a), Some(tamper)) = (b.audit.clone(), b.tamper.clone()) else {
        eprintln!("{}: no audit sink (not applicable)", b.name);
        return;
    };
    for i in 0..12 {
        a.append(record(i)).await.unwrap();
    }
    a.verify().await.unwrap();
    tamper(TamperKind::Alter, 4).await;
    assert_eq!(
        a.verify().await,
        Err(VerifyError::Broken(ChainBreak::Altered { seq: 4 })),
        "{}",
        b.name
    );
}

async fn audit_column_and_delete_detection(b: Arc<Backend>) {
    let (Some(a), Some(tamper)) = (b.audit.clone(), b.tamper.clone()) else {
        eprintln!("{}: no audit sink (not applicable)", b.name);
        return;
    };
    for i in 0..12 {
        a.append(record(i)).await.unwrap();
    }
    tamper(TamperKind::Column, 6).await;
    assert_eq!(
        a.verify().await,
        Err(VerifyError::Broken(ChainBreak::Altered { seq: 6 })),
        "{}",
        b.name
    );
    tamper(TamperKind::Delete, 3).await;
    assert_eq!(
        a.verify().await,
        Err(VerifyError::Broken(ChainBreak::Unlinked { seq: 4 })),
        "{}",
        b.name
    );
    tamper(TamperKind::Delete, 1).await;
    assert_eq!(
        a.verify().await,
        Err(VerifyError::Broken(ChainBreak::Unlinked { seq: 2 })),
        "the first entry's removal is seen too"
    );
}

// ---------------------------------------------------------------- faults over the backend

async fn faults_fail_closed(b: Arc<Backend>) {
    let faulty = Arc::new(FaultyStore::new(Arc::new(SharedIdem(b.idem.clone()))));
    let h = harness_with(&b, faulty.clone(), false);
    faulty.fail(StoreOp::Reserve);
    let out = h.call("transfer_funds", transfer(1_000, "fkey-0001")).await;
    assert_eq!(out.status, Status::Unavailable);
    assert_eq!(h.ledger.transfers(), 0, "no execution");
    let entry = h.audit.by_actor("acme", "alice", 1).await.unwrap();
    assert_eq!(entry.len(), 1, "{}: an audit entry", b.name);
    assert_eq!(entry[0].record.status, Some(Status::Unavailable));
    assert_eq!(Some(entry[0].seq), out.audit_seq);

    // A read-only tool fails closed too unless fail-open is configured.
    let read = ToolCall::new("c", "get_balance", json!({"account": "acc-alice-1"}))
        .with_idempotency_key("read-key-1");
    assert_eq!(
        h.d.dispatch(read.clone(), &alice()).await.status,
        Status::Unavailable
    );
    let open = harness_with(&b, faulty.clone(), true);
    assert_eq!(open.d.dispatch(read, &alice()).await.status, Status::Ok);
    let state_changing = open
        .call("transfer_funds", transfer(1_000, "fkey-0002"))
        .await;
    assert_eq!(
        state_changing.status,
        Status::Unavailable,
        "fail-open is for read-only tools"
    );

    faulty.heal_all();
    let healed = h.call("transfer_funds", transfer(1_000, "fkey-0001")).await;
    assert_eq!(healed.status, Status::Ok);
    assert_eq!(h.ledger.transfers(), 1);
}

/// A store that stops answering makes a state-changing call `unavailable` within the stage's
/// deadline instead of hanging: nothing executes, and the audit trail says so.
async fn stalled_store_fails_closed(b: Arc<Backend>) {
    let faulty = Arc::new(FaultyStore::new(Arc::new(SharedIdem(b.idem.clone()))));
    let h = harness_with(&b, faulty.clone(), false);
    faulty.stall(StoreOp::Reserve, Duration::from_secs(600));
    let started = std::time::Instant::now();
    let out = h
        .call("transfer_funds", transfer(1_000, "stall-key-1"))
        .await;
    assert_eq!(out.status, Status::Unavailable, "{}: {out:?}", b.name);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{}: answered within the deadline",
        b.name
    );
    assert_eq!(h.ledger.transfers(), 0, "no execution");
    let entry = h.audit.by_actor("acme", "alice", 1).await.unwrap();
    assert_eq!(entry.len(), 1, "{}: an audit entry", b.name);
    assert_eq!(entry[0].record.status, Some(Status::Unavailable));
    assert_eq!(Some(entry[0].seq), out.audit_seq);
    faulty.heal_all();
    let healed = h
        .call("transfer_funds", transfer(1_000, "stall-key-1"))
        .await;
    assert_eq!(healed.status, Status::Ok, "{}: {healed:?}", b.name);
    assert_eq!(h.ledger.transfers(), 1);
}

/// The store goes away after the handler ran and before the outcome was stored under the key: a
/// retry must not execute again; it waits (`in_progress`) while the lease lives, then gets the
/// outcome the operation record holds (written before the key), replayed.
async fn store_lost_before_completion(b: Arc<Backend>) {
    let faulty = Arc::new(FaultyStore::new(Arc::new(SharedIdem(b.idem.clone()))));
    let h = harness_with(&b, faulty.clone(), false);
    faulty.fail(StoreOp::Complete);
    let first = h
        .call("transfer_funds", transfer(1_000, "lost-key-01"))
        .await;
    assert_eq!(first.status, Status::Ok, "the effect happened");
    assert_eq!(h.ledger.transfers(), 1);
    faulty.heal_all();
    let retry = h
        .call("transfer_funds", transfer(1_000, "lost-key-01"))
        .await;
    assert_eq!(retry.status, Status::InProgress, "{}", b.name);
    h.clock.advance(Duration::from_secs(3_600));
    let later = h
        .call("transfer_funds", transfer(1_000, "lost-key-01"))
        .await;
    assert_eq!(later.status, Status::Ok, "{}: {later:?}", b.name);
    assert!(later.replayed, "{}: {later:?}", b.name);
    assert_eq!(later.operation_id, first.operation_id);
    assert_eq!(h.ledger.transfers(), 1, "never executed twice");
}

/// An `Arc<dyn IdempotencyStore>` as a sized store, so that `FaultyStore` can wrap any backend.
struct SharedIdem(Arc<dyn IdempotencyStore>);

impl IdempotencyStore for SharedIdem {
    fn reserve<'a>(
        &'a self,
        key: &'a ScopedKey,
        d: &'a str,
        op: Option<&'a str>,
        lease: Duration,
        ttl: Duration,
        now: SystemTime,
    ) -> toolguard::BoxFuture<'a, toolguard::store::StoreResult<Reservation>> {
        self.0.reserve(key, d, op, lease, ttl, now)
    }
    fn complete<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> toolguard::BoxFuture<'a, toolguard::store::StoreResult<bool>> {
        self.0.complete(key, owner, outcome, ttl, now)
    }
    fn release<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
    ) -> toolguard::BoxFuture<'a, toolguard::store::StoreResult<bool>> {
        self.0.release(key, owner)
    }
    fn renew<'a>(
        &'a self,
        key: &'a ScopedKey,
        owner: &'a str,
        lease: Duration,
        now: SystemTime,
    ) -> toolguard::BoxFuture<'a, toolguard::store::StoreResult<bool>> {
        self.0.renew(key, owner, lease, now)
    }
    fn take_over<'a>(
        &'a self,
        key: &'a ScopedKey,
        lease: Duration,
        now: SystemTime,
    ) -> toolguard::BoxFuture<'a, toolguard::store::StoreResult<Option<String>>> {
        self.0.take_over(key, lease, now)
    }
    fn replace<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
        outcome: StoredOutcome,
        ttl: Duration,
        now: SystemTime,
    ) -> toolguard::BoxFuture<'a, toolguard::store::StoreResult<bool>> {
        self.0.replace(key, operation_id, outcome, ttl, now)
    }
    fn remove<'a>(
        &'a self,
        key: &'a ScopedKey,
        operation_id: &'a str,
    ) -> toolguard::BoxFuture<'a, toolguard::store::StoreResult<bool>> {
        self.0.remove(key, operation_id)
    }
    fn get<'a>(
        &'a self,
        key: &'a ScopedKey,
        now: SystemTime,
    ) -> toolguard::BoxFuture<
        'a,
        toolguard::store::StoreResult<Option<toolguard::store::IdempotencyRecord>>,
    > {
        self.0.get(key, now)
    }
}

// ---------------------------------------------------------------- the matrix

macro_rules! conformance {
    ($module:ident, $backend:ident, #[$attr:meta]: $($name:ident),* $(,)?) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[$attr]
                async fn $name() {
                    let backend = crate::store_support::$backend(stringify!($name)).await;
                    crate::store_support::run(backend, crate::$name).await;
                }
            )*
        }
    };
}

/// The tests every idempotency store and session ledger passes.
macro_rules! idempotency_and_ledger {
    ($backend:ident) => {
        idempotency_and_ledger!($backend, #[cfg_attr(any(), ignore)]);
    };
    ($backend:ident, #[$attr:meta]) => {
        conformance!(idempotency_and_ledger, $backend, #[$attr]:
            reserve_complete_replay,
            release_renew_replace_remove,
            replace_remove_only_own_operation,
            lease_expiry_and_take_over,
            ttl_expiry,
            ttl_never_before_lease,
            concurrent_reserve_one_winner,
            dispatch_replay_and_conflict,
            dispatch_concurrent_one_key,
            dispatch_ttl,
            crash_after_reservation,
            ledger_admit_atomic,
            ledger_counts_entries_booked_under_a_later_clock,
            faults_fail_closed,
            store_lost_before_completion,
            stalled_store_fails_closed,
            completion_with_record,
        );
    };
}

/// The tests of backends that also hold approvals, operations and the audit trail.
macro_rules! approvals_operations_audit {
    ($backend:ident) => {
        approvals_operations_audit!($backend, #[cfg_attr(any(), ignore)]);
    };
    ($backend:ident, #[$attr:meta]) => {
        conformance!(approvals_operations_audit, $backend, #[$attr]:
            approval_lifecycle_and_cas,
            approval_via_dispatcher,
            approval_runs_the_custom_stages,
            operation_records,
            audit_append_and_query,
            audit_tamper_detection,
            audit_column_and_delete_detection,
        );
    };
}

mod memory {
    idempotency_and_ledger!(memory);
    approvals_operations_audit!(memory);
}

#[cfg(feature = "sqlite")]
mod sqlite {
    idempotency_and_ledger!(sqlite);
    approvals_operations_audit!(sqlite);
}

/// SQLite fully synced with the trail through the store's connection (`.sqlite()`).
#[cfg(feature = "sqlite")]
mod sqlite_shared {
    idempotency_and_ledger!(sqlite_shared);
    approvals_operations_audit!(sqlite_shared);
}

#[cfg(feature = "postgres")]
mod postgres {
    idempotency_and_ledger!(postgres, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
    approvals_operations_audit!(postgres, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
}

/// PostgreSQL with the trail through the store's pool: covered writes commit without waiting
/// for the disk.
#[cfg(feature = "postgres")]
mod postgres_shared {
    idempotency_and_ledger!(postgres_shared, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
    approvals_operations_audit!(postgres_shared, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
}

/// Redis holds idempotency records and session ledgers only.
#[cfg(feature = "redis")]
mod redis {
    idempotency_and_ledger!(redis, #[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]);
}

// ---------------------------------------------------------------- corrupt stored data

/// A record that no longer parses is a store error (the dispatcher fails closed), never a panic
/// and never silently replaced.
#[cfg(feature = "redis")]
#[tokio::test]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn redis_corrupt_record_is_an_error() {
    use toolguard::redis::RedisStore;
    let Some(url) = store_support::redis_url("redis_corrupt_record_is_an_error") else {
        return;
    };
    let s = RedisStore::connect(&url, store_support::unique("corrupt"))
        .await
        .unwrap();
    let now = SystemTime::now();
    let k = key("corrupt-1");
    let raw = format!("{}:idem:{}", s.prefix(), k.storage_key());
    for garbage in [
        "garbage",
        "F\tx\t1\t99999999999999\t{\t\t",
        "D\t\t0\t99999999999999\t\"d\"\tnull\t{",
    ] {
        s.raw_set(&raw, garbage).await.unwrap();
        assert!(
            s.reserve(&k, "d", None, LEASE, TTL, now).await.is_err(),
            "{garbage}"
        );
        assert!(s.get(&k, now).await.is_err(), "{garbage}");
        assert!(
            !s.complete(
                &k,
                "not-the-owner",
                StoredOutcome::new(Status::Ok),
                TTL,
                now
            )
            .await
            .unwrap()
        );
    }
    s.clear().await.unwrap();
}

/// A store spreads its commands over several connections in turn: racing reservations of one key
/// over four connections still let exactly one through, and the owner completes the record (and
/// every reader then sees it done) whichever connection each of those commands takes.
#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn redis_commands_over_several_connections_stay_exactly_once() {
    use toolguard::redis::{RedisConfig, RedisStore};
    let Some(url) = store_support::redis_url("redis_commands_over_several_connections") else {
        return;
    };
    assert_eq!(RedisConfig::new(&url, "p").connections(0).connections, 1);
    let config = RedisConfig::new(&url, store_support::unique("connections")).connections(4);
    let s = Arc::new(RedisStore::connect_with(&config).await.unwrap());
    assert!(format!("{s:?}").contains("connections: 4"), "{s:?}");
    // The detection store beside it takes the same connections in turn.
    let detection = toolguard::redis::RedisDetectionStore::new(&s);
    assert!(
        format!("{detection:?}").contains("connections: 4"),
        "{detection:?}"
    );
    let now = SystemTime::now();
    for round in 0..8 {
        let k = key(&format!("spread-{round}"));
        let racers: Vec<_> = (0..32)
            .map(|_| {
                let (s, k) = (s.clone(), k.clone());
                tokio::spawn(async move { s.reserve(&k, "d", None, LEASE, TTL, now).await })
            })
            .collect();
        let mut owners = Vec::new();
        for racer in racers {
            if let Reservation::Reserved { owner } = racer.await.unwrap().unwrap() {
                owners.push(owner);
            }
        }
        assert_eq!(owners.len(), 1, "round {round}: {owners:?}");
        let outcome = StoredOutcome::new(Status::Ok);
        assert!(s.complete(&k, &owners[0], outcome, TTL, now).await.unwrap());
        for _ in 0..4 {
            let record = s.get(&k, now).await.unwrap().expect("the record");
            assert!(
                matches!(record.state, RecordState::Done { .. }),
                "{record:?}"
            );
        }
    }
    s.clear().await.unwrap();
}

/// A store's configuration shows its connection string without the password, in both forms
/// PostgreSQL takes and in Redis URLs.
#[cfg(all(feature = "postgres", feature = "redis"))]
#[test]
fn configurations_show_no_password() {
    use toolguard::postgres::PgConfig;
    use toolguard::redis::RedisConfig;
    for url in [
        "postgres://app:hunter2@db:5432/app",
        "host=db user=app password=hunter2 dbname=app",
    ] {
        let shown = format!("{:?}", PgConfig::new(url).schema("tg"));
        assert!(
            !shown.contains("hunter2") && shown.contains("db"),
            "{shown}"
        );
    }
    let shown = format!("{:?}", RedisConfig::new("redis://:hunter2@cache:6379", "p"));
    assert!(
        !shown.contains("hunter2") && shown.contains("cache:6379"),
        "{shown}"
    );
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_corrupt_record_is_an_error() {
    use toolguard::sqlite::SqliteStore;
    let path = store_support::sqlite_path("corrupt");
    let s = SqliteStore::open(&path).unwrap();
    let now = SystemTime::now();
    let k = key("corrupt-2");
    let Reservation::Reserved { owner } = s.reserve(&k, "d", None, LEASE, TTL, now).await.unwrap()
    else {
        panic!("reserve")
    };
    assert!(
        s.complete(&k, &owner, StoredOutcome::new(Status::Ok), TTL, now)
            .await
            .unwrap()
    );
    s.with_connection(|c| c.execute("UPDATE toolguard_idempotency SET outcome = '{'", []))
        .await
        .unwrap();
    assert!(s.get(&k, now).await.is_err());
    assert!(s.reserve(&k, "d", None, LEASE, TTL, now).await.is_err());
    drop(s);
    store_support::remove_sqlite(&path);
}

// ---------------------------------------------------------------- faults of every pipeline store

mod pipeline_faults {
    use super::*;
    use toolguard::OnExceed;
    use toolguard::audit::AuditQuery;
    use toolguard::store::{FaultyStore, MemoryStore};

    struct F {
        d: Dispatcher<Ledger>,
        ledger: Arc<Ledger>,
        store: Arc<FaultyStore<MemoryStore>>,
        audit: Arc<MemoryAuditSink>,
    }

    fn faulty() -> F {
        let ledger = Arc::new(Ledger::seeded());
        let store = Arc::new(FaultyStore::new(Arc::new(MemoryStore::new())));
        let audit = Arc::new(MemoryAuditSink::new());
        let policy = RiskPolicy::new()
            .approver_roles(["approver"])
            .session_limit(
                "transfer_funds",
                10_000_000,
                Duration::from_secs(3600),
                OnExceed::RequireApproval,
            );
        let d = Dispatcher::builder_arc(ledger.clone())
            .tool(TransferFunds)
            .audit(SharedAudit(audit.clone()))
            .store(store.clone())
            .policy(policy)
            .build()
            .expect("dispatcher");
        F {
            d,
            ledger,
            store,
            audit,
        }
    }

    impl F {
        async fn call(&self, amount: u64, key: &str) -> toolguard::ToolOutcome {
            self.d
                .dispatch(
                    ToolCall::new("c", "transfer_funds", transfer(amount, key)),
                    &alice(),
                )
                .await
        }

        /// Fail-closed: `unavailable`, nothing executed, and the newest audit entry says so.
        async fn assert_closed(&self, out: &toolguard::ToolOutcome, reason: &str) {
            assert_eq!(out.status, Status::Unavailable, "{out:?}");
            assert_eq!(out.reason.as_deref(), Some(reason), "{out:?}");
            assert_eq!(self.ledger.transfers(), 0, "no execution");
            let entry = self.audit.by_actor("acme", "alice", 1).await.unwrap();
            assert_eq!(entry.len(), 1, "an audit entry");
            assert_eq!(entry[0].record.status, Some(Status::Unavailable));
            assert_eq!(Some(entry[0].seq), out.audit_seq);
        }

        async fn pending(&self, key: &str) -> String {
            let out = self.call(1_500_000, key).await;
            assert_eq!(out.status, Status::PendingApproval, "{out:?}");
            out.approval.expect("ticket").approval_id
        }
    }

    #[tokio::test]
    async fn ledger_admit_fails_closed() {
        let f = faulty();
        f.store.fail(StoreOp::LedgerAdmit);
        let out = f.call(1_000, "admit-key-1").await;
        f.assert_closed(&out, "ledger_unavailable").await;
        f.store.heal_all();
        assert_eq!(f.call(1_000, "admit-key-1").await.status, Status::Ok);
        assert_eq!(f.ledger.transfers(), 1);
    }

    #[tokio::test]
    async fn ledger_commit_fails_closed() {
        let f = faulty();
        let id = f.pending("record-key-1").await;
        f.store.fail(StoreOp::LedgerCommit);
        let out = f.d.approvals().approve(&bob_approver(), &id).await;
        f.assert_closed(&out, "ledger_unavailable").await;
    }

    #[tokio::test]
    async fn ledger_reserve_fails_closed() {
        let f = faulty();
        f.store.fail(StoreOp::LedgerReserve);
        let out = f.call(1_500_000, "reserve-key-1").await;
        f.assert_closed(&out, "ledger_unavailable").await;
        let open = f.d.approvals().pending(&bob_approver()).await.unwrap();
        assert!(
            open.is_empty(),
            "no request is stored without its reservation"
        );
        f.store.heal_all();
        let retry = f.call(1_500_000, "reserve-key-1").await;
        assert_eq!(
            retry.status,
            Status::PendingApproval,
            "the key was released"
        );
    }

    #[tokio::test]
    async fn approval_create_fails_closed() {
        let f = faulty();
        f.store.fail(StoreOp::ApprovalCreate);
        let out = f.call(1_500_000, "create-key-1").await;
        f.assert_closed(&out, "approval_store_unavailable").await;
        f.store.heal_all();
        let retry = f.call(1_500_000, "create-key-1").await;
        assert_eq!(
            retry.status,
            Status::PendingApproval,
            "the key was released"
        );
    }

    #[tokio::test]
    async fn approval_update_fails_closed() {
        let f = faulty();
        let id = f.pending("update-key-1").await;
        f.store.fail(StoreOp::ApprovalUpdate);
        let out = f.d.approvals().approve(&bob_approver(), &id).await;
        f.assert_closed(&out, "approval_store_unavailable").await;
        f.store.heal_all();
        let approved = f.d.approvals().approve(&bob_approver(), &id).await;
        assert_eq!(approved.status, Status::Ok, "still pending: {approved:?}");
        assert_eq!(f.ledger.transfers(), 1);
    }

    #[tokio::test]
    async fn operation_put_fails_closed() {
        let f = faulty();
        f.store.fail(StoreOp::OperationPut);
        let out = f.call(1_000, "put-key-1").await;
        f.assert_closed(&out, "operation_store_unavailable").await;
        f.store.heal_all();
        assert_eq!(f.call(1_000, "put-key-1").await.status, Status::Ok);
        assert_eq!(f.ledger.transfers(), 1);
    }

    /// A store operation on the call's path that never answers ends the call `unavailable`
    /// within the store deadline: nothing executes, the audit trail says so, and the call
    /// succeeds once the store answers again.
    async fn stall_fails_closed(op: StoreOp, reason: &str, key: &str) {
        let f = faulty();
        f.store.stall(op, Duration::from_secs(600));
        let started = std::time::Instant::now();
        let out = f.call(1_000, key).await;
        assert!(
            started.elapsed() < toolguard::store::STORE_DEADLINE * 10,
            "{op:?}: answered within the deadline, took {:?}",
            started.elapsed()
        );
        f.assert_closed(&out, reason).await;
        f.store.heal_all();
        assert_eq!(f.call(1_000, key).await.status, Status::Ok, "{op:?}");
        assert_eq!(f.ledger.transfers(), 1);
    }

    #[tokio::test]
    async fn stalled_ledger_total_fails_closed() {
        stall_fails_closed(StoreOp::LedgerTotal, "ledger_unavailable", "stall-total-1").await;
    }

    #[tokio::test]
    async fn stalled_ledger_admit_fails_closed() {
        stall_fails_closed(StoreOp::LedgerAdmit, "ledger_unavailable", "stall-admit-1").await;
    }

    #[tokio::test]
    async fn stalled_operation_put_fails_closed() {
        stall_fails_closed(
            StoreOp::OperationPut,
            "operation_store_unavailable",
            "stall-put-1",
        )
        .await;
    }
}

#[cfg(feature = "postgres")]
#[tokio::test]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
async fn postgres_corrupt_record_is_an_error() {
    use toolguard::postgres::{PgConfig, PgStore};
    let test = "postgres_corrupt_record_is_an_error";
    let Some(url) = store_support::pg_url(test) else {
        return;
    };
    let config = PgConfig::new(url)
        .schema(store_support::unique("corrupt"))
        .pool_size(2);
    let s = Arc::new(PgStore::connect(&config).await.unwrap());
    let s2 = s.clone();
    let result = tokio::spawn(async move {
        let s = s2;
        let now = SystemTime::now();
        let k = key("corrupt-3");
        let Reservation::Reserved { owner } =
            s.reserve(&k, "d", None, LEASE, TTL, now).await.unwrap()
        else {
            panic!("reserve")
        };
        assert!(
            s.complete(&k, &owner, StoredOutcome::new(Status::Ok), TTL, now)
                .await
                .unwrap()
        );
        let c = s.pool().get().await.unwrap();
        c.execute("UPDATE toolguard_idempotency SET outcome = '{'", &[])
            .await
            .unwrap();
        assert!(s.get(&k, now).await.is_err());
        assert!(s.reserve(&k, "d", None, LEASE, TTL, now).await.is_err());
        // The purge's indexes exist (migration 2).
        let n: i64 = c
            .query_one(
                "SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema()
                 AND indexname IN ('toolguard_idempotency_expiry', 'toolguard_ledger_time')",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 2);
    })
    .await;
    s.drop_schema().await.unwrap();
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_needs_wal_and_has_the_purge_indexes() {
    use toolguard::sqlite::SqliteStore;
    let err = SqliteStore::open(":memory:").expect_err("no WAL in memory");
    assert!(err.to_string().contains("WAL"), "{err}");
    let path = store_support::sqlite_path("indexes");
    let s = SqliteStore::open(&path).unwrap();
    let n: i64 = s
        .with_connection(|c| {
            c.query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN
                 ('toolguard_idempotency_expiry', 'toolguard_ledger_time')",
                [],
                |r| r.get(0),
            )
        })
        .await
        .unwrap();
    assert_eq!(n, 2);
    drop(s);
    store_support::remove_sqlite(&path);
}

/// Ledger sets are trimmed to the window on admission and expire a window after it.
#[cfg(feature = "redis")]
#[tokio::test]
#[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]
async fn redis_ledger_sets_are_trimmed_and_expire() {
    use ::redis as client;
    use toolguard::redis::RedisStore;
    use toolguard::store::SessionLedger;
    let Some(url) = store_support::redis_url("redis_ledger_sets_are_trimmed_and_expire") else {
        return;
    };
    let s = RedisStore::connect(&url, store_support::unique("trim"))
        .await
        .unwrap();
    let window = Duration::from_secs(10);
    let limit = [ScopeLimit {
        scope: "trim:a".into(),
        limit: 1_000,
        window,
    }];
    let t0 = SystemTime::now();
    assert!(s.admit("e1", 5, &limit, t0).await.unwrap());
    assert!(
        s.admit("e2", 5, &limit, t0 + Duration::from_secs(20))
            .await
            .unwrap()
    );
    let mut conn = client::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let set = format!("{}:ledger:trim:a", s.prefix());
    let members: i64 = client::cmd("ZCARD")
        .arg(&set)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(members, 1, "the entry outside the window was trimmed");
    let ttl: i64 = client::cmd("PTTL")
        .arg(&set)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(ttl > 0 && ttl <= 10_000, "expires a window later: {ttl}");
    s.clear().await.unwrap();
}
