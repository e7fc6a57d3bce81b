//! Risk policy (seed 000's incident replayed; deny mode; rates; limits per subject) and the
//! operation-status query with reconciliation.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use toolguard::{
    Dispatcher, ManualClock, MemoryAuditSink, MemoryStore, OnExceed, OperationError,
    OperationState, Principal, RiskPolicy, Status, ToolCall,
};
use toolguard_tests::*;

fn transfer(amount: u64, key: &str) -> serde_json::Value {
    json!({
        "from_account": "acc-alice-1",
        "to_account": "acc-external-9",
        "amount": amount,
        "currency": "USD",
        "idempotency_key": key,
    })
}

fn dispatcher(
    policy: RiskPolicy,
    ledger: Arc<Ledger>,
    clock: Arc<ManualClock>,
) -> Dispatcher<Ledger> {
    Dispatcher::builder_arc(ledger)
        .tool(TransferFunds)
        .tool(SlowPayout)
        .tool(EchoNote)
        .audit(MemoryAuditSink::new())
        .clock(clock)
        .store(Arc::new(MemoryStore::new()))
        .policy(policy)
        .build()
        .unwrap()
}

#[tokio::test]
async fn the_incident_six_transfers_under_the_threshold_are_stopped_by_the_session_limit() {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let policy = RiskPolicy::new().session_limit(
        "transfer_funds",
        1_000_000,
        Duration::from_secs(3600),
        OnExceed::RequireApproval,
    );
    let d = dispatcher(policy, ledger.clone(), clock.clone());
    let before = ledger.balance("acc-alice-1");
    let mut statuses = Vec::new();
    for i in 0..6 {
        let out = d
            .dispatch(
                ToolCall::new(
                    format!("call-{i}"),
                    "transfer_funds",
                    transfer(800_000, &format!("incident-{i:04}")),
                ),
                &alice(),
            )
            .await;
        statuses.push(out.status);
        clock.advance(Duration::from_secs(15)); // six calls within 90 seconds
    }
    assert_eq!(statuses[0], Status::Ok);
    assert!(
        statuses[1..].iter().all(|s| *s == Status::PendingApproval),
        "{statuses:?}"
    );
    assert_eq!(ledger.transfers(), 1);
    let moved = before - ledger.balance("acc-alice-1");
    assert_eq!(moved, 800_000, "at most 800,000 cents move without a human");
    let pending = d
        .approvals()
        .pending(&toolguard::Principal::new("acme", "viewer", "console"))
        .await
        .unwrap();
    assert_eq!(pending.len(), 5);
    assert!(pending.iter().all(|r| r.cause == "session_limit"));

    // Another session of the same subject starts from zero unless a subject limit applies.
    let other_session = Principal::new("acme", "alice", "sess-2");
    let out = d
        .dispatch(
            ToolCall::new("c", "transfer_funds", transfer(800_000, "incident-other")),
            &other_session,
        )
        .await;
    assert_eq!(out.status, Status::Ok);

    // After the window has passed, the session may move money unattended again.
    clock.advance(Duration::from_secs(3600));
    let out = d
        .dispatch(
            ToolCall::new("c", "transfer_funds", transfer(800_000, "incident-later")),
            &alice(),
        )
        .await;
    assert_eq!(out.status, Status::Ok);
}

