//! The detection store on every backend (memory, SQLite, PostgreSQL, Redis), over real
//! connections: marks trimmed to window and count, one claim per crossing, responses that
//! expire or are lifted; and two dispatchers (replicas) sharing one store raising one alert and
//! honouring each other's hold.

mod store_support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;
use std::sync::atomic::Ordering;
use toolguard::detect::store::subject_key;
use toolguard::detect::{
    CollectingSink, Detection, DetectionStore, Mark, MemoryDetectionStore, Response, ResponseKind,
    Rule, SessionResponse,
};

use toolguard::{
    Dispatcher, ManualClock, MemoryAuditSink, MemoryStore, Principal, Status, ToolCall,
    ToolContext, ToolError, tool,
};
use toolguard_tests::*;

type Cleanup =
    Box<dyn FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send>;

fn nothing() -> Cleanup {
    Box::new(|| Box::pin(async {}))
}

async fn memory(_: &str) -> Option<(Arc<dyn DetectionStore>, Cleanup)> {
    Some((Arc::new(MemoryDetectionStore::new()), nothing()))
}

#[cfg(feature = "sqlite")]
async fn sqlite(test: &str) -> Option<(Arc<dyn DetectionStore>, Cleanup)> {
    use toolguard::sqlite::SqliteDetectionStore;
    let path = store_support::sqlite_path(test);
    let store = Arc::new(toolguard::sqlite::SqliteStore::open(&path).unwrap());
    let detect = SqliteDetectionStore::new(store).await.unwrap();
    let cleanup: Cleanup =
        Box::new(move || Box::pin(async move { store_support::remove_sqlite(&path) }));
    Some((Arc::new(detect), cleanup))
}

#[cfg(feature = "postgres")]
async fn postgres(test: &str) -> Option<(Arc<dyn DetectionStore>, Cleanup)> {
    use toolguard::postgres::PgDetectionStore;
    use toolguard::postgres::{PgConfig, PgStore};
    let url = store_support::pg_url(test)?;
    let config = PgConfig::new(url)
        .schema(store_support::unique(test))
        .pool_size(4);
    let store = PgStore::connect(&config).await.unwrap();
    let detect = PgDetectionStore::new(&store).await.unwrap();
    let cleanup: Cleanup =
        Box::new(move || Box::pin(async move { store.drop_schema().await.unwrap() }));
    Some((Arc::new(detect), cleanup))
}

#[cfg(feature = "redis")]
async fn redis(test: &str) -> Option<(Arc<dyn DetectionStore>, Cleanup)> {
    use toolguard::redis::RedisDetectionStore;
    use toolguard::redis::RedisStore;
    let url = store_support::redis_url(test)?;
    let store = RedisStore::connect(&url, store_support::unique(test))
        .await
        .unwrap();
    let detect = RedisDetectionStore::new(&store);
    let cleanup: Cleanup = Box::new(move || {
        Box::pin(async move {
            store.clear().await.unwrap();
        })
    });
    Some((Arc::new(detect), cleanup))
}

fn mark(call: &str, at: SystemTime, key: Option<&str>) -> Mark {
    Mark {
        call_id: call.to_owned(),
        audit_seq: Some(7),
        at_ms: toolguard::clock::unix_millis(at),
        key: key.map(str::to_owned),
    }
}

const WINDOW: Duration = Duration::from_secs(600);

/// Marks are trimmed to the newest `keep` and to the window; keyed marks count keys.
async fn marks_stay_bounded(store: Arc<dyn DetectionStore>) {
    let t0 = SystemTime::now();
    for i in 0..10 {
        let at = t0 + Duration::from_secs(i);
        let marks = store
            .observe("scope-a", mark(&format!("c{i}"), at, None), WINDOW, 3, at)
            .await
            .unwrap();
        assert_eq!(marks.0.len(), (i as usize + 1).min(3));
    }
    let later = t0 + WINDOW + Duration::from_secs(30);
    let marks = store
        .observe("scope-a", mark("late", later, None), WINDOW, 3, later)
        .await
        .unwrap();
    let ids: Vec<&str> = marks.0.iter().map(|m| m.call_id.as_str()).collect();
    assert_eq!(ids, ["late"], "marks older than the window are gone");
    assert_eq!(marks.0[0].audit_seq, Some(7));
    for (call, key) in [("k1", "ann"), ("k2", "ann"), ("k3", "ben")] {
        store
            .observe("scope-b", mark(call, t0, Some(key)), WINDOW, 10, t0)
            .await
            .unwrap();
    }
    let marks = store
        .observe("scope-b", mark("k4", t0, Some("ann")), WINDOW, 10, t0)
        .await
        .unwrap();
    let ids: Vec<&str> = marks.0.iter().map(|m| m.call_id.as_str()).collect();
    assert_eq!(ids, ["k3", "k4"], "one mark per key");
}

