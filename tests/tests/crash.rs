//! Replicas killed at any instant keep the guarantees: three dispatcher processes share
//! PostgreSQL (or Redis for idempotency and the session ledger), clients retry every key across
//! them until it gets a terminal answer, and the controller SIGKILLs random processes and
//! restarts them, some armed to abort at a named crash point. After each round: no key executed
//! twice, no session or subject limit exceeded, one terminal audit entry per execution (or an
//! `outcome_unknown` reconciled), the audit chain verifies, every approval settled once.
//!
//! A few rounds here; the long run is `crash_harness` (see BENCHMARKS.md, "Crash harness").

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// Runs the harness on `backend` for a few rounds and returns its summary.
fn run(backend: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_crash_harness"))
        .args(["--backend", backend, "--rounds", "2", "--clients", "12", "--keys", "4"])
        .args(["--kill-ms", "250-700", "--seed", "20261205"])
        .output()
        .expect("run crash_harness");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("no summary from crash_harness ({e}): {stdout}\n{stderr}"))
}

/// The invariants the summary reports as violated.
fn violated(summary: &Value) -> BTreeMap<String, u64> {
    summary["violations"]
        .as_object()
        .expect("violations by invariant")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(u64::MAX)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The run really killed processes, executed transfers and waited for approvals.
fn assert_exercised(summary: &Value) {
    assert!(summary["kills"].as_u64().unwrap() > 0, "no process was killed: {summary}");
    assert!(summary["effects"].as_u64().unwrap() > 0, "nothing executed: {summary}");
    assert!(summary["approvals"].as_u64().unwrap() > 0, "no approval: {summary}");
    assert!(
        summary["answers"]["policy_denied"].as_u64().unwrap_or(0) > 0,
        "no limit was reached: {summary}"
    );
}

#[test]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
fn postgres_replicas_killed_at_any_instant_keep_every_guarantee() {
    if std::env::var("TOOLGUARD_PG_URL").is_err() {
        eprintln!("skipped: TOOLGUARD_PG_URL is not set");
        return;
    }
    let summary = run("postgres");
    assert_exercised(&summary);
    assert_eq!(violated(&summary), BTreeMap::new(), "{summary}");
}

#[test]
#[cfg_attr(
    not(all(toolguard_pg, toolguard_redis)),
    ignore = "set TOOLGUARD_PG_URL and TOOLGUARD_REDIS_URL to run"
)]
fn redis_replicas_killed_at_any_instant_keep_every_guarantee() {
    if std::env::var("TOOLGUARD_PG_URL").is_err() || std::env::var("TOOLGUARD_REDIS_URL").is_err() {
        eprintln!("skipped: TOOLGUARD_PG_URL and TOOLGUARD_REDIS_URL are not both set");
        return;
    }
    let summary = run("redis");
    assert_exercised(&summary);
    assert_eq!(violated(&summary), BTreeMap::new(), "{summary}");
}
