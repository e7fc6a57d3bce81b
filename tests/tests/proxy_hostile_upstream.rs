//! What `toolguard mcp-proxy` reads from its upstream meets the same limits as what its clients
//! send: an answer over the message limits (70 000 keys, a repeated key, a 5 MiB line) fails the
//! call it answers at once (`failed`; the gateway's log names the limit) instead of being built
//! or passed on; the session goes on. The upstream is `tests/python/hostile_server.py`, which answers by hand.

mod proxy_support;

use std::path::Path;
use std::time::{Duration, Instant};

use proxy_support::{Scratch, call, connect, payload, proxy_command};
use serde_json::json;

const POLICY: &str = r#"[proxy]
store = "audit.sqlite"
upstream_timeout_secs = 120

[principal]
tenant = "acme"
subject = "agent"
roles = ["agent"]

[tools.answer]
risk = "low"
read_only = true
"#;

#[tokio::test]
#[cfg_attr(
    not(toolguard_fastmcp),
    ignore = "needs python3 (installed by .ci/run)"
)]
async fn answers_over_the_limits_fail_their_call_at_once() {
    let dir = Scratch::new("tg-hostile-upstream");
    std::fs::write(dir.join("policy.toml"), POLICY).expect("policy");
    let mut cmd = proxy_command(&dir.join("policy.toml"));
    cmd.arg("--")
        .arg("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python/hostile_server.py"));
    let client = connect(cmd, ()).await;
    for kind in ["wide", "duplicate", "long"] {
        let started = Instant::now();
        let result = client
            .call_tool(call("answer", json!({ "kind": kind }), None))
            .await
            .expect("a failed call is a tool result");
        let answer = payload(&result);
        assert_eq!(result.is_error, Some(true), "{kind}: {answer}");
        assert_eq!(answer["status"], "failed", "{kind}: {answer}");
        // Failed by the refusal itself, not by the upstream deadline (120 s).
        assert!(started.elapsed() < Duration::from_secs(60), "{kind}");
    }
    let fine = client
        .call_tool(call("answer", json!({ "kind": "fine" }), None))
        .await
        .expect("the session goes on");
    assert_ne!(fine.is_error, Some(true), "{fine:?}");
    client.cancel().await.ok();
}