/// One claim per key while it lives.
async fn claims_are_exclusive(store: Arc<dyn DetectionStore>) {
    let t0 = SystemTime::now();
    assert!(store.claim("alert|x", WINDOW, t0).await.unwrap());
    assert!(!store.claim("alert|x", WINDOW, t0).await.unwrap());
    assert!(store.claim("alert|y", WINDOW, t0).await.unwrap());
}

/// Responses are read back, a block ends with its period, and lifting removes them.
async fn responses_live_until_lifted(store: Arc<dyn DetectionStore>) {
    let now = SystemTime::now();
    let now_ms = toolguard::clock::unix_millis(now);
    let hold = SessionResponse {
        tenant: "acme".into(),
        session: "s1".into(),
        kind: ResponseKind::Hold,
        rule: "structuring".into(),
        call_id: "c1".into(),
        since_ms: now_ms,
        until_ms: None,
        subject: None,
    };
    store.respond(&hold).await.unwrap();
    // A subject's response is kept apart from its sessions' (same tenant and session id).
    let of_subject = SessionResponse {
        subject: Some("s1".into()),
        ..hold.clone()
    };
    assert_ne!(of_subject.key(), hold.key());
    store.respond(&of_subject).await.unwrap();
    assert_eq!(
        store
            .response(&subject_key("acme", "s1"), now)
            .await
            .unwrap(),
        Some(of_subject.clone())
    );
    assert!(store.lift(&of_subject.key()).await.unwrap());
    assert_eq!(store.response(&of_subject.key(), now).await.unwrap(), None);
    let block = SessionResponse {
        session: "s2".into(),
        kind: ResponseKind::Block,
        until_ms: Some(now_ms + 60_000),
        ..hold.clone()
    };
    store.respond(&block).await.unwrap();
    assert_eq!(
        store.response(&hold.key(), now).await.unwrap(),
        Some(hold.clone())
    );
    assert_eq!(
        store.response(&block.key(), now).await.unwrap(),
        Some(block.clone())
    );
    let after = now + Duration::from_secs(61);
    assert_eq!(store.response(&block.key(), after).await.unwrap(), None);
    assert!(store.lift(&hold.key()).await.unwrap());
    assert_eq!(store.response(&hold.key(), now).await.unwrap(), None);
    assert!(!store.lift(&hold.key()).await.unwrap());
}

fn replica(
    store: Arc<dyn DetectionStore>,
    clock: Arc<ManualClock>,
    alerts: CollectingSink,
) -> Dispatcher<Ledger> {
    let detection = Detection::new()
        .store(store)
        .sink(alerts)
        .respond(Rule::Structuring, Response::Hold);
    Dispatcher::builder(Ledger::seeded())
        .tool(TransferFunds)
        .audit(MemoryAuditSink::new())
        .clock(clock)
        .store(Arc::new(MemoryStore::new()))
        .detection(detection)
        .build()
        .unwrap()
}

fn transfer(id: &str, amount: u64) -> ToolCall {
    let args = json!({
        "from_account": "acc-alice-1", "to_account": "ext-9", "amount": amount,
        "currency": "USD", "idempotency_key": format!("replica-key-{id}"),
    });
    ToolCall::new(id, "transfer_funds", args.to_string())
}

