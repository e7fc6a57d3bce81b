//! Approvals hold under attack, through `dispatch` and `approve`, on every backend: memory,
//! SQLite (feature `sqlite`), PostgreSQL (feature `postgres`, `TOOLGUARD_PG_URL`) and the Redis
//! ledger (feature `redis`, `TOOLGUARD_REDIS_URL`, with approvals in memory).
//!
//! - A `Deny` session limit bounds what executes in total, approved or not: a pending request
//!   reserves its amount when it opens (a request that does not fit is refused and never
//!   stored), rejection and expiry give the room back, approval commits the reservation once,
//!   also with approvers racing on two dispatchers over one store.
//! - A request edited in the store (any field that decides whether or how the action runs) is
//!   refused with `binding_mismatch`, runs nothing and releases its reservation.
//! - An earlier sealed record put back in the store cannot make the action run twice.
//! - A stale requester's approved action does not run and gives its reservation back.
//!
//! Each test asserts the status, the executions, the money moved (the test ledger's balances
//! and the session ledger's total) and the audit entry.

mod store_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use toolguard::risk::session_scope;
use toolguard::store::{
    ApprovalState, ApprovalStore, IdempotencyStore, MemoryStore, OperationStore, SessionLedger,
};
use toolguard::{
    Clock, Dispatcher, HostKeys, ManualClock, MemoryAuditSink, OnExceed, Principal, RiskPolicy,
    Status, ToolCall, ToolContext, ToolError, ToolOutcome, tool,
};
use toolguard_tests::*;

/// Pays `amount` from alice's first account to bob's once one approver agrees.
#[tool(risk = "critical", idempotent)]
async fn payout(
    ctx: &ToolContext<Ledger>,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 1_000_000)]
    amount: u64,
) -> Result<u64, ToolError> {
    let mut accounts = ctx.state().accounts.lock().unwrap();
    if let Some(from) = accounts.get_mut("acc-alice-1") {
        from.balance -= amount as i64;
    }
    if let Some(to) = accounts.get_mut("acc-bob-1") {
        to.balance += amount as i64;
    }
    ctx.state().transfers.fetch_add(1, Ordering::SeqCst);
    Ok(amount)
}

const START: i64 = 100_000_000;
const WINDOW: Duration = Duration::from_secs(3600);
const TTL: Duration = Duration::from_secs(600);

fn keys() -> HostKeys {
    HostKeys::new("k1", *b"guarantee-approvals-secret-01234").unwrap()
}

/// Edits the stored JSON body of approval `id` in the backend itself.
type Edit = Arc<
    dyn Fn(String, Box<dyn FnOnce(&mut Value) + Send>) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

/// The stores of one backend, and a way to write to its approvals behind the dispatcher's back.
struct Rig {
    idem: Arc<dyn IdempotencyStore>,
    approvals: Arc<dyn ApprovalStore>,
    ledger: Arc<dyn SessionLedger>,
    operations: Arc<dyn OperationStore>,
    edit: Edit,
    cleanup: store_support::PendingCleanup,
}

/// One dispatcher over a rig (several share its stores, like replicas).
struct Replica {
    d: Dispatcher<Ledger>,
    audit: Arc<MemoryAuditSink>,
}

/// What the tests share: the test ledger the tools act on, the clock, the rig.
struct World {
    rig: Arc<Rig>,
    bank: Arc<Ledger>,
    clock: Arc<ManualClock>,
}

impl World {
    fn new(rig: Arc<Rig>) -> Self {
        World {
            rig,
            bank: Arc::new(Ledger::seeded()),
            clock: Arc::new(ManualClock::new(SystemTime::now())),
        }
    }

    fn replica(&self, policy: RiskPolicy, max_age: Duration) -> Replica {
        let audit = Arc::new(MemoryAuditSink::new());
        let r = &self.rig;
        let d = Dispatcher::builder_arc(self.bank.clone())
            .tool(Payout)
            .tool(WireOut)
            .host_keys(keys())
            .clock(self.clock.clone())
            .principal_max_age(max_age)
            .audit(audit.clone())
            .idempotency_store(r.idem.clone())
            .approval_store(r.approvals.clone())
            .session_ledger(r.ledger.clone())
            .operation_store(r.operations.clone())
            .policy(policy)
            .build()
            .expect("dispatcher builds");
        Replica { d, audit }
    }

