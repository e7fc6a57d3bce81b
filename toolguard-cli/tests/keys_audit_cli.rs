//! `toolguard keys generate` and `toolguard audit verify | tail | show` against real SQLite files
//! (the PostgreSQL trail: `tests/tests/audit_cli_postgres.rs`), and `mcp-proxy` refusing to start
//! without keys.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use toolguard::audit::{CheckpointPolicy, FileCheckpoints};
use toolguard::sqlite::SqliteBuilderExt as _;
use toolguard::{Dispatcher, HostKeys, Principal, ToolCall, ToolContext, ToolError, tool};

/// Says hello.
#[tool(read_only, risk = "low")]
async fn hello(_ctx: &ToolContext<()>) -> Result<u8, ToolError> {
    Ok(1)
}

fn toolguard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolguard"))
        .args(args)
        .env_remove("TOOLGUARD_HOST_KEYS")
        .output()
        .expect("run toolguard")
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tg-cli-{name}-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{}-{nanos}", std::process::id())
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn every_entry() -> CheckpointPolicy {
    CheckpointPolicy {
        every_entries: 1,
        every: Duration::from_secs(3600),
    }
}

async fn three_calls(d: &Dispatcher<()>) {
    let alice = Principal::new("acme", "alice", "s-1");
    for id in ["c1", "c2", "c3"] {
        let out = d.dispatch(ToolCall::new(id, "hello", "{}"), &alice).await;
        assert_eq!(out.status, toolguard::Status::Ok, "{out:?}");
    }
}

#[test]
fn keys_generate_writes_a_private_file_never_overwrites_and_rotates() {
    let dir = scratch("keys");
    let file = dir.join("host.keys");
    let out = toolguard(&["keys", "generate", s(&file), "--id", "k1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    assert_eq!(HostKeys::from_file(&file).unwrap().active_id(), "k1");
    let again = toolguard(&["keys", "generate", s(&file), "--id", "k2"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("never overwritten"),
        "{}",
        text(&again.stderr)
    );
    let rotated = toolguard(&["keys", "generate", s(&file), "--id", "k2", "--rotate"]);
    assert!(rotated.status.success(), "{}", text(&rotated.stderr));
    let keys = HostKeys::from_file(&file).unwrap();
    assert_eq!(keys.ids().collect::<Vec<_>>(), ["k2", "k1"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_names_a_truncated_sqlite_trail_and_tail_and_show_read_it() {
    let dir = scratch("sqlite");
    let (db, keys, cp) = (
        dir.join("t.db"),
        dir.join("host.keys"),
        dir.join("t.checkpoints"),
    );
    toolguard::keys::generate_key_file(&keys, "k1").unwrap();
    let d = Dispatcher::builder(())
        .tool(Hello)
        .sqlite(&db)
        .unwrap()
        .host_keys(HostKeys::from_file(&keys).unwrap())
        .audit_checkpoints(Arc::new(FileCheckpoints::new(&cp)), every_entry())
        .build()
        .unwrap();
    three_calls(&d).await;
    drop(d);
    let trail = ["--sqlite", s(&db), "--keys", s(&keys)];
    let verify = |extra: &[&str]| {
        let mut args = vec!["audit", "verify"];
        args.extend(trail);
        args.extend(extra);
        toolguard(&args)
    };
    let ok = verify(&["--checkpoints", s(&cp)]);
    assert!(
        ok.status.success(),
        "{}{}",
        text(&ok.stdout),
        text(&ok.stderr)
    );
    let shown = text(&ok.stdout);
    assert!(shown.contains("verified: 3 entries"), "{shown}");
    assert!(shown.contains("anchored: sealed"), "{shown}");

    let mut tail = vec!["audit", "tail", "-n", "2"];
    tail.extend(trail);
    let tail = toolguard(&tail);
    assert!(tail.status.success(), "{}", text(&tail.stderr));
    let seqs: Vec<u64> = text(&tail.stdout)
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [2, 3]);
    let mut show = vec!["audit", "show", "1"];
    show.extend(trail);
    let show = toolguard(&show);
    let entry: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(entry["seq"], 1);
    assert!(entry.to_string().contains("\"hello\""), "{entry}");

    // Without the key file, a sealed trail cannot be checked: said, not passed.
    let mut no_keys = vec!["audit", "verify", "--sqlite", s(&db)];
    no_keys.extend(["--checkpoints", s(&cp)]);
    let no_keys = toolguard(&no_keys);
    assert_eq!(no_keys.status.code(), Some(1));
    assert!(
        text(&no_keys.stderr).contains("--keys"),
        "{}",
        text(&no_keys.stderr)
    );

    // The newest entry deleted: exit 1, naming the anchored entry that is missing.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute("DELETE FROM toolguard_audit WHERE seq = 3", [])
        .unwrap();
    let broken = verify(&["--checkpoints", s(&cp)]);
    assert_eq!(broken.status.code(), Some(1));
    let said = text(&broken.stdout);
    assert!(said.contains("broken at entry 3"), "{said}");
    assert!(said.contains("newest entries were removed"), "{said}");
    // Without the checkpoints the shorter chain verifies, and is reported unanchored.
    let bare = verify(&[]);
    assert!(bare.status.success());
    assert!(
        text(&bare.stdout).contains("UNANCHORED"),
        "{}",
        text(&bare.stdout)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_verify_reports_an_opted_out_trail_as_unanchored() {
    let dir = scratch("optout");
    let db = dir.join("t.db");
    let d = Dispatcher::builder(())
        .tool(Hello)
        .sqlite(&db)
        .unwrap()
        .unanchored_audit("a development database")
        .build()
        .unwrap();
    three_calls(&d).await;
    drop(d);
    let out = toolguard(&["audit", "verify", "--sqlite", s(&db)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(said.contains("verified: 3 entries"), "{said}");
    assert!(said.contains("UNANCHORED: plain SHA-256"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mcp_proxy_without_host_keys_refuses_to_start_and_says_how_to_make_them() {
    let dir = scratch("nokeys");
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        "[principal]\ntenant = \"acme\"\nsubject = \"agent\"\n",
    )
    .unwrap();
    let out = toolguard(&["mcp-proxy", "--policy", s(&policy), "--", "true"]);
    assert_eq!(out.status.code(), Some(1));
    let said = text(&out.stderr);
    assert!(said.contains("toolguard keys generate"), "{said}");
    assert!(said.contains("[keys] file"), "{said}");
    assert!(!dir.join("toolguard.sqlite").exists(), "nothing opened");
    let _ = std::fs::remove_dir_all(&dir);
}
