//! The webhook notifier against a local HTTP server on 127.0.0.1: signatures verify, failures are
//! retried, delivery gives up after its bound and is audited, and a dead endpoint never touches
//! the call path.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use toolguard::audit::AuditEvent;
use toolguard::notify::{ApprovalEvent, ApprovalEventKind};
use toolguard::{
    Dispatcher, ManualClock, MemoryAuditSink, MemoryStore, RiskPolicy, Status, ToolCall,
};
use toolguard_console::webhook::{
    DELIVERY_HEADER, EVENT_HEADER, Format, Retry, SIGNATURE_HEADER, WebhookNotifier,
    verify_signature,
};
use toolguard_tests::*;

const SECRET: &[u8] = b"whsec_0123456789abcdef0123456789abcdef";

/// What the receiving server does with each request.
#[derive(Clone, Copy)]
enum Behaviour {
    /// Fail this many requests with 500, then answer 200.
    FailFirst(usize),
    /// Answer 503 forever.
    AlwaysFail,
    /// Never answer.
    Hang,
}

#[derive(Clone)]
struct Receiver {
    behaviour: Behaviour,
    seen: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

async fn receive(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let n = {
        let mut seen = r.seen.lock().unwrap();
        seen.push((headers, body));
        seen.len()
    };
    match r.behaviour {
        Behaviour::FailFirst(k) if n <= k => StatusCode::INTERNAL_SERVER_ERROR,
        Behaviour::FailFirst(_) => StatusCode::OK,
        Behaviour::AlwaysFail => StatusCode::SERVICE_UNAVAILABLE,
        Behaviour::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::OK
        }
    }
}