    /// A replica whose payouts are bounded by a `Deny` session limit of 100.
    fn limited(&self) -> Replica {
        let policy = RiskPolicy::new()
            .approver_roles(["approver"])
            .approval_ttl(TTL)
            .session_limit("payout", 100, WINDOW, OnExceed::Deny);
        self.replica(policy, Duration::from_secs(12 * 3600))
    }

    fn now_as(&self, mut p: Principal) -> Principal {
        p.authenticated_at = self.clock.now();
        p
    }

    /// Cents that left alice's account.
    fn moved(&self) -> i64 {
        START - self.bank.balance("acc-alice-1")
    }

    /// What the session ledger counts for `tool` in `p`'s session (booked and reserved).
    async fn counted(&self, p: &Principal, tool: &str) -> u64 {
        let scope = session_scope(p, tool);
        self.rig
            .ledger
            .total(&scope, WINDOW, self.clock.now())
            .await
            .expect("ledger total")
    }

    /// The stored JSON body of approval `id`.
    async fn body(&self, id: &str) -> Value {
        let seen = Arc::new(Mutex::new(Value::Null));
        let s2 = seen.clone();
        (self.rig.edit)(
            id.to_owned(),
            Box::new(move |v| *s2.lock().unwrap() = v.clone()),
        )
        .await;
        let mut body = seen.lock().unwrap();
        std::mem::take(&mut *body)
    }
}