/// Two replicas share the store: one alert for the crossing, and a hold put in force by one is
/// honoured by the other until lifted there.
async fn replicas_agree(store: Arc<dyn DetectionStore>) {
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let alerts = CollectingSink::new();
    let a = replica(store.clone(), clock.clone(), alerts.clone());
    let b = replica(store, clock, alerts.clone());
    let p = Principal::new("acme", "alice", format!("sess-{}", uuid_like()));
    assert_eq!(
        a.dispatch(transfer("r1", 800_000), &p).await.status,
        Status::Ok
    );
    assert_eq!(
        b.dispatch(transfer("r2", 900_000), &p).await.status,
        Status::Ok
    );
    let session: Vec<_> = alerts
        .alerts()
        .into_iter()
        .filter(|x| x.rule == "structuring" && x.scope.kind() == "session")
        .collect();
    assert_eq!(session.len(), 1, "{session:?}");
    assert_eq!(session[0].evidence.call_ids, ["r1", "r2"]);
    let held = a.dispatch(transfer("r3", 5_000), &p).await;
    assert_eq!(
        held.status,
        Status::PendingApproval,
        "replica a sees b's hold"
    );
    assert!(
        b.detection()
            .lift(&bob_approver(), &p.session_id, "checked")
            .await
            .unwrap()
    );
    // The same crossing was counted for the subject too: its hold is lifted apart.
    assert_eq!(
        a.dispatch(transfer("r4", 5_000), &p).await.status,
        Status::PendingApproval,
        "the subject's hold outlives the session's"
    );
    assert!(
        b.detection()
            .lift_subject(&bob_approver(), "alice", "checked")
            .await
            .unwrap()
    );
    assert_eq!(
        a.dispatch(transfer("r5", 5_000), &p).await.status,
        Status::Ok
    );
}

/// Pays a supplier's invoice: moves the same kind of amount as `transfer_funds`.
#[tool(risk = "high", idempotent, approval_over = 1_000_000)]
async fn pay_invoice(
    ctx: &ToolContext<Ledger>,
    /// Invoice number.
    #[arg(kind = "identifier", max_len = 64)]
    invoice: String,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 100_000_000)]
    amount: u64,
    /// Currency.
    currency: Currency,
) -> Result<u64, ToolError> {
    let _ = (invoice, currency);
    ctx.state().transfers.fetch_add(1, Ordering::SeqCst);
    Ok(amount)
}

fn invoice(id: &str, amount: u64) -> ToolCall {
    let args = json!({
        "invoice": format!("inv-{id}"), "amount": amount, "currency": "USD",
        "idempotency_key": format!("invoice-key-{id}"),
    });
    ToolCall::new(id, "pay_invoice", args.to_string())
}

/// The incident spread out: six in-band payments of one subject, each from a new session and
/// alternating between two tools that move dollars. The second raises the subject's structuring
/// alert (no session ever has two); its hold stops the other four, in sessions opened after
/// it too, on every replica, until a reviewer lifts it. Another subject is not held.
async fn a_subject_hold_holds_every_session_of_the_subject(store: Arc<dyn DetectionStore>) {
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let alerts = CollectingSink::new();
    let ledger = Arc::new(Ledger::seeded());
    let replica = || {
        let detection = Detection::new()
            .store(store.clone())
            .sink(alerts.clone())
            .respond(Rule::Structuring, Response::Hold);
        Dispatcher::builder_arc(ledger.clone())
            .tool(TransferFunds)
            .tool(PayInvoice)
            .audit(MemoryAuditSink::new())
            .clock(clock.clone())
            .store(Arc::new(MemoryStore::new()))
            .detection(detection)
            .build()
            .unwrap()
    };
    let replicas = [replica(), replica()];
    let run = uuid_like();
    let mut statuses = Vec::new();
    for i in 0..6 {
        let p = Principal::new("acme", "alice", format!("sess-{run}-{i}"));
        let id = format!("spread-{run}-{i}");
        let call = if i % 2 == 0 {
            transfer(&id, 800_000)
        } else {
            invoice(&id, 800_000)
        };
        statuses.push(replicas[i % 2].dispatch(call, &p).await.status);
        clock.advance(Duration::from_secs(15));
    }
    assert_eq!(&statuses[..2], [Status::Ok, Status::Ok]);
    assert_eq!(
        &statuses[2..],
        [Status::PendingApproval; 4],
        "every later session of the subject is held"
    );
    assert_eq!(ledger.transfers(), 2, "two payments executed, four held");
    let fired = alerts.alerts();
    assert!(
        fired.iter().all(|a| a.scope.kind() == "subject"),
        "{fired:?}"
    );
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(
        fired[0].evidence.call_ids,
        [format!("spread-{run}-0"), format!("spread-{run}-1")],
        "counted across sessions and across the two tools"
    );
    assert_eq!(fired[0].response.as_deref(), Some("hold"));
    let held = replicas[0]
        .detection()
        .subject_response(&bob_approver(), "alice")
        .await
        .unwrap()
        .expect("the subject's hold");
    assert_eq!(held.subject.as_deref(), Some("alice"));
    assert_eq!(held.kind, ResponseKind::Hold);
    // Another subject of the tenant goes on.
    let carol = Principal::new("acme", "carol", format!("sess-{run}-carol"));
    let other = replicas[0]
        .dispatch(invoice(&format!("carol-{run}"), 5_000), &carol)
        .await;
    assert_eq!(other.status, Status::Ok);
    // Lifted on one replica, gone on the other, for a new session too.
    assert!(
        replicas[1]
            .detection()
            .lift_subject(&bob_approver(), "alice", "customer confirmed")
            .await
            .unwrap()
    );
    let fresh = Principal::new("acme", "alice", format!("sess-{run}-after"));
    let after = replicas[0]
        .dispatch(transfer(&format!("after-{run}"), 5_000), &fresh)
        .await;
    assert_eq!(after.status, Status::Ok);
}

