//! Approval notifications and metrics in the core: which events a notifier gets and when, that a
//! panicking notifier changes no outcome, that an undeliverable notification is audited, and the
//! `tool_approval_latency` histogram and per-tenant `tool_approval_pending` gauge.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use metrics_util::MetricKind;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use serde_json::json;
use toolguard::audit::AuditEvent;
use toolguard::notify::{ApprovalEvent, ApprovalEventKind, ApprovalNotifier, NotifyReport};
use toolguard::{
    Dispatcher, ManualClock, MemoryAuditSink, MemoryStore, RiskPolicy, Status, ToolCall,
};
use toolguard_tests::*;

/// Keeps every event; audits the ones whose tool it is told to "lose".
#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<ApprovalEvent>>>,
}

impl ApprovalNotifier for Recorder {
    fn notify(&self, event: ApprovalEvent, report: NotifyReport) {
        self.events.lock().unwrap().push(event.clone());
        if event.kind == ApprovalEventKind::Decided {
            tokio::spawn(async move {
                report
                    .undeliverable(&event, "test_undeliverable")
                    .await
                    .unwrap();
            });
        }
    }
}

struct Panicky;

impl ApprovalNotifier for Panicky {
    fn notify(&self, _event: ApprovalEvent, _report: NotifyReport) {
        panic!("a notifier bug");
    }
}

struct H {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
    clock: Arc<ManualClock>,
    events: Arc<Mutex<Vec<ApprovalEvent>>>,
}

fn harness() -> H {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let recorder = Recorder::default();
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(WireOut)
        .audit(audit.clone())
        .clock(clock.clone())
        .store(Arc::new(MemoryStore::new()))
        .policy(
            RiskPolicy::new()
                .approver_roles(["approver"])
                .approval_ttl(Duration::from_secs(600)),
        )
        .notifier(Panicky)
        .notifier(recorder.clone())
        .build()
        .unwrap();
    H {
        d,
        ledger,
        audit,
        clock,
        events: recorder.events,
    }
}

impl H {
    async fn propose(&self, tool: &str, mut args: serde_json::Value, key: &str) -> String {
        args["idempotency_key"] = json!(key);
        let out = self
            .d
            .dispatch(ToolCall::new(key, tool, args.to_string()), &alice())
            .await;
        assert_eq!(out.status, Status::PendingApproval, "{out:?}");
        out.approval.unwrap().approval_id
    }

    async fn transfer(&self, key: &str) -> String {
        let args = json!({"from_account": "acc-alice-1", "to_account": "acc-bob-1",
            "amount": 2_000_000, "currency": "USD"});
        self.propose("transfer_funds", args, key).await
    }

    fn kinds(&self, id: &str) -> Vec<ApprovalEventKind> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.approval_id == id)
            .map(|e| e.kind)
            .collect()
    }
}

