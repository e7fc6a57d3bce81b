//! The default durable trail is anchored: a SQLite (or PostgreSQL) trail without host keys and
//! checkpoints is a build error unless the host opts out by name; with them, deleting the newest
//! rows and rewriting an entry then re-sealing the chain with the public hash functions are both
//! detected by a verifier holding the key file and the checkpoints file; the opt-out is reported
//! by `verify`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolguard::audit::{
    AuditEntry, AuditQuery, ChainBreak, CheckpointPolicy, FileCheckpoints, Sealer, VerifyError,
};
use toolguard::sqlite::{Durability, SqliteAuditSink, SqliteBuilderExt as _};
use toolguard::{BuildError, Dispatcher, HostKeys, Status, ToolCall};
use toolguard_tests::*;

mod store_support;

fn every_entry() -> CheckpointPolicy {
    CheckpointPolicy {
        every_entries: 1,
        every: Duration::from_secs(3600),
    }
}

/// A SQLite file for `name`, and beside it a directory with a new key file and the path of
/// its checkpoints file: `(database, directory, key file, checkpoints)`.
fn anchored_files(name: &str) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let path = store_support::sqlite_path(name);
    let dir = path.parent().unwrap().join(format!(
        "keys-{}",
        path.file_stem().unwrap().to_string_lossy()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let key_file = dir.join("toolguard.keys");
    toolguard::keys::generate_key_file(&key_file, "k1").unwrap();
    let cp = dir.join("audit.checkpoints");
    (path, dir, key_file, cp)
}

async fn four_calls(d: &Dispatcher<Ledger>) {
    for i in 0..4 {
        let call = ToolCall::new(format!("c{i}"), "echo_note", json!({"note": "hi"}));
        let out = d.dispatch(call, &alice()).await;
        assert_eq!(out.status, Status::Ok, "{out:?}");
    }
}

#[test]
fn a_durable_trail_without_keys_and_checkpoints_is_a_build_error() {
    let path = store_support::sqlite_path("unanchored_build_error");
    let cases: Vec<(&str, Result<Dispatcher<Ledger>, BuildError>)> = vec![
        (
            "sqlite without keys",
            Dispatcher::builder(Ledger::seeded())
                .tool(EchoNote)
                .sqlite(&path)
                .unwrap()
                .build(),
        ),
        (
            "sqlite with keys, no checkpoints",
            Dispatcher::builder(Ledger::seeded())
                .tool(EchoNote)
                .sqlite(&path)
                .unwrap()
                .host_keys(HostKeys::ephemeral())
                .build(),
        ),
        (
            "a SqliteAuditSink opened without an anchor",
            Dispatcher::builder(Ledger::seeded())
                .tool(EchoNote)
                .audit(SqliteAuditSink::open(&path).unwrap())
                .host_keys(HostKeys::ephemeral())
                .build(),
        ),
    ];
    for (case, built) in cases {
        match built {
            Err(e @ BuildError::UnanchoredAudit) => {
                let message = e.to_string();
                assert!(message.contains("unanchored_audit"), "{case}: {message}");
                assert!(
                    message.contains("toolguard keys generate"),
                    "{case}: {message}"
                );
            }
            other => panic!("{case}: expected UnanchoredAudit, got {:?}", other.err()),
        }
    }
    // A trail in memory needs no anchor; an anchored SQLite trail builds.
    assert!(
        Dispatcher::builder(Ledger::seeded())
            .tool(EchoNote)
            .build()
            .is_ok()
    );
    let cp = path.with_extension("checkpoints");
    assert!(
        Dispatcher::builder(Ledger::seeded())
            .tool(EchoNote)
            .sqlite(&path)
            .unwrap()
            .host_keys(HostKeys::ephemeral())
            .audit_checkpoints(Arc::new(FileCheckpoints::new(&cp)), every_entry())
            .build()
            .is_ok()
    );
    store_support::remove_sqlite(&path);
}

#[tokio::test]
async fn the_opt_out_builds_and_verify_reports_the_trail_unanchored() {
    let path = store_support::sqlite_path("unanchored_opt_out");
    let d = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .sqlite(&path)
        .unwrap()
        .unanchored_audit("a development database")
        .build()
        .expect("the named opt-out builds");
    four_calls(&d).await;
    let report = SqliteAuditSink::open(&path)
        .unwrap()
        .verify_against(&[])
        .await
        .unwrap();
    assert_eq!(report.entries, 4);
    assert!(!report.sealed, "plain links");
    assert!(!report.anchored(), "the opt-out is reported");
    drop(d);
    store_support::remove_sqlite(&path);
}

/// Rewrites entry `from`'s tool name and re-seals it and every later entry with the public
/// plain hash function, as someone without the key would.
fn rewrite_and_reseal(path: &std::path::Path, entries: &[AuditEntry], from: u64) {
    let c = rusqlite::Connection::open(path).unwrap();
    let mut prev = entries[(from - 2) as usize].hash.clone();
    for e in &entries[(from - 1) as usize..] {
        let mut record = e.record.clone();
        if e.seq == from {
            record.tool = "transfer_funds".into();
        }
        let resealed = Sealer::Plain.seal(e.seq, record, &prev);
        c.execute(
            "UPDATE toolguard_audit SET record = ?1, tool = ?2, prev_hash = ?3, hash = ?4 WHERE seq = ?5",
            rusqlite::params![
                serde_json::to_string(&resealed.record).unwrap(),
                resealed.record.tool.to_string(),
                resealed.prev_hash.to_string(),
                resealed.hash.to_string(),
                e.seq as i64
            ],
        )
        .unwrap();
        prev = resealed.hash.clone();
    }
}

#[tokio::test]
async fn truncation_and_resealing_are_detected_with_the_key_file_and_checkpoints() {
    let (path, dir, key_file, cp) = anchored_files("anchored_default_trail");
    let d = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .sqlite(&path)
        .unwrap()
        .host_keys(HostKeys::from_file(&key_file).unwrap())
        .audit_checkpoints(Arc::new(FileCheckpoints::new(&cp)), every_entry())
        .build()
        .unwrap();
    four_calls(&d).await;
    drop(d);
    let verifier = || {
        let anchor =
            toolguard::audit::AuditAnchor::new(Arc::new(HostKeys::from_file(&key_file).unwrap()));
        SqliteAuditSink::open_anchored(&path, Durability::Full, anchor).unwrap()
    };
    let checkpoints = FileCheckpoints::read(&cp).unwrap();
    assert_eq!(checkpoints.last().map(|c| c.seq), Some(4));
    let report = verifier().verify_against(&checkpoints).await.unwrap();
    assert!(report.anchored(), "{report:?}");
    let entries = verifier().by_time(0, u64::MAX, 100).await.unwrap();

    // Re-sealing with the public hash functions: the first rewritten entry is named.
    rewrite_and_reseal(&path, &entries, 3);
    let resealed = verifier().verify_against(&checkpoints).await;
    assert!(
        matches!(
            resealed,
            Err(VerifyError::Broken(ChainBreak::Unsealed { seq: 3 }))
        ),
        "{resealed:?}"
    );

    // Deleting the newest rows (after restoring the trail): the truncation is named.
    let c = rusqlite::Connection::open(&path).unwrap();
    for e in &entries {
        c.execute(
            "UPDATE toolguard_audit SET record = ?1, tool = ?2, prev_hash = ?3, hash = ?4 WHERE seq = ?5",
            rusqlite::params![
                serde_json::to_string(&e.record).unwrap(),
                e.record.tool.to_string(),
                e.prev_hash.to_string(),
                e.hash.to_string(),
                e.seq as i64
            ],
        )
        .unwrap();
    }
    assert!(verifier().verify_against(&checkpoints).await.is_ok());
    c.execute("DELETE FROM toolguard_audit WHERE seq >= 3", [])
        .unwrap();
    let truncated = verifier().verify_against(&checkpoints).await;
    assert!(
        matches!(
            truncated,
            Err(VerifyError::Broken(ChainBreak::Truncated {
                expected: 4,
                last: 2
            }))
        ),
        "{truncated:?}"
    );
    store_support::remove_sqlite(&path);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The entries of read-only calls are answered at commit and synced right after (off the
/// call's path); a checkpoint only ever names an entry after the log was synced. The trail of a
/// run of reads and writes verifies against its checkpoints once reopened.
#[tokio::test]
async fn read_only_entries_are_committed_synced_and_anchored() {
    let (path, dir, key_file, cp) = anchored_files("anchored_reads");
    let d = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .tool(GetBalance)
        .sqlite(&path)
        .unwrap()
        .host_keys(HostKeys::from_file(&key_file).unwrap())
        .audit_checkpoints(Arc::new(FileCheckpoints::new(&cp)), every_entry())
        .build()
        .unwrap();
    for i in 0..12 {
        let call = if i % 3 == 0 {
            ToolCall::new(format!("w{i}"), "echo_note", json!({"note": "hi"}))
        } else {
            ToolCall::new(
                format!("r{i}"),
                "get_balance",
                json!({"account": "acc-alice-1"}),
            )
        };
        let out = d.dispatch(call, &alice()).await;
        assert_eq!(out.audit_seq, Some(i + 1), "{out:?}");
    }
    drop(d);
    let anchor =
        toolguard::audit::AuditAnchor::new(Arc::new(HostKeys::from_file(&key_file).unwrap()));
    let sink = SqliteAuditSink::open_anchored(&path, Durability::Full, anchor).unwrap();
    let checkpoints = FileCheckpoints::read(&cp).unwrap();
    assert_eq!(checkpoints.last().map(|c| c.seq), Some(12));
    let report = sink.verify_against(&checkpoints).await.unwrap();
    assert!(report.anchored(), "{report:?}");
    assert_eq!(sink.by_time(0, u64::MAX, 100).await.unwrap().len(), 12);
    store_support::remove_sqlite(&path);
    let _ = std::fs::remove_dir_all(&dir);
}
