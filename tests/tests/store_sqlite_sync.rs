//! A fully synced SQLite store (`Durability::Full`) syncs its write-ahead log on a thread of its
//! own. What waits for that sync, and what happens when the sync fails: writes that a later
//! synced write of the call covers (the reservation) are answered at commit once an audit trail
//! writes through the store's connection, and only then; the operation record written before the
//! handler always waits, so a log that cannot be synced stops the call before its handler runs.

#![cfg(feature = "sqlite")]

mod store_support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use toolguard::sqlite::SqliteBuilderExt as _;
use toolguard::sqlite::{Durability, SqliteStore};
use toolguard::store::{
    IdempotencyStore, OperationRecord, OperationState, OperationStore, Reservation, ScopedKey,
};
use toolguard::{Dispatcher, Status, ToolCall};
use toolguard_tests::*;

fn key(k: &str) -> ScopedKey {
    ScopedKey {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        key: k.into(),
    }
}

/// Removes the log file under the open connection: SQLite goes on writing to it, but it can
/// no longer be opened by name, so every sync of it fails.
fn unlink_wal(path: &std::path::Path) {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::remove_file(&wal).expect("the store's log file exists");
}

async fn reserve(store: &SqliteStore, k: &str) -> toolguard::store::StoreResult<Reservation> {
    let lease = Duration::from_secs(10);
    store
        .reserve(
            &key(k),
            "digest",
            Some("op-1"),
            lease,
            lease * 10,
            SystemTime::now(),
        )
        .await
}

fn executing(id: &str) -> OperationRecord {
    OperationRecord {
        id: id.into(),
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer_funds".into(),
        call_id: "c".into(),
        state: OperationState::Executing,
        outcome: None,
        arguments: serde_json::json!({}).into(),
        idempotency: None,
        approval_id: None,
        updated_at_ms: 1,
    }
}

/// Without a trail through the store's connection, every write waits for the sync: a failed
/// sync is a store error even for the reservation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_waits_for_the_sync_without_a_shared_trail() {
    let path = store_support::sqlite_path("sync_alone");
    let store = SqliteStore::open_with(&path, Durability::Full).unwrap();
    assert!(matches!(
        reserve(&store, "k-1").await,
        Ok(Reservation::Reserved { .. })
    ));
    unlink_wal(&path);
    let err = reserve(&store, "k-2").await.expect_err("the sync failed");
    assert!(err.message().contains("commit failed"), "{err}");
    drop(store);
    store_support::remove_sqlite(&path);
}

/// With the trail through the store's connection, the reservation is answered at commit (the
/// call's next synced write covers it), while the executing operation record still waits for
/// the sync and fails when it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn covered_writes_answer_at_commit_with_a_shared_trail() {
    let path = store_support::sqlite_path("sync_shared");
    let store = SqliteStore::open_with(&path, Durability::Full).unwrap();
    let _audit = store.audit_sink().unwrap();
    unlink_wal(&path);
    assert!(matches!(
        reserve(&store, "k-1").await,
        Ok(Reservation::Reserved { .. })
    ));
    let err = store
        .put(executing("op-1"))
        .await
        .expect_err("the executing record waits for the sync");
    assert!(err.message().contains("commit failed"), "{err}");
    drop(store);
    store_support::remove_sqlite(&path);
}

/// A dispatcher built with `.sqlite()` whose log cannot be synced fails closed: `unavailable`,
/// and the handler never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_sync_stops_the_call_before_its_handler() {
    let path = store_support::sqlite_path("sync_dispatch");
    let ledger = Arc::new(Ledger::seeded());
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .sqlite(&path)
        .unwrap()
        .unanchored_audit("this test is about syncing the log")
        .build()
        .unwrap();
    let args = |k: &str| {
        serde_json::json!({
            "from_account": "acc-alice-1", "to_account": "acc-alice-2",
            "amount": 500, "currency": "USD", "idempotency_key": k,
        })
    };
    let ok = d
        .dispatch(
            ToolCall::new("c1", "transfer_funds", args("key-0001")),
            &alice(),
        )
        .await;
    assert_eq!(ok.status, Status::Ok, "{ok:?}");
    assert_eq!(ledger.transfers.load(Ordering::SeqCst), 1);
    unlink_wal(&path);
    let out = d
        .dispatch(
            ToolCall::new("c2", "transfer_funds", args("key-0002")),
            &alice(),
        )
        .await;
    assert_eq!(out.status, Status::Unavailable, "{out:?}");
    // The first store access after the log is gone refuses the call: the session's provenance
    // sources (read before any state change) or, without them, the operation record.
    assert!(
        matches!(
            out.reason.as_deref(),
            Some("provenance_unavailable" | "operation_store_unavailable")
        ),
        "{out:?}"
    );
    assert_eq!(ledger.transfers.load(Ordering::SeqCst), 1, "nothing ran");
    drop(d);
    store_support::remove_sqlite(&path);
}

/// Many concurrent calls through `.sqlite()`: each executes once, each replay returns the
/// stored outcome, and the trail holds one intact chain with an entry per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_through_the_shared_connection() {
    let path = store_support::sqlite_path("sync_storm");
    let ledger = Arc::new(Ledger::seeded());
    let store = Arc::new(SqliteStore::open_with(&path, Durability::Full).unwrap());
    let audit = Arc::new(store.audit_sink().unwrap());
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .store(store.clone())
        .audit(store_support::SharedAudit(audit.clone()))
        .build()
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..96 {
        let d = d.clone();
        tasks.push(tokio::spawn(async move {
            // Two calls per key, racing: one executes, the other waits, replays or is told
            // the key is in progress.
            let args = serde_json::json!({
                "from_account": "acc-alice-1", "to_account": "acc-alice-2",
                "amount": 1, "currency": "USD", "idempotency_key": format!("key-{:04}", i / 2),
            });
            d.dispatch(
                ToolCall::new(format!("c{i}"), "transfer_funds", args),
                &alice(),
            )
            .await
        }));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap().status);
    }
    assert!(
        statuses
            .iter()
            .all(|s| matches!(s, Status::Ok | Status::InProgress)),
        "{statuses:?}"
    );
    assert_eq!(
        ledger.transfers.load(Ordering::SeqCst),
        48,
        "one execution per key"
    );
    use toolguard::audit::AuditQuery;
    audit.verify().await.expect("one intact chain");
    assert_eq!(audit.len().await.unwrap(), 96);
    drop(d);
    store_support::remove_sqlite(&path);
}