#[tokio::test]
async fn notifiers_hear_of_opening_progress_decision_and_expiry_and_a_panic_changes_nothing() {
    use ApprovalEventKind::*;
    let h = harness();
    // Dual control: opened, one approval, then decided with the outcome.
    let wire = h
        .propose("wire_out", json!({"amount": 4_500_000}), "wire-key-1")
        .await;
    assert_eq!(h.kinds(&wire), vec![Opened]);
    let out = h.d.approvals().approve(&bob_approver(), &wire).await;
    assert_eq!(out.status, Status::PendingApproval);
    assert_eq!(h.kinds(&wire), vec![Opened, Approved]);
    let out = h.d.approvals().approve(&dave_approver(), &wire).await;
    assert_eq!(
        out.status,
        Status::Ok,
        "a panicking notifier changes no outcome"
    );
    assert_eq!(h.ledger.transfers(), 1);
    assert_eq!(h.kinds(&wire), vec![Opened, Approved, Decided]);
    let last = h.events.lock().unwrap().last().unwrap().clone();
    assert_eq!(last.status, Some(Status::Ok));
    assert_eq!(last.approvals_given, 2);
    assert_eq!(last.approver.as_deref(), Some("dave"));
    // Rejection.
    let rejected = h.transfer("reject-key-1").await;
    h.d.approvals()
        .reject(&bob_approver(), &rejected, "unknown payee")
        .await;
    assert_eq!(h.kinds(&rejected), vec![Opened, Decided]);
    // A refused decision is no event.
    let refused = h.transfer("refused-key-1").await;
    let out = h.d.approvals().approve(&alice(), &refused).await;
    assert_eq!(out.status, Status::Forbidden);
    assert_eq!(h.kinds(&refused), vec![Opened]);
    // Expiry, noticed when the queue is read.
    h.clock.advance(Duration::from_secs(601));
    h.d.approvals()
        .pending(&toolguard::Principal::new("acme", "viewer", "console"))
        .await
        .unwrap();
    assert_eq!(h.kinds(&refused), vec![Opened, Expired]);
    let expired = h.events.lock().unwrap().last().unwrap().clone();
    assert_eq!(expired.status, Some(Status::ApprovalExpired));
    // Reading again announces nothing twice.
    h.d.approvals()
        .pending(&toolguard::Principal::new("acme", "viewer", "console"))
        .await
        .unwrap();
    assert_eq!(h.kinds(&refused), vec![Opened, Expired]);
}

#[tokio::test]
async fn an_undeliverable_notification_is_an_audit_entry_of_its_own_kind() {
    let h = harness();
    let id = h.transfer("audit-key-1").await;
    h.d.approvals().approve(&bob_approver(), &id).await;
    for _ in 0..500 {
        if h.audit
            .entries()
            .iter()
            .any(|e| e.record.event == AuditEvent::Notification)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let entries: Vec<_> = h
        .audit
        .entries()
        .into_iter()
        .filter(|e| e.record.event == AuditEvent::Notification)
        .collect();
    assert_eq!(entries.len(), 1);
    let r = &entries[0].record;
    assert_eq!(r.reason.as_deref(), Some("test_undeliverable"));
    assert_eq!(r.approval_id.as_deref(), Some(id.as_str()));
    assert_eq!(r.status, Some(Status::Ok));
    assert_eq!((r.tenant.as_str(), r.subject.as_str()), ("acme", "alice"));
    assert!(r.arguments.is_none());
    h.audit.verify().unwrap();
    let json = serde_json::to_value(&entries[0]).unwrap();
    assert_eq!(json["event"], "notification");
}

#[test]
fn approval_latency_and_the_pending_gauge_per_tool_and_tenant() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let h = harness();
            let a = h.transfer("metric-key-1").await;
            let b = h.transfer("metric-key-2").await;
            h.transfer("metric-key-3").await;
            h.clock.advance(Duration::from_secs(90));
            h.d.approvals().approve(&bob_approver(), &a).await;
            h.d.approvals().reject(&bob_approver(), &b, "no").await;
        });
    });
    let mut gauge = None;
    let mut latencies = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let (kind, key) = key.into_parts();
        let label = |name: &str| {
            key.labels()
                .find(|l| l.key() == name)
                .map(|l| l.value().to_owned())
        };
        match (kind, key.name(), value) {
            (MetricKind::Gauge, "tool_approval_pending", DebugValue::Gauge(v)) => {
                assert_eq!(label("tool").as_deref(), Some("transfer_funds"));
                assert_eq!(label("tenant").as_deref(), Some("acme"));
                gauge = Some(v.into_inner());
            }
            (MetricKind::Histogram, "tool_approval_latency", DebugValue::Histogram(v)) => {
                assert_eq!(label("tenant").as_deref(), Some("acme"));
                let decision = label("decision").unwrap();
                for s in v {
                    latencies.push((decision.clone(), s.into_inner()));
                }
            }
            _ => {}
        }
    }
    assert_eq!(gauge, Some(1.0), "three opened, two decided");
    latencies.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        latencies,
        vec![("approved".to_owned(), 90.0), ("rejected".to_owned(), 90.0)]
    );
}