#[tokio::test]
async fn deny_mode_refuses_and_subject_limits_span_sessions() {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let policy = RiskPolicy::new()
        .session_limit(
            "transfer_funds",
            1_000_000,
            Duration::from_secs(3600),
            OnExceed::Deny,
        )
        .subject_limit(
            "transfer_funds",
            1_500_000,
            Duration::from_secs(86_400),
            OnExceed::Deny,
        )
        .max_per_call("transfer_funds", 900_000);
    let d = dispatcher(policy, ledger.clone(), clock);
    let s1 = alice();
    let s2 = Principal::new("acme", "alice", "sess-2");
    assert_eq!(
        d.dispatch(
            ToolCall::new("a", "transfer_funds", transfer(800_000, "deny-0001")),
            &s1
        )
        .await
        .status,
        Status::Ok
    );
    let second = d
        .dispatch(
            ToolCall::new("b", "transfer_funds", transfer(800_000, "deny-0002")),
            &s1,
        )
        .await;
    assert_eq!(
        (second.status, second.reason.as_deref()),
        (Status::PolicyDenied, Some("session_limit"))
    );
    let other = d
        .dispatch(
            ToolCall::new("c", "transfer_funds", transfer(800_000, "deny-0003")),
            &s2,
        )
        .await;
    assert_eq!(
        (other.status, other.reason.as_deref()),
        (Status::PolicyDenied, Some("subject_limit"))
    );
    let message = other.message.clone().unwrap_or_default();
    assert!(message.contains("limit for this user"), "{message}");
    let big = d
        .dispatch(
            ToolCall::new("d", "transfer_funds", transfer(950_000, "deny-0004")),
            &s2,
        )
        .await;
    assert_eq!(
        (big.status, big.reason.as_deref()),
        (Status::PolicyDenied, Some("over_call_limit"))
    );
    assert_eq!(ledger.transfers(), 1);
}

/// A tool whose only rule is its per-call limit is decided without reading the ledger: over the
/// limit it is denied before anything runs, under it it executes.
#[tokio::test]
async fn a_per_call_limit_alone_is_enforced() {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let policy = RiskPolicy::new().max_per_call("transfer_funds", 500_000);
    let d = dispatcher(policy, ledger.clone(), clock);
    let big = d
        .dispatch(
            ToolCall::new("a", "transfer_funds", transfer(600_000, "alone-0001")),
            &alice(),
        )
        .await;
    assert_eq!(
        (big.status, big.reason.as_deref()),
        (Status::PolicyDenied, Some("over_call_limit"))
    );
    assert_eq!(ledger.transfers(), 0);
    let small = d
        .dispatch(
            ToolCall::new("b", "transfer_funds", transfer(400_000, "alone-0002")),
            &alice(),
        )
        .await;
    assert_eq!(small.status, Status::Ok, "{small:?}");
    assert_eq!(ledger.transfers(), 1);
}

#[tokio::test]
async fn session_call_rate_is_limited() {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let d = dispatcher(
        RiskPolicy::new().session_rate("echo_note", 3, Duration::from_secs(60)),
        ledger.clone(),
        clock.clone(),
    );
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(
            d.dispatch(
                ToolCall::new("c", "echo_note", json!({"note": "hi"})),
                &alice(),
            )
            .await
            .status,
        );
    }
    assert_eq!(
        statuses,
        [
            Status::Ok,
            Status::Ok,
            Status::Ok,
            Status::PolicyDenied,
            Status::PolicyDenied
        ]
    );
    assert_eq!(ledger.runs(), 3);
    clock.advance(Duration::from_secs(61));
    assert_eq!(
        d.dispatch(
            ToolCall::new("c", "echo_note", json!({"note": "hi"})),
            &alice()
        )
        .await
        .status,
        Status::Ok
    );
}

#[tokio::test]
async fn operation_status_reauthorizes_and_never_reexecutes() {
    let ledger = Arc::new(Ledger::seeded());
    let d = dispatcher(
        RiskPolicy::new(),
        ledger.clone(),
        Arc::new(ManualClock::new(SystemTime::now())),
    );
    let out = d
        .dispatch(
            ToolCall::new("c", "transfer_funds", transfer(100, "opstat-0001")),
            &alice(),
        )
        .await;
    let op = out.operation_id.unwrap();
    let report = d.operation_status(&alice(), &op).await.unwrap();
    assert_eq!(report.state, OperationState::Ok);
    assert_eq!(report.outcome.unwrap().status, Status::Ok);
    assert_eq!(ledger.transfers(), 1);
    assert_eq!(
        d.operation_status(&Principal::new("acme", "bob", "s"), &op)
            .await,
        Err(OperationError::NotFound)
    );
    assert_eq!(
        d.operation_status(&Principal::new("globex", "alice", "s"), &op)
            .await,
        Err(OperationError::NotFound)
    );
    assert_eq!(
        d.operation_status(&alice(), "op_nope").await,
        Err(OperationError::NotFound)
    );
}

