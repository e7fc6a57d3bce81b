//! A sealed approval record cannot be altered into a different authority, on every backend that
//! stores approvals: memory, SQLite (feature `sqlite`) and PostgreSQL (feature `postgres`,
//! `TOOLGUARD_PG_URL`). Redis stores no approvals.
//!
//! The attacker edits the stored record directly in the backend (the JSON body of the SQL row,
//! the map of the memory store), one field at a time; reading it back, the seal check refuses it
//! and, for the fields the binding covers, so does the keyed binding.

mod store_support;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Value, json};
use toolguard::digest::{approval_binding_matches, keyed_approval_binding, keyed_request_digest};
use toolguard::seal::{SealError, verify_approval_seal};
use toolguard::store::{
    ApprovalDecision, ApprovalRequest, ApprovalState, ApprovalStore, MemoryStore, ScopedKey,
};
use toolguard::{HostKeys, Principal, ProviderContext};

type Tamper = Box<
    dyn Fn(String, Box<dyn FnOnce(&mut Value) + Send>) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

struct Approvals {
    store: Arc<dyn ApprovalStore>,
    tamper: Tamper,
    cleanup: store_support::PendingCleanup,
}

fn keys() -> HostKeys {
    HostKeys::new("k1", *b"approval-seal-secret-0123456789a").unwrap()
}

fn sealed_request(id: &str) -> ApprovalRequest {
    let keys = keys();
    let mut requester = Principal::new("acme", "alice", "sess-1");
    requester = requester.with_role("clerk");
    let args =
        json!({"from_account": "acc-1", "to_account": "acc-2", "amount": 500, "pin": "1234"});
    let mut r = ApprovalRequest {
        id: id.into(),
        version: 0,
        state: ApprovalState::Pending,
        requester,
        tool: "transfer_funds".into(),
        call_id: "call-1".into(),
        operation_id: format!("op-{id}"),
        idempotency: Some(ScopedKey {
            tenant: "acme".into(),
            subject: "alice".into(),
            tool: "transfer_funds".into(),
            key: "key-1".into(),
        }),
        provider: Some(ProviderContext {
            provider: "openai".into(),
            api_family: "responses".into(),
            adapter_revision: "1".into(),
            response_id: Some("resp-1".into()),
        }),
        request_digest: keyed_request_digest(&keys, "transfer_funds", 1, &args, "acme", "alice"),
        binding_digest: String::new(),
        arguments: args,
        preview: "transfer_funds requested by alice".into(),
        eligible_roles: vec!["approver".into()],
        approvals_required: 2,
        decisions: Vec::new(),
        tool_revision: 1,
        policy_revision: 3,
        amount: Some(500),
        cause: "critical".into(),
        cause_message: None,
        created_at_ms: 1_000,
        expires_at_ms: 61_000,
        seal: None,
        provenance: Vec::new(),
        origins: Vec::new(),
    };
    r.binding_digest = keyed_approval_binding(&keys, &r, None);
    r.sealed(&keys)
}