impl Replica {
    async fn pay(&self, p: &Principal, key: &str, amount: u64) -> ToolOutcome {
        let args = json!({"amount": amount, "idempotency_key": key});
        self.d.dispatch(ToolCall::new(key, "payout", args), p).await
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

fn ticket(out: &ToolOutcome) -> String {
    assert_eq!(out.status, Status::PendingApproval, "{out:?}");
    out.approval.as_ref().expect("a ticket").approval_id.clone()
}

// ---------------------------------------------------------------- the tests

/// Five approval-gated payouts of 30 under a `Deny` session limit of 100: three open, two are
/// refused without a request; approving the three moves 90, and nothing more fits.
async fn limits_hold_through_approvals(rig: Arc<Rig>) {
    let w = World::new(rig);
    let r = w.limited();
    let alice = w.now_as(alice());
    let mut ids = Vec::new();
    for i in 0..5 {
        let out = r.pay(&alice, &format!("limit-seq-{i}"), 30).await;
        if i < 3 {
            ids.push(ticket(&out));
        } else {
            assert_eq!(out.status, Status::PolicyDenied, "{i}: {out:?}");
            assert_eq!(out.reason.as_deref(), Some("session_limit"));
            assert_eq!(r.reason(&out).as_deref(), Some("session_limit"));
            assert!(out.approval.is_none(), "no request is created");
        }
    }
    let open = r.d.approvals().pending(&bob_approver()).await.unwrap();
    assert_eq!(open.len(), 3, "only the requests that fit were stored");
    assert_eq!(
        w.counted(&alice, "payout").await,
        90,
        "pending amounts are held"
    );
    for id in &ids {
        let out = r.d.approvals().approve(&w.now_as(bob_approver()), id).await;
        assert_eq!(out.status, Status::Ok, "{out:?}");
        assert_eq!(r.reason(&out), None);
    }
    assert_eq!(w.bank.transfers(), 3);
    assert_eq!(w.moved(), 90);
    assert_eq!(
        w.counted(&alice, "payout").await,
        90,
        "booked once, no longer held"
    );
    let over = r.pay(&alice, "limit-seq-over", 30).await;
    assert_eq!(over.status, Status::PolicyDenied, "{over:?}");
    assert_eq!(w.bank.transfers(), 3);
}

/// The same with every request opened concurrently on two replicas and two approvers racing
/// on each request, one per replica: at most the limit moves, each action runs once.
async fn racing_approvers_move_at_most_the_limit(rig: Arc<Rig>) {
    let w = World::new(rig);
    let (r1, r2) = (Arc::new(w.limited()), Arc::new(w.limited()));
    let alice = w.now_as(Principal::new("acme", "alice", "sess-race"));
    let mut opens = Vec::new();
    for i in 0..5 {
        let r = if i % 2 == 0 { r1.clone() } else { r2.clone() };
        let alice = alice.clone();
        opens.push(tokio::spawn(async move {
            r.pay(&alice, &format!("limit-race-{i}"), 30).await
        }));
    }
    let mut ids = Vec::new();
    for open in opens {
        let out = open.await.unwrap();
        match out.status {
            Status::PendingApproval => ids.push(ticket(&out)),
            Status::PolicyDenied => assert_eq!(out.reason.as_deref(), Some("session_limit")),
            other => panic!("unexpected {other:?}: {out:?}"),
        }
    }
    assert_eq!(ids.len(), 3, "exactly the requests that fit opened");
    let mut executed = 0;
    for id in &ids {
        let (a, b) = (r1.clone(), r2.clone());
        let (bob, dave) = (w.now_as(bob_approver()), w.now_as(dave_approver()));
        let (i1, i2) = (id.clone(), id.clone());
        let one = tokio::spawn(async move { a.d.approvals().approve(&bob, &i1).await });
        let two = tokio::spawn(async move { b.d.approvals().approve(&dave, &i2).await });
        for out in [one.await.unwrap(), two.await.unwrap()] {
            if out.status == Status::Ok {
                executed += 1;
            } else {
                assert!(
                    matches!(out.status, Status::InProgress | Status::PreconditionFailed),
                    "{out:?}"
                );
            }
        }
    }
    assert_eq!(executed, 3, "one approval of each request ran it");
    assert_eq!(w.bank.transfers(), 3);
    assert_eq!(w.moved(), 90);
    assert_eq!(w.counted(&alice, "payout").await, 90);
}

/// Rejection and expiry give the reserved room back: a request of 60 fits afterwards.
async fn rejection_and_expiry_release(rig: Arc<Rig>) {
    let w = World::new(rig);
    let r = w.limited();
    let alice = w.now_as(alice());
    let expiring = ticket(&r.pay(&alice, "release-0", 30).await);
    w.clock.advance(Duration::from_secs(360));
    let rejected = ticket(&r.pay(&alice, "release-1", 30).await);
    let kept = ticket(&r.pay(&alice, "release-2", 30).await);
    let refused = r.pay(&alice, "release-3", 60).await;
    assert_eq!(refused.status, Status::PolicyDenied, "{refused:?}");
    assert_eq!(w.counted(&alice, "payout").await, 90);
    // The first request expires; the second is rejected.
    w.clock.advance(Duration::from_secs(300));
    let out =
        r.d.approvals()
            .reject(&w.now_as(bob_approver()), &rejected, "no")
            .await;
    assert_eq!(out.status, Status::ApprovalRejected, "{out:?}");
    assert_eq!(r.reason(&out).as_deref(), Some("rejected"));
    let out =
        r.d.approvals()
            .approve(&w.now_as(bob_approver()), &expiring)
            .await;
    assert_eq!(out.status, Status::ApprovalExpired, "{out:?}");
    assert_eq!(
        w.counted(&alice, "payout").await,
        30,
        "only the kept request is held"
    );
    let sixty = ticket(&r.pay(&alice, "release-4", 60).await);
    let more = r.pay(&alice, "release-5", 30).await;
    assert_eq!(
        more.status,
        Status::PolicyDenied,
        "30 + 60 + 30 > 100: {more:?}"
    );
    for id in [&kept, &sixty] {
        let out = r.d.approvals().approve(&w.now_as(bob_approver()), id).await;
        assert_eq!(out.status, Status::Ok, "{out:?}");
    }
    assert_eq!(w.bank.transfers(), 2);
    assert_eq!(w.moved(), 90);
    assert_eq!(w.counted(&alice, "payout").await, 90);
}

/// A store write that would turn a request into a different authority.
type BodyEdit = fn(&mut Value);

fn tampering() -> Vec<(&'static str, BodyEdit)> {
    vec![
        ("approvers required lowered", |v| {
            v["approvals_required"] = json!(1)
        }),
        ("eligible roles widened", |v| {
            v["eligible_roles"] = json!(["approver", "clerk"])
        }),
        ("amount lowered", |v| v["amount"] = json!(5)),
        ("expiry extended", |v| {
            let e = v["expires_at_ms"].as_u64().unwrap();
            v["expires_at_ms"] = json!(e + 86_400_000)
        }),
        ("arguments changed", |v| v["arguments"]["amount"] = json!(5)),
        ("tool changed", |v| v["tool"] = json!("payout")),
        ("requester changed", |v| {
            v["requester"]["subject"] = json!("mallory")
        }),
        ("tenant changed", |v| {
            v["requester"]["tenant"] = json!("globex")
        }),
        ("policy revision changed", |v| {
            v["policy_revision"] = json!(v["policy_revision"].as_u64().unwrap() + 1)
        }),
        ("provider path changed", |v| {
            v["provider"] = json!({"provider": "mcp", "api_family": "tools",
                "adapter_revision": "1", "response_id": null})
        }),
        ("approval forged", |v| {
            v["decisions"] = json!([{"approver": "dave", "approve": true, "at_ms": 1,
                "digest": "k1:00", "reason": null}])
        }),
    ]
}

/// Each edit of a dual-control wire's stored request makes `approve` refuse it
/// (`binding_mismatch`), run nothing, and release its reservation; an untouched one runs.
async fn tampered_approval_refused(rig: Arc<Rig>) {
    let w = World::new(rig);
    let r = w.replica(
        RiskPolicy::new().approver_roles(["approver"]),
        Duration::from_secs(3600),
    );
    let alice = w.now_as(alice());
    for (i, (what, edit)) in tampering().into_iter().enumerate() {
        let call = ToolCall::new(
            format!("t{i}"),
            "wire_out",
            json!({"amount": 50, "idempotency_key": format!("tamper-{i}")}),
        );
        let id = ticket(&r.d.dispatch(call, &alice).await);
        assert_eq!(w.counted(&alice, "wire_out").await, 50, "{what}: held");
        (w.rig.edit)(id.clone(), Box::new(edit)).await;
        let approver = if what == "tenant changed" {
            carol_foreign_approver()
        } else {
            bob_approver()
        };
        let out = r.d.approvals().approve(&w.now_as(approver), &id).await;
        assert_eq!(out.status, Status::ApprovalRejected, "{what}: {out:?}");
        assert_eq!(out.reason.as_deref(), Some("binding_mismatch"), "{what}");
        assert_eq!(
            r.reason(&out).as_deref(),
            Some("binding_mismatch"),
            "{what}"
        );
        assert_eq!(w.bank.transfers(), 0, "{what}: nothing runs");
        assert_eq!(w.counted(&alice, "wire_out").await, 0, "{what}: released");
        let stored = w.rig.approvals.get(&id).await.unwrap().unwrap();
        assert_eq!(stored.state, ApprovalState::Rejected, "{what}");
    }
    // The control: an untouched request needs and accepts two approvers, and books 50.
    let call = ToolCall::new(
        "t-ok",
        "wire_out",
        json!({"amount": 50, "idempotency_key": "tamper-none"}),
    );
    let id = ticket(&r.d.dispatch(call, &alice).await);
    let first =
        r.d.approvals()
            .approve(&w.now_as(bob_approver()), &id)
            .await;
    assert_eq!(first.status, Status::PendingApproval, "{first:?}");
    let second =
        r.d.approvals()
            .approve(&w.now_as(dave_approver()), &id)
            .await;
    assert_eq!(second.status, Status::Ok, "{second:?}");
    assert_eq!(w.bank.transfers(), 1);
    assert_eq!(w.counted(&alice, "wire_out").await, 50);
}

/// After an approved payout ran, the attacker puts the earlier sealed `pending` record back:
/// approving it again finds its reservation used (`reservation_missing`) and runs nothing; the
/// call's stored outcome stays the real one.
async fn rolled_back_approval_cannot_execute_twice(rig: Arc<Rig>) {
    let w = World::new(rig);
    let r = w.limited();
    let alice = w.now_as(alice());
    let id = ticket(&r.pay(&alice, "rollback-1", 30).await);
    let earlier = w.body(&id).await;
    let out =
        r.d.approvals()
            .approve(&w.now_as(bob_approver()), &id)
            .await;
    assert_eq!(out.status, Status::Ok, "{out:?}");
    (w.rig.edit)(
        id.clone(),
        Box::new(move |v| {
            let version = v["version"].clone();
            *v = earlier;
            v["version"] = version;
        }),
    )
    .await;
    let again =
        r.d.approvals()
            .approve(&w.now_as(dave_approver()), &id)
            .await;
    assert_eq!(again.status, Status::PreconditionFailed, "{again:?}");
    assert_eq!(again.reason.as_deref(), Some("reservation_missing"));
    assert_eq!(r.reason(&again).as_deref(), Some("reservation_missing"));
    assert_eq!(w.bank.transfers(), 1);
    assert_eq!(w.moved(), 30);
    assert_eq!(w.counted(&alice, "payout").await, 30);
    let retry = r.pay(&alice, "rollback-1", 30).await;
    assert_eq!(
        retry.status,
        Status::Ok,
        "the real outcome is replayed: {retry:?}"
    );
    assert!(retry.replayed);
    assert_eq!(w.bank.transfers(), 1);
}

/// The requester's authentication went stale while the request waited: the approved action
/// does not run on the stored snapshot, and its reservation is given back.
async fn stale_requester_releases_its_reservation(rig: Arc<Rig>) {
    let w = World::new(rig);
    let policy = RiskPolicy::new()
        .approver_roles(["approver"])
        .session_limit("payout", 100, WINDOW, OnExceed::Deny);
    let r = w.replica(policy, Duration::from_secs(60));
    let alice = w.now_as(alice());
    let id = ticket(&r.pay(&alice, "stale-key-1", 80).await);
    assert_eq!(w.counted(&alice, "payout").await, 80);
    w.clock.advance(Duration::from_secs(120));
    let out =
        r.d.approvals()
            .approve(&w.now_as(bob_approver()), &id)
            .await;
    assert_eq!(out.status, Status::Forbidden, "{out:?}");
    assert_eq!(out.reason.as_deref(), Some("requester_stale"));
    assert_eq!(r.reason(&out).as_deref(), Some("requester_stale"));
    assert_eq!(w.bank.transfers(), 0);
    assert_eq!(w.moved(), 0);
    assert_eq!(w.counted(&alice, "payout").await, 0, "released");
}

// ---------------------------------------------------------------- backends

fn memory_edit(store: Arc<MemoryStore>) -> Edit {
    Arc::new(move |id, f| {
        store.with_approvals(|map| {
            let r = map.get_mut(&id).expect("stored");
            let mut v = serde_json::to_value(&*r).unwrap();
            f(&mut v);
            *r = serde_json::from_value(v).unwrap();
        });
        Box::pin(async {})
    })
}

fn memory(_test: &str) -> Option<Rig> {
    let store = Arc::new(MemoryStore::new());
    Some(Rig {
        idem: store.clone(),
        approvals: store.clone(),
        ledger: store.clone(),
        operations: store.clone(),
        edit: memory_edit(store),
        cleanup: Mutex::new(None),
    })
}

#[cfg(feature = "sqlite")]
fn sqlite(test: &str) -> Option<Rig> {
    use rusqlite::OptionalExtension;
    use toolguard::sqlite::SqliteStore;

    let path = store_support::sqlite_path(test);
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let tpath = path.clone();
    let edit: Edit = Arc::new(move |id, f| {
        let path = tpath.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let c = rusqlite::Connection::open(&path).unwrap();
                c.busy_timeout(Duration::from_secs(5)).unwrap();
                let body: String = c
                    .query_row(
                        "SELECT body FROM toolguard_approvals WHERE id = ?1",
                        [&id],
                        |r| r.get(0),
                    )
                    .optional()
                    .unwrap()
                    .expect("stored");
                let mut v: Value = serde_json::from_str(&body).unwrap();
                f(&mut v);
                c.execute(
                    "UPDATE toolguard_approvals SET body = ?1 WHERE id = ?2",
                    [v.to_string(), id],
                )
                .unwrap();
            })
            .await
            .unwrap();
        })
    });
    Some(Rig {
        idem: store.clone(),
        approvals: store.clone(),
        ledger: store.clone(),
        operations: store,
        edit,
        cleanup: Mutex::new(Some(Box::pin(async move {
            store_support::remove_sqlite(&path)
        }))),
    })
}

