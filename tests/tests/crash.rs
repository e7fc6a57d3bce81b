//! Replicas killed at any instant keep the guarantees: three dispatcher processes share
//! PostgreSQL (or Redis for idempotency and the session ledger, PostgreSQL for the rest; or one
//! SQLite file), clients
//! retry every key across them until it gets a terminal answer, and the controller SIGKILLs
//! random processes and restarts them, some armed to abort at a named crash point, while the
//! servers cut the live processes' store connections (PostgreSQL sessions terminated, Redis
//! connections closed) at random moments, mid-statement or mid-commit (a SQLite file has no
//! connections to cut: its processes are only killed), and the stores hold every write for 1 to
//! 3 s now and then, so that writes land after their callers stopped waiting. After each
//! round the harness checks, from the stores and the side-effect log: no key executed twice, no
//! session or subject limit exceeded, the audit chain verifies (sealed, against every process's
//! checkpoints), every execution has one terminal audit entry or was reconciled, every approval
//! settles, every answer matches what executed, every key gets a terminal answer.
//!
//! Two rounds per backend here; the long run is `crash_harness` (BENCHMARKS.md, "Crash
//! harness").

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;

/// Runs the harness on `backend` for two rounds and returns its summary.
fn run(backend: &str) -> Value {
    let mut command = Command::new(env!("CARGO_BIN_EXE_crash_harness"));
    command
        .args(["--backend", backend, "--rounds", "2", "--clients", "12"])
        .args([
            "--round-ms",
            "2500",
            "--drain-ms",
            "15000",
            "--kill-ms",
            "250-700",
            "--stall-ms",
            "700-1400",
        ]);
    if backend != "sqlite" {
        command.args(["--sever-ms", "150-400"]);
    }
    let out = command.output().expect("run crash_harness");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("no summary from crash_harness ({e}): {stdout}\n{stderr}"))
}

/// The violations the summary counts for `invariants`.
fn violations(summary: &Value, invariants: &[&str]) -> BTreeMap<String, u64> {
    invariants
        .iter()
        .map(|name| {
            let n = summary["violations"][*name]
                .as_u64()
                .unwrap_or_else(|| panic!("the summary has no count for {name}: {summary}"));
            (name.to_string(), n)
        })
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// The run really killed processes, cut store connections, executed transfers, waited for
/// approvals and hit limits.
fn assert_exercised(summary: &Value) {
    let count = |field: &str| summary[field].as_u64().unwrap_or(0);
    assert!(count("kills") > 0, "no process was killed: {summary}");
    assert!(
        count("stalls") > 0,
        "the stores were never stalled: {summary}"
    );
    if summary["backend"] != "sqlite" {
        assert!(
            count("pg_sessions_cut") > 0,
            "no PostgreSQL session was cut: {summary}"
        );
    }
    if summary["backend"] == "redis" {
        assert!(
            count("redis_connections_cut") > 0,
            "no Redis connection was cut: {summary}"
        );
    }
    assert!(count("effects") > 0, "nothing executed: {summary}");
    assert!(
        count("approvals") > 0,
        "no call waited for an approval: {summary}"
    );
    assert!(
        summary["answers"]["policy_denied"].as_u64().unwrap_or(0) > 0,
        "no limit was reached: {summary}"
    );
}

/// Every invariant the harness checks after a round.
const INVARIANTS: [&str; 8] = [
    "exactly_once",
    "session_limit",
    "subject_limit",
    "audit_chain_verifies",
    "one_terminal_audit_entry",
    "approval_settled",
    "answer_matches_effect",
    "terminal_answer",
];

fn pg_set() -> bool {
    let set = std::env::var("TOOLGUARD_PG_URL").is_ok_and(|v| !v.is_empty());
    if !set {
        eprintln!("skipped: TOOLGUARD_PG_URL is not set");
    }
    set
}

fn redis_set() -> bool {
    let set = std::env::var("TOOLGUARD_REDIS_URL").is_ok_and(|v| !v.is_empty());
    if !set {
        eprintln!("skipped: TOOLGUARD_REDIS_URL is not set");
    }
    pg_set() && set
}

#[test]
#[cfg_attr(not(toolguard_pg), ignore = "set TOOLGUARD_PG_URL to run")]
fn postgres_replicas_killed_at_any_instant_keep_every_invariant() {
    if !pg_set() {
        return;
    }
    let summary = run("postgres");
    assert_exercised(&summary);
    assert_eq!(
        violations(&summary, &INVARIANTS),
        BTreeMap::new(),
        "{summary}"
    );
}

#[test]
#[cfg_attr(
    not(all(toolguard_pg, toolguard_redis)),
    ignore = "set TOOLGUARD_PG_URL and TOOLGUARD_REDIS_URL to run"
)]
fn redis_replicas_killed_at_any_instant_keep_every_invariant() {
    if !redis_set() {
        return;
    }
    let summary = run("redis");
    assert_exercised(&summary);
    assert_eq!(
        violations(&summary, &INVARIANTS),
        BTreeMap::new(),
        "{summary}"
    );
}

#[test]
fn sqlite_replicas_killed_at_any_instant_keep_every_invariant() {
    let summary = run("sqlite");
    assert_exercised(&summary);
    assert_eq!(
        violations(&summary, &INVARIANTS),
        BTreeMap::new(),
        "{summary}"
    );
}
