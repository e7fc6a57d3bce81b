//! `toolguard audit verify` against a PostgreSQL trail in the test database
//! (`TOOLGUARD_PG_URL`): an anchored trail verifies with the key file and the checkpoints file,
//! and once its newest row is deleted the command exits 1 naming the missing entry.

mod proxy_support;

use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toolguard::audit::{AuditAnchor, CheckpointPolicy, FileCheckpoints};
use toolguard::postgres::{PgAuditSink, PgConfig, PgStore};
use toolguard::{Dispatcher, HostKeys, Status, ToolCall};
use toolguard_tests::*;

fn toolguard(args: &[String]) -> Output {
    std::process::Command::new(proxy_support::proxy_binary())
        .args(args)
        .output()
        .expect("run toolguard")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
async fn audit_verify_names_a_truncated_postgres_trail() {
    let url = std::env::var("TOOLGUARD_PG_URL").expect("TOOLGUARD_PG_URL");
    let dir = proxy_support::Scratch::new("tg-audit-pg");
    let (keys, cp) = (dir.join("host.keys"), dir.join("audit.checkpoints"));
    toolguard::keys::generate_key_file(&keys, "k1").unwrap();
    let schema = format!("tg_audit_cli_{}", uuid::Uuid::new_v4().simple());
    let config = PgConfig::new(url.clone())
        .schema(schema.clone())
        .pool_size(2);
    let store = Arc::new(PgStore::connect(&config).await.unwrap());
    let policy = CheckpointPolicy {
        every_entries: 1,
        every: Duration::from_secs(3600),
    };
    let anchor = AuditAnchor::new(Arc::new(HostKeys::from_file(&keys).unwrap()))
        .checkpoints(Arc::new(FileCheckpoints::new(&cp)), policy);
    let audit = PgAuditSink::connect_anchored(&config, anchor)
        .await
        .unwrap();
    let d = Dispatcher::builder(Ledger::seeded())
        .tool(EchoNote)
        .store(store)
        .audit(audit)
        .host_keys(HostKeys::from_file(&keys).unwrap())
        .build()
        .unwrap();
    for i in 0..3 {
        let call = ToolCall::new(format!("c{i}"), "echo_note", json!({"note": "hi"}));
        assert_eq!(d.dispatch(call, &alice()).await.status, Status::Ok);
    }
    drop(d);
    let verify: Vec<String> = [
        "audit",
        "verify",
        "--postgres",
        &url,
        "--schema",
        &schema,
        "--keys",
        keys.to_str().unwrap(),
        "--checkpoints",
        cp.to_str().unwrap(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let ok = toolguard(&verify);
    assert!(
        ok.status.success(),
        "{}{}",
        text(&ok.stdout),
        text(&ok.stderr)
    );
    assert!(
        text(&ok.stdout).contains("verified: 3 entries"),
        "{}",
        text(&ok.stdout)
    );
    assert!(
        text(&ok.stdout).contains("anchored: sealed"),
        "{}",
        text(&ok.stdout)
    );

    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .execute(
            &format!("DELETE FROM \"{schema}\".toolguard_audit WHERE seq = 3"),
            &[],
        )
        .await
        .unwrap();
    let broken = toolguard(&verify);
    assert_eq!(broken.status.code(), Some(1), "{}", text(&broken.stderr));
    let said = text(&broken.stdout);
    assert!(said.contains("broken at entry 3"), "{said}");
    assert!(said.contains("newest entries were removed"), "{said}");
    client
        .execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"), &[])
        .await
        .unwrap();
}