/// Each edit an attacker with write access might make, and whether the keyed binding covers the
/// field (the seal covers every field).
/// A named edit of the stored JSON body, and whether the keyed binding covers the field.
type Edit = (&'static str, bool, fn(&mut Value));

fn edits() -> Vec<Edit> {
    vec![
        ("arguments", false, |v| {
            v["arguments"]["to_account"] = json!("acc-mallory")
        }),
        ("amount", true, |v| v["amount"] = json!(5)),
        ("tool", true, |v| v["tool"] = json!("get_balance")),
        ("requester", true, |v| {
            v["requester"]["subject"] = json!("bob")
        }),
        ("tenant", true, |v| {
            v["requester"]["tenant"] = json!("globex")
        }),
        ("requester roles", false, |v| {
            v["requester"]["roles"] = json!(["admin"])
        }),
        ("eligible roles widened", true, |v| {
            v["eligible_roles"] = json!(["approver", "clerk"])
        }),
        ("approvers lowered", true, |v| {
            v["approvals_required"] = json!(1)
        }),
        ("expiry extended", true, |v| {
            v["expires_at_ms"] = json!(9_999_999)
        }),
        ("created_at", true, |v| v["created_at_ms"] = json!(2_000)),
        ("policy revision", true, |v| v["policy_revision"] = json!(4)),
        ("tool revision", true, |v| v["tool_revision"] = json!(2)),
        ("provider path", true, |v| {
            v["provider"]["provider"] = json!("mcp")
        }),
        ("preview", false, |v| v["preview"] = json!("harmless")),
        ("request digest", true, |v| {
            v["request_digest"] = json!("k1:00")
        }),
        ("binding digest", false, |v| {
            v["binding_digest"] = json!("k1:00")
        }),
        ("idempotency key", true, |v| {
            v["idempotency"]["key"] = json!("key-2")
        }),
        ("cause", true, |v| v["cause"] = json!("policy")),
        ("forged decision", false, |v| {
            v["decisions"] = json!([{"approver": "mallory", "approve": true, "at_ms": 2000,
                "digest": "k1:00", "reason": null}])
        }),
        ("state", false, |v| v["state"] = json!("executed")),
        ("seal swapped", false, |v| v["seal"] = json!("k1:00")),
    ]
}

async fn every_field_is_sealed(a: &Approvals) {
    let keys = keys();
    let original = sealed_request("apr-1");
    a.store.create(&original).await.unwrap();
    let stored = a.store.get("apr-1").await.unwrap().unwrap();
    assert_eq!(verify_approval_seal(&keys, &stored), Ok(()));
    assert!(approval_binding_matches(
        &keys,
        &stored.binding_digest,
        &stored,
        None
    ));
    let body = serde_json::to_value(&original).unwrap();
    for (name, in_binding, edit) in edits() {
        (a.tamper)("apr-1".into(), Box::new(edit)).await;
        let t = a.store.get("apr-1").await.unwrap().unwrap();
        assert_ne!(t, original, "{name}: the edit reached the store");
        assert_eq!(
            verify_approval_seal(&keys, &t),
            Err(SealError::Mismatch { id: "apr-1".into() }),
            "{name}"
        );
        if in_binding {
            assert!(
                !approval_binding_matches(&keys, &original.binding_digest, &t, None),
                "{name}: the binding covers it"
            );
        }
        let restore = body.clone();
        (a.tamper)("apr-1".into(), Box::new(move |v| *v = restore)).await;
    }
    // Removing the seal is refused too.
    (a.tamper)(
        "apr-1".into(),
        Box::new(|v| {
            v.as_object_mut().unwrap().remove("seal");
        }),
    )
    .await;
    let t = a.store.get("apr-1").await.unwrap().unwrap();
    assert_eq!(
        verify_approval_seal(&keys, &t),
        Err(SealError::Missing { id: "apr-1".into() })
    );
    assert_eq!(
        SealError::Missing { id: String::new() }.reason(),
        "binding_mismatch"
    );
}

/// The key holder re-seals on every write; `version` (the store's counter) is not sealed, so a
/// compare-and-set update verifies. A record sealed under a retired key no longer verifies.
async fn resealed_updates_verify(a: &Approvals) {
    let keys = keys();
    let r = sealed_request("apr-2");
    a.store.create(&r).await.unwrap();
    let mut next = a.store.get("apr-2").await.unwrap().unwrap();
    next.decisions.push(ApprovalDecision {
        approver: "bob".into(),
        approve: true,
        at_ms: 2_000,
        digest: keyed_approval_binding(&keys, &next, Some("bob")),
        reason: None,
    });
    let next = next.sealed(&keys);
    assert!(a.store.update(&next, 0).await.unwrap());
    let stored = a.store.get("apr-2").await.unwrap().unwrap();
    assert_eq!(stored.version, 1);
    assert_eq!(verify_approval_seal(&keys, &stored), Ok(()));
    // An update written without re-sealing (a stale seal) is refused on read.
    let mut stale = stored.clone();
    stale.state = ApprovalState::Executing;
    assert!(a.store.update(&stale, 1).await.unwrap());
    let stored = a.store.get("apr-2").await.unwrap().unwrap();
    assert!(verify_approval_seal(&keys, &stored).is_err());
    let rotated = HostKeys::new("k2", [5u8; 32]).unwrap();
    assert!(
        verify_approval_seal(&rotated, &r).is_err(),
        "k1 no longer accepted"
    );
    let rotated = rotated
        .accept("k1", *b"approval-seal-secret-0123456789a")
        .unwrap();
    assert_eq!(
        verify_approval_seal(&rotated, &r),
        Ok(()),
        "k1 still accepted"
    );
}

// ---------------------------------------------------------------- backends

fn memory(_test: &str) -> Approvals {
    let store = Arc::new(MemoryStore::new());
    let s2 = store.clone();
    Approvals {
        store,
        tamper: Box::new(move |id, f| {
            s2.with_approvals(|map| {
                let r = map.get_mut(&id).expect("stored");
                let mut v = serde_json::to_value(&*r).unwrap();
                f(&mut v);
                *r = serde_json::from_value(v).unwrap();
            });
            Box::pin(async {})
        }),
        cleanup: std::sync::Mutex::new(None),
    }
}

#[cfg(feature = "sqlite")]
fn sqlite(test: &str) -> Approvals {
    use rusqlite::{self, OptionalExtension};
    use toolguard::sqlite::SqliteStore;

    let path = store_support::sqlite_path(test);
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let tpath = path.clone();
    Approvals {
        store,
        tamper: Box::new(move |id, f| {
            let path = tpath.clone();
            Box::pin(async move {
                tokio::task::spawn_blocking(move || {
                    let c = rusqlite::Connection::open(&path).unwrap();
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
        }),
        cleanup: std::sync::Mutex::new(Some(Box::pin(async move {
            store_support::remove_sqlite(&path)
        }))),
    }
}

#[cfg(feature = "postgres")]
async fn postgres(test: &str) -> Option<Approvals> {
    use toolguard::postgres::{PgConfig, PgStore};

    let url = store_support::pg_url(test)?;
    let config = PgConfig::new(url)
        .schema(store_support::unique(test))
        .pool_size(4);
    let store = Arc::new(PgStore::connect(&config).await.unwrap());
    let (s2, s3) = (store.clone(), store.clone());
    Some(Approvals {
        store,
        tamper: Box::new(move |id, f| {
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
        }),
        cleanup: std::sync::Mutex::new(Some(Box::pin(async move {
            let _ = s3.drop_schema().await;
        }))),
    })
}

impl store_support::Rig for Approvals {
    fn cleanup(&self) -> &store_support::PendingCleanup {
        &self.cleanup
    }
}

async fn run<F, Fut>(a: Option<Approvals>, test: F)
where
    F: FnOnce(Arc<Approvals>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    store_support::run_rig(a, test).await;
}

macro_rules! seal_suite {
    ($module:ident, $make:expr, #[$attr:meta]) => {
        mod $module {
            seal_suite!(@tests $make, #[$attr]: every_field_is_sealed, resealed_updates_verify);
        }
    };
    (@tests $make:expr, #[$attr:meta]: $($name:ident),*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            #[$attr]
            async fn $name() {
                #[allow(clippy::redundant_closure_call)]
                let a = ($make)(stringify!($name)).await;
                crate::run(a, |a| async move { crate::$name(&a).await }).await;
            }
        )*
    };
}

seal_suite!(memory, |t| async move { Some(crate::memory(t)) }, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "sqlite")]
seal_suite!(sqlite, |t| async move { Some(crate::sqlite(t)) }, #[cfg_attr(any(), ignore)]);
#[cfg(feature = "postgres")]
seal_suite!(postgres, crate::postgres, #[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]);
