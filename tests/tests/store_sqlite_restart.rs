//! Process restart with SQLite: a pending approval survives closing and reopening the file, and
//! approving it after the reopen executes exactly once; the audit chain continues unbroken.

#![cfg(feature = "sqlite")]

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolguard::audit::AuditQuery;
use toolguard::sqlite::SqliteAuditSink;
use toolguard::sqlite::SqliteBuilderExt as _;
use toolguard::sqlite::SqliteStore;
use toolguard::{Dispatcher, RiskPolicy, Status, ToolCall};
use toolguard_tests::*;

fn transfer(amount: u64, key: &str) -> serde_json::Value {
    json!({
        "from_account": "acc-alice-1",
        "to_account": "acc-bob-1",
        "amount": amount,
        "currency": "USD",
        "idempotency_key": key,
    })
}

fn dispatcher(path: &Path, ledger: Arc<Ledger>) -> Dispatcher<Ledger> {
    Dispatcher::builder_arc(ledger)
        .tool(TransferFunds)
        .sqlite(path)
        .expect("open sqlite")
        .policy(RiskPolicy::new().approver_roles(["approver"]))
        .unanchored_audit("this test is about restarts")
        .build()
        .expect("dispatcher")
}

fn remove(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_approval_survives_a_restart_and_executes_once() {
    let path =
        std::env::temp_dir().join(format!("tg_restart_{}.db", uuid::Uuid::new_v4().simple()));
    let ledger = Arc::new(Ledger::seeded());

    let (id, first_seq) = {
        let d = dispatcher(&path, ledger.clone());
        let out = d
            .dispatch(
                ToolCall::new("c1", "transfer_funds", transfer(1_500_000, "restart-key-1")),
                &alice(),
            )
            .await;
        assert_eq!(out.status, Status::PendingApproval, "{out:?}");
        (out.approval.unwrap().approval_id, out.audit_seq.unwrap())
        // The dispatcher, its store and its audit sink are dropped here: the "process" ends.
    };
    assert_eq!(ledger.transfers(), 0);

    let d = dispatcher(&path, ledger.clone());
    let pending = d
        .approvals()
        .pending(&toolguard::Principal::new("acme", "viewer", "console"))
        .await
        .unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, id);

    let approved = d.approvals().approve(&bob_approver(), &id).await;
    assert_eq!(approved.status, Status::Ok, "{approved:?}");
    assert!(
        approved.audit_seq.unwrap() > first_seq,
        "the chain continues"
    );
    let again = d.approvals().approve(&dave_approver(), &id).await;
    assert_ne!(again.status, Status::Ok);
    let retry = d
        .dispatch(
            ToolCall::new("c2", "transfer_funds", transfer(1_500_000, "restart-key-1")),
            &alice(),
        )
        .await;
    assert_eq!(retry.status, Status::Ok);
    assert!(retry.replayed);
    assert_eq!(ledger.transfers(), 1, "executed exactly once");
    drop(d);

    // The whole trail, written by two "processes", verifies.
    let audit = SqliteAuditSink::open(&path).unwrap();
    audit
        .verify()
        .await
        .expect("chain intact across the restart");
    assert!(audit.len().await.unwrap() >= 4);
    let store = SqliteStore::open(&path).unwrap();
    let rows = store
        .with_connection(|c| {
            c.query_row(
                "SELECT MAX(version) FROM toolguard_schema_version",
                [],
                |r| r.get::<_, i64>(0),
            )
        })
        .await
        .unwrap();
    assert_eq!(rows, toolguard::sqlite::SQLITE_SCHEMA_VERSION);
    drop((audit, store));
    remove(&path);
}