/// Starts a receiver; returns its URL and what it saw.
async fn receiver(behaviour: Behaviour) -> (String, Arc<Mutex<Vec<(HeaderMap, Bytes)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(Receiver {
            behaviour,
            seen: seen.clone(),
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, seen)
}

fn fast_retry(max_elapsed_ms: u64) -> Retry {
    Retry {
        max_elapsed: Duration::from_millis(max_elapsed_ms),
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(80),
        attempt_timeout: Duration::from_secs(5),
    }
}

struct H {
    d: Dispatcher<Ledger>,
    ledger: Arc<Ledger>,
    audit: Arc<MemoryAuditSink>,
}

fn harness(hooks: Vec<WebhookNotifier>) -> H {
    harness_with_clock(hooks, Arc::new(ManualClock::new(SystemTime::now())))
}

fn harness_with_clock(hooks: Vec<WebhookNotifier>, clock: Arc<ManualClock>) -> H {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let mut b = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .audit(audit.clone())
        .clock(clock)
        .store(Arc::new(MemoryStore::new()))
        .policy(
            RiskPolicy::new()
                .approver_roles(["approver"])
                .approval_ttl(Duration::from_secs(600)),
        );
    for hook in hooks {
        b = b.notifier(hook);
    }
    H {
        d: b.build().unwrap(),
        ledger,
        audit,
    }
}

impl H {
    async fn transfer(&self, key: &str) -> String {
        let args = json!({"from_account": "acc-alice-1", "to_account": "acc-bob-1",
            "amount": 2_000_000, "currency": "USD", "memo": "secret memo text",
            "idempotency_key": key});
        let out = self
            .d
            .dispatch(
                ToolCall::new(key, "transfer_funds", args.to_string()),
                &alice(),
            )
            .await;
        assert_eq!(out.status, Status::PendingApproval, "{out:?}");
        out.approval.unwrap().approval_id
    }

    fn notification_entries(&self) -> Vec<toolguard::AuditEntry> {
        self.audit
            .entries()
            .into_iter()
            .filter(|e| e.record.event == AuditEvent::Notification)
            .collect()
    }
}

/// Waits (up to 10 s) until `f` holds.
async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for: {what}");
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

#[tokio::test]
async fn events_arrive_as_json_whose_signature_verifies() {
    let (url, seen) = receiver(Behaviour::FailFirst(0)).await;
    let hook = WebhookNotifier::with(&url, SECRET, Format::Json, fast_retry(2000)).unwrap();
    let h = harness(vec![hook]);
    let id = h.transfer("key-signed-1").await;
    eventually("the opened event", || seen.lock().unwrap().len() == 1).await;
    let out = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(out.status, Status::Ok);
    eventually("the decided event", || seen.lock().unwrap().len() == 2).await;
    let seen = seen.lock().unwrap().clone();
    let mut kinds = Vec::new();
    for (headers, body) in &seen {
        let sig = header(headers, SIGNATURE_HEADER);
        assert!(sig.starts_with("t=") && sig.contains(",v1="), "{sig}");
        verify_signature(
            SECRET,
            sig,
            body,
            SystemTime::now(),
            Duration::from_secs(300),
        )
        .expect("the signature verifies");
        // Another secret or a changed body does not.
        assert!(
            verify_signature(
                b"another-secret-another-secret-0000",
                sig,
                body,
                SystemTime::now(),
                Duration::from_secs(300)
            )
            .is_err()
        );
        let mut changed = body.to_vec();
        changed[1] ^= 1;
        assert!(
            verify_signature(
                SECRET,
                sig,
                &changed,
                SystemTime::now(),
                Duration::from_secs(300)
            )
            .is_err()
        );
        assert_eq!(header(headers, "content-type"), "application/json");
        let event: ApprovalEvent = serde_json::from_slice(body).unwrap();
        assert_eq!(event.approval_id, id);
        assert_eq!(event.amount, Some(2_000_000));
        assert_eq!(
            header(headers, EVENT_HEADER),
            serde_json::to_value(event.kind).unwrap()
        );
        assert!(
            !String::from_utf8_lossy(body).contains("secret memo"),
            "no arguments travel"
        );
        kinds.push((event.kind, event.status));
    }
    assert_eq!(
        kinds,
        vec![
            (ApprovalEventKind::Opened, None),
            (ApprovalEventKind::Decided, Some(Status::Ok))
        ]
    );
    assert!(h.notification_entries().is_empty());
}

#[tokio::test]
async fn failed_deliveries_are_retried_with_the_same_delivery_id() {
    let (url, seen) = receiver(Behaviour::FailFirst(2)).await;
    let hook = WebhookNotifier::with(&url, SECRET, Format::Json, fast_retry(5000)).unwrap();
    let h = harness(vec![hook]);
    let id = h.transfer("key-retry-1").await;
    eventually("three attempts", || seen.lock().unwrap().len() == 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "delivered once, then no more attempts");
    let ids: Vec<&str> = seen
        .iter()
        .map(|(h, _)| header(h, DELIVERY_HEADER))
        .collect();
    assert!(ids[0].starts_with(&id));
    assert!(ids.iter().all(|d| *d == ids[0]));
    assert!(
        seen.iter().all(|(_, b)| *b == seen[0].1),
        "the same body every time"
    );
    assert!(h.notification_entries().is_empty());
}

#[tokio::test]
async fn delivery_gives_up_after_its_bound_and_the_audit_records_it() {
    let (url, seen) = receiver(Behaviour::AlwaysFail).await;
    let hook = WebhookNotifier::with(&url, SECRET, Format::Json, fast_retry(300)).unwrap();
    let h = harness(vec![hook]);
    let id = h.transfer("key-give-up-1").await;
    eventually("an audit entry for the undeliverable event", || {
        !h.notification_entries().is_empty()
    })
    .await;
    let attempts = seen.lock().unwrap().len();
    assert!(attempts >= 3, "retried before giving up ({attempts})");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        seen.lock().unwrap().len(),
        attempts,
        "no attempt after giving up"
    );
    let entries = h.notification_entries();
    assert_eq!(entries.len(), 1);
    let e = &entries[0].record;
    assert_eq!(e.reason.as_deref(), Some("webhook_undeliverable"));
    assert_eq!(e.approval_id.as_deref(), Some(id.as_str()));
    assert_eq!(e.tool, "transfer_funds");
    assert_eq!(e.tenant, "acme");
    h.audit.verify().expect("the chain stays intact");
    // The request itself is untouched and can still be decided.
    assert_eq!(
        h.d.approvals().approve(&bob_approver(), &id).await.status,
        Status::Ok
    );
}

#[tokio::test]
async fn a_dead_or_hanging_endpoint_never_touches_the_call_path() {
    let (hanging, seen) = receiver(Behaviour::Hang).await;
    // A port nobody listens on.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/hook", l.local_addr().unwrap())
    };
    let slow = Retry {
        attempt_timeout: Duration::from_secs(600),
        ..Retry::default()
    };
    let hooks = vec![
        WebhookNotifier::with(&hanging, SECRET, Format::Json, slow).unwrap(),
        WebhookNotifier::with(&closed, SECRET, Format::Json, Retry::default()).unwrap(),
    ];
    let h = harness(hooks);
    let id = h.transfer("key-dead-1").await;
    eventually("the hanging endpoint got the request", || {
        seen.lock().unwrap().len() == 1
    })
    .await;
    // While that delivery hangs, the decision completes and executes.
    let out = h.d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(out.status, Status::Ok);
    assert_eq!(h.ledger.transfers(), 1);
    let again = h.d.approvals().approve(&dave_approver(), &id).await;
    assert_ne!(again.status, Status::Ok);
    assert_eq!(h.ledger.transfers(), 1, "executed exactly once");
    assert!(
        h.notification_entries().is_empty(),
        "still retrying, not yet given up"
    );
}