#[cfg(feature = "postgres")]
async fn postgres(test: &str) -> Option<Rig> {
    use toolguard::postgres::{PgConfig, PgStore};

    let url = store_support::pg_url(test)?;
    let config = PgConfig::new(url)
        .schema(store_support::unique(test))
        .pool_size(8);
    let store = Arc::new(PgStore::connect(&config).await.unwrap());
    let (s2, s3) = (store.clone(), store.clone());
    let edit: Edit = Arc::new(move |id, f| {
        let s2 = s2.clone();
        Box::pin(async move {
            let c = s2.pool().get().await.unwrap();
            let row = c
                .query_one("SELECT body FROM toolguard_approvals WHERE id = $1", &[&id])
                .await
                .unwrap();
            let mut v: Value = serde_json::from_str(row.get::<_, &str>(0)).unwrap();
            f(&mut v);
            c.execute(
                "UPDATE toolguard_approvals SET body = $1 WHERE id = $2",
                &[&v.to_string(), &id],
            )
            .await
            .unwrap();
        })
    });
    Some(Rig {
        idem: store.clone(),
        approvals: store.clone(),
        ledger: store.clone(),
        operations: store,
        edit,
        cleanup: Mutex::new(Some(Box::pin(async move {
            let _ = s3.drop_schema().await;
        }))),
    })
}