fn uuid_like() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

macro_rules! backend_suite {
    ($backend:ident, $($attr:meta)?) => {
        mod $backend {
            use super::*;
            async fn with(test: &str, f: impl AsyncFnOnce(Arc<dyn DetectionStore>)) {
                let Some((store, cleanup)) = super::$backend(test).await else { return };
                f(store).await;
                cleanup().await;
            }
            #[tokio::test] $(#[$attr])?
            async fn marks_stay_bounded() { with("detect_marks", super::marks_stay_bounded).await }
            #[tokio::test] $(#[$attr])?
            async fn claims_are_exclusive() { with("detect_claims", super::claims_are_exclusive).await }
            #[tokio::test] $(#[$attr])?
            async fn responses_live_until_lifted() { with("detect_responses", super::responses_live_until_lifted).await }
            #[tokio::test] $(#[$attr])?
            async fn replicas_agree() { with("detect_replicas", super::replicas_agree).await }
            #[tokio::test] $(#[$attr])?
            async fn a_subject_hold_holds_every_session_of_the_subject() {
                with("detect_subject_hold", super::a_subject_hold_holds_every_session_of_the_subject).await
            }
        }
    };
}

backend_suite!(memory,);
#[cfg(feature = "sqlite")]
backend_suite!(sqlite,);
#[cfg(feature = "postgres")]
backend_suite!(
    postgres,
    cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")
);
#[cfg(feature = "redis")]
backend_suite!(
    redis,
    cfg_attr(
        not(toolguard_redis),
        ignore = "set TOOLGUARD_REDIS_URL to run"
    )
);

/// Idle scopes (window over) and spent claims are purged from the SQL backends.
#[cfg(feature = "sqlite")]
#[tokio::test]
async fn sqlite_purges_idle_scopes() {
    use toolguard::sqlite::SqliteDetectionStore;
    let path = store_support::sqlite_path("detect_purge");
    let store = Arc::new(toolguard::sqlite::SqliteStore::open(&path).unwrap());
    let detect = SqliteDetectionStore::new(store).await.unwrap();
    let t0 = SystemTime::now();
    detect
        .observe("idle", mark("c1", t0, None), WINDOW, 3, t0)
        .await
        .unwrap();
    detect.claim("alert|idle", WINDOW, t0).await.unwrap();
    assert_eq!(detect.purge(t0).await.unwrap(), 0, "nothing is idle yet");
    assert_eq!(detect.purge(t0 + WINDOW).await.unwrap(), 2);
    store_support::remove_sqlite(&path);
}

/// Idle scopes (window over) and spent claims are purged from the SQL backends.
#[cfg(feature = "postgres")]
#[tokio::test]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
async fn postgres_purges_idle_scopes() {
    use toolguard::postgres::PgDetectionStore;
    use toolguard::postgres::{PgConfig, PgStore};
    let Some(url) = store_support::pg_url("detect_purge") else {
        return;
    };
    let config = PgConfig::new(url)
        .schema(store_support::unique("detect_purge"))
        .pool_size(2);
    let store = PgStore::connect(&config).await.unwrap();
    let detect = PgDetectionStore::new(&store).await.unwrap();
    let t0 = SystemTime::now();
    detect
        .observe("idle", mark("c1", t0, None), WINDOW, 3, t0)
        .await
        .unwrap();
    detect.claim("alert|idle", WINDOW, t0).await.unwrap();
    assert_eq!(detect.purge(t0).await.unwrap(), 0, "nothing is idle yet");
    assert_eq!(detect.purge(t0 + WINDOW).await.unwrap(), 2);
    store.drop_schema().await.unwrap();
}