#[tokio::test]
async fn the_chat_format_sends_a_summary_linking_to_the_console() {
    let (url, seen) = receiver(Behaviour::FailFirst(0)).await;
    let format = Format::Chat {
        console_url: "https://bank.example/console/".to_owned(),
    };
    let hook = WebhookNotifier::with(&url, SECRET, format, fast_retry(2000)).unwrap();
    let h = harness(vec![hook]);
    let id = h.transfer("key-chat-1").await;
    eventually("the chat message", || seen.lock().unwrap().len() == 1).await;
    let (headers, body) = seen.lock().unwrap()[0].clone();
    verify_signature(
        SECRET,
        header(&headers, SIGNATURE_HEADER),
        &body,
        SystemTime::now(),
        Duration::from_secs(60),
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&body).unwrap();
    let text = v["text"].as_str().unwrap();
    assert!(
        text.starts_with("Approval needed: transfer_funds of 20,000.00 USD requested by alice"),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(
            "Review: https://bank.example/console/requests/{id}"
        )),
        "{text}"
    );
    assert!(!text.contains("secret memo"));
}

#[tokio::test]
async fn an_expired_request_is_announced_when_the_queue_is_read() {
    let (url, seen) = receiver(Behaviour::FailFirst(0)).await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let hook = WebhookNotifier::with(&url, SECRET, Format::Json, fast_retry(2000)).unwrap();
    let h = harness_with_clock(vec![hook], clock.clone());
    let id = h.transfer("key-expiry-1").await;
    clock.advance(Duration::from_secs(601));
    assert!(
        h.d.approvals()
            .pending(&toolguard::Principal::new("acme", "viewer", "console"))
            .await
            .unwrap()
            .is_empty()
    );
    eventually("the expired event", || seen.lock().unwrap().len() == 2).await;
    let event: ApprovalEvent = serde_json::from_slice(&seen.lock().unwrap()[1].1).unwrap();
    assert_eq!(event.kind, ApprovalEventKind::Expired);
    assert_eq!(event.status, Some(Status::ApprovalExpired));
    assert_eq!(event.approval_id, id);
    assert_eq!(
        h.d.approvals().approve(&bob_approver(), &id).await.status,
        Status::ApprovalExpired
    );
    assert_eq!(h.ledger.transfers(), 0);
}

#[tokio::test]
async fn detection_alerts_are_posted_signed_with_their_evidence() {
    use toolguard::detect::{Alert, Detection};
    let (url, seen) = receiver(Behaviour::FailFirst(1)).await;
    let hook = WebhookNotifier::with(&url, SECRET, Format::Json, fast_retry(2_000)).unwrap();
    let d = Dispatcher::builder(Ledger::seeded())
        .tool(TransferFunds)
        .store(Arc::new(MemoryStore::new()))
        .detection(Detection::new().sink(hook))
        .build()
        .unwrap();
    let mut outs = Vec::new();
    for i in 1..=2 {
        let args = json!({
            "from_account": "acc-alice-1", "to_account": "ext-9", "amount": 800_000,
            "currency": "USD", "idempotency_key": format!("hook-alert-{i:04}"),
        });
        let call = ToolCall::new(format!("call-{i}"), "transfer_funds", args.to_string());
        outs.push(d.dispatch(call, &alice()).await);
    }
    // Duplicate execution, structuring per session and per subject: three alerts, the first
    // attempt of one refused and retried.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while seen.lock().unwrap().len() < 4 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4, "three alerts, one retried");
    let mut rules = Vec::new();
    for (headers, body) in &seen {
        assert_eq!(headers[EVENT_HEADER], "alert");
        assert!(
            headers[DELIVERY_HEADER]
                .to_str()
                .unwrap()
                .starts_with("alert.")
        );
        let signature = headers[SIGNATURE_HEADER].to_str().unwrap();
        verify_signature(
            SECRET,
            signature,
            body,
            SystemTime::now(),
            Duration::from_secs(60),
        )
        .unwrap();
        let alert: Alert = serde_json::from_slice(body).unwrap();
        assert_eq!(alert.evidence.call_ids, ["call-1", "call-2"]);
        let seqs: Vec<u64> = outs.iter().map(|o| o.audit_seq.unwrap()).collect();
        assert_eq!(alert.evidence.audit_seqs, seqs);
        rules.push(alert.rule);
    }
    rules.sort();
    rules.dedup();
    assert_eq!(rules, ["duplicate_execution", "structuring"]);
}