#[tokio::test]
async fn reconcile_resolves_an_unknown_outcome() {
    let ledger = Arc::new(Ledger::seeded());
    let d = dispatcher(
        RiskPolicy::new(),
        ledger.clone(),
        Arc::new(ManualClock::new(SystemTime::now())),
    );
    let args = json!({"cents": 7, "delay_ms": 500, "idempotency_key": "recon-key-01"});
    let out = d
        .dispatch(ToolCall::new("c", "slow_payout", args.clone()), &alice())
        .await;
    assert_eq!(out.status, Status::OutcomeUnknown);
    let op = out.operation_id.clone().unwrap();

    // Downstream cannot tell yet: still unknown, nothing re-executes.
    let report = d.operation_status(&alice(), &op).await.unwrap();
    assert_eq!(
        (report.state, report.reconciled),
        (OperationState::OutcomeUnknown, false)
    );
    assert_eq!(ledger.runs(), 1);

    // Downstream confirms the payout landed: the outcome becomes ok and retries replay it.
    ledger.landed.lock().unwrap().insert(op.to_string(), 7);
    let report = d.operation_status(&alice(), &op).await.unwrap();
    assert_eq!(
        (report.state, report.reconciled),
        (OperationState::Ok, true)
    );
    let retry = d
        .dispatch(ToolCall::new("c", "slow_payout", args), &alice())
        .await;
    assert_eq!(retry.status, Status::Ok);
    assert!(retry.replayed);
    assert_eq!(retry.data(), Some(&json!("paid 7")));
    assert_eq!(ledger.runs(), 1);
}

#[tokio::test]
async fn reconcile_that_finds_nothing_happened_lets_a_retry_execute() {
    let ledger = Arc::new(Ledger::seeded());
    let d = dispatcher(
        RiskPolicy::new(),
        ledger.clone(),
        Arc::new(ManualClock::new(SystemTime::now())),
    );
    let args = json!({"cents": 9, "delay_ms": 500, "idempotency_key": "recon-key-02"});
    let out = d
        .dispatch(ToolCall::new("c", "slow_payout", args.clone()), &alice())
        .await;
    let op = out.operation_id.unwrap();
    ledger.landed.lock().unwrap().insert(op.to_string(), 0);
    let report = d.operation_status(&alice(), &op).await.unwrap();
    assert_eq!(report.state, OperationState::Failed);
    let fast = json!({"cents": 9, "delay_ms": 0, "idempotency_key": "recon-key-02"});
    let _ = args;
    let retry = d
        .dispatch(ToolCall::new("c", "slow_payout", fast), &alice())
        .await;
    assert_eq!(retry.status, Status::Ok);
    assert!(!retry.replayed);
    assert_eq!(ledger.runs(), 2);
}

/// Under `policy`, a first transfer of `amount` executes and uses up what the policy allows; a new
/// request is then denied with `reason`, while the retry of the executed call gets its stored
/// outcome (`replayed`, same output and operation id) and nothing executes twice.
async fn retry_replays_past_a_denial(
    policy: RiskPolicy,
    amount: u64,
    keys: [&str; 2],
    reason: &str,
) {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let d = dispatcher(policy, ledger.clone(), clock);
    let call = ToolCall::new("a", "transfer_funds", transfer(amount, keys[0]));
    let first = d.dispatch(call.clone(), &alice()).await;
    assert_eq!(first.status, Status::Ok, "{first:?}");
    let fresh = d
        .dispatch(
            ToolCall::new("b", "transfer_funds", transfer(amount, keys[1])),
            &alice(),
        )
        .await;
    assert_eq!(
        (fresh.status, fresh.reason.as_deref()),
        (Status::PolicyDenied, Some(reason))
    );
    let retry = d.dispatch(call, &alice()).await;
    assert_eq!(retry.status, Status::Ok, "{retry:?}");
    assert!(retry.replayed);
    assert_eq!(retry.output, first.output);
    assert_eq!(retry.operation_id, first.operation_id);
    assert_eq!(ledger.transfers(), 1);
}