/// The Redis ledger and idempotency store, with approvals and operations in memory (Redis
/// stores neither).
#[cfg(feature = "redis")]
async fn redis(test: &str) -> Option<Rig> {
    use toolguard::redis::RedisStore;

    let url = store_support::redis_url(test)?;
    let store = Arc::new(
        RedisStore::connect(&url, store_support::unique(test))
            .await
            .unwrap(),
    );
    let memory = Arc::new(MemoryStore::new());
    let s2 = store.clone();
    Some(Rig {
        idem: store.clone(),
        approvals: memory.clone(),
        ledger: store,
        operations: memory.clone(),
        edit: memory_edit(memory),
        cleanup: Mutex::new(Some(Box::pin(async move {
            let _ = s2.clear().await;
        }))),
    })
}

impl store_support::Rig for Rig {
    fn cleanup(&self) -> &store_support::PendingCleanup {
        &self.cleanup
    }
}

async fn run<F, Fut>(rig: Option<Rig>, test: F)
where
    F: FnOnce(Arc<Rig>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    store_support::run_rig(rig, test).await;
}

macro_rules! suite {
    ($module:ident, $make:expr, #[$attr:meta]) => {
        mod $module {
            suite!(@tests $make, #[$attr]:
                limits_hold_through_approvals,
                racing_approvers_move_at_most_the_limit,
                rejection_and_expiry_release,
                tampered_approval_refused,
                rolled_back_approval_cannot_execute_twice,
                stale_requester_releases_its_reservation);
        }
    };
    (@tests $make:expr, #[$attr:meta]: $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[$attr]
            async fn $name() {
                #[allow(clippy::redundant_closure_call)]
                let rig = ($make)(stringify!($name)).await;
                crate::run(rig, crate::$name).await;
            }
        )*
    };
}

suite!(memory, |t| async move { crate::memory(t) }, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "sqlite")]
suite!(sqlite, |t| async move { crate::sqlite(t) }, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "postgres")]
suite!(postgres, crate::postgres, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
#[cfg(feature = "redis")]
suite!(redis, crate::redis, #[cfg_attr(not(toolguard_redis), ignore = "set TOOLGUARD_REDIS_URL to run")]);