#[tokio::test]
async fn a_retry_of_an_executed_call_replays_when_the_session_limit_is_used_up() {
    let policy = RiskPolicy::new().session_limit(
        "transfer_funds",
        1_000_000,
        Duration::from_secs(3600),
        OnExceed::Deny,
    );
    retry_replays_past_a_denial(
        policy,
        800_000,
        ["limit-retry-1", "limit-retry-2"],
        "session_limit",
    )
    .await;
}

#[tokio::test]
async fn a_retry_of_an_executed_call_replays_when_the_call_rate_is_hit() {
    let policy = RiskPolicy::new().session_rate("transfer_funds", 1, Duration::from_secs(60));
    retry_replays_past_a_denial(
        policy,
        100,
        ["rate-retry-01", "rate-retry-02"],
        "rate_limited",
    )
    .await;
}

#[tokio::test]
async fn approval_without_an_idempotency_key_fails_closed() {
    let ledger = Arc::new(Ledger::seeded());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let policy = RiskPolicy::new().require_approval_when(|spec, _, _| spec.name == "echo_note");
    let d = dispatcher(policy, ledger.clone(), clock);
    for _ in 0..2 {
        let out = d
            .dispatch(
                ToolCall::new("c", "echo_note", json!({"note": "hi"})),
                &alice(),
            )
            .await;
        assert_eq!(out.status, Status::PolicyDenied, "{out:?}");
        assert_eq!(
            out.reason.as_deref(),
            Some("approval_needs_idempotency_key")
        );
        assert!(out.approval.is_none());
    }
    assert!(
        d.approvals()
            .pending(&toolguard::Principal::new("acme", "viewer", "console"))
            .await
            .unwrap()
            .is_empty(),
        "no request was opened"
    );
    assert_eq!(ledger.runs(), 0);
}

#[tokio::test]
async fn an_unreadable_amount_is_denied_never_counted_as_zero() {
    let ledger = Arc::new(Ledger::seeded());
    let mut payout = SpecTool::new("loose_payout", json!({"type": "string"}), json!("paid"));
    let mut amount = toolguard::FieldSpec::new("amount").with_kind(toolguard::FieldKind::Opaque);
    amount.amount = true;
    payout.spec.fields = vec![amount];
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(payout)
        .audit(MemoryAuditSink::new())
        .store(Arc::new(MemoryStore::new()))
        .policy(RiskPolicy::new().session_limit(
            "loose_payout",
            1_000,
            Duration::from_secs(3600),
            OnExceed::Deny,
        ))
        .build()
        .unwrap();
    for amount in [
        json!(-5_000),
        json!(2.5),
        json!("5000"),
        json!([5_000]),
        json!({"cents": 5_000}),
        json!({"amount": -1}),
    ] {
        let out = d
            .dispatch(
                ToolCall::new("c", "loose_payout", json!({"amount": amount})),
                &alice(),
            )
            .await;
        assert_eq!(
            (out.status, out.reason.as_deref()),
            (Status::PolicyDenied, Some("amount_unreadable")),
            "{amount}: {out:?}"
        );
    }
    assert_eq!(ledger.runs(), 0);
    let ok = d
        .dispatch(
            ToolCall::new("c", "loose_payout", json!({"amount": 600})),
            &alice(),
        )
        .await;
    assert_eq!(ok.status, Status::Ok, "{ok:?}");
    let over = d
        .dispatch(
            ToolCall::new("c", "loose_payout", json!({"amount": {"amount": 600}})),
            &alice(),
        )
        .await;
    assert_eq!(
        (over.status, over.reason.as_deref()),
        (Status::PolicyDenied, Some("session_limit"))
    );
    assert_eq!(ledger.runs(), 1);
}
