//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, installed with a
//! Node 22 by `.ci/run` under `TOOLGUARD_CONFORMANCE`, see `tests/conformance/README.md`): its
//! server scenarios against our own fixture server (`tests/conformance/server.py`, on the Python
//! MCP SDK) directly and through `toolguard mcp-proxy` (Streamable HTTP on both sides), and its
//! client scenarios with the gateway as the client of the suite's test servers.

#![allow(deprecated)] // rmcp marks sampling and logging deprecated for a draft protocol

mod proxy_support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::Duration;

use proxy_support::{
    Host, Scratch, TEST_HOST_KEYS, connect, free_port, payload, proxy_binary, proxy_command,
    reviewer, upstream_part, wait_for_port,
};
use rmcp::model::{CallToolRequestParams, GetPromptRequestParams, ReadResourceRequestParams};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const TOKEN: &str = "conformance-token-0123456789abcdef";

/// The server scenarios of the pinned suite (`@modelcontextprotocol/conformance@0.1.16`, `--suite all`).
const SERVER_SCENARIOS: usize = 32;

/// Exposes everything the fixture offers: the suite checks that it all passes through.
const POLICY: &str = r#"[proxy]
store = "conformance.sqlite"
name = "toolguard-conformance"

[principal]
tenant = "conformance"
subject = "suite"
roles = ["agent"]

[[tokens]]
token = "conformance-token-0123456789abcdef"
tenant = "conformance"
subject = "suite"
roles = ["agent"]

[default_tool]
risk = "low"
read_only = true

[resources]
expose = ["*"]

[prompts]
expose = ["*"]

[sampling]
action = "allow"

[elicitation]
action = "allow"
"#;

fn root() -> PathBuf {
    PathBuf::from(std::env::var("TOOLGUARD_CONFORMANCE").expect(
        "TOOLGUARD_CONFORMANCE names the directory `.ci/run` installs the conformance suite into",
    ))
}

fn node() -> PathBuf {
    root().join("node/node_modules/.bin/node")
}

fn suite() -> PathBuf {
    root().join("suite/node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

fn helper(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("conformance")
        .join(name)
}

/// Starts our fixture server (`tests/conformance/server.py`) on a port it picks itself and
/// holds (a port picked here could be taken by a parallel test's server before it binds); its
/// MCP endpoint.
async fn fixture() -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new("python3")
        .arg(helper("server.py"))
        .args(["--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the fixture server (python3 with the MCP SDK, see .ci/run)");
    let stdout = child.stdout.take().expect("the fixture's stdout");
    let mut line = String::new();
    let mut reader = tokio::io::BufReader::new(stdout);
    let read = reader.read_line(&mut line);
    tokio::time::timeout(Duration::from_secs(60), read)
        .await
        .expect("the conformance fixture server started within 60 s")
        .expect("the fixture's first line");
    let port: u16 = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the fixture server did not say its port: {line:?}"));
    wait_for_port(port, "the conformance fixture server").await;
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

/// Runs the suite's server scenarios against `url` (with the bearer token when `token`); the
/// result of each scenario (`true`: every check passed).
async fn server_scenarios(url: &str, token: bool, dir: &Scratch) -> BTreeMap<String, bool> {
    let mut cmd = tokio::process::Command::new(node());
    if token {
        cmd.arg("--import")
            .arg(helper("bearer.mjs"))
            .env("TOOLGUARD_CONFORMANCE_TOKEN", TOKEN);
    }
    let out = cmd
        .arg(suite())
        .args(["server", "--suite", "all", "--url", url])
        .env("TOOLGUARD_CONFORMANCE_ENTRY", suite())
        .current_dir(&dir.0)
        .output()
        .await
        .expect("run the conformance suite");
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or_else(|| panic!("no summary: {text}"));
    summary
        .lines()
        .filter_map(|line| {
            let (name, counts) = line.split_once(": ")?;
            if name.starts_with("Total") {
                return None;
            }
            let name = name.trim_start_matches(['✓', '✗', ' ']).to_owned();
            let failed: usize = counts.split(", ").nth(1)?.split(' ').next()?.parse().ok()?;
            Some((name, failed == 0))
        })
        .collect()
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_conformance),
    ignore = "needs TOOLGUARD_CONFORMANCE (set by .ci/run)"
)]
async fn every_server_scenario_that_passes_directly_passes_through_the_gateway() {
    let dir = Scratch::new("tg-conformance");
    let (_fixture, url) = fixture().await;
    let direct = server_scenarios(&url, false, &dir).await;

    std::fs::write(dir.join("policy.toml"), POLICY).expect("policy");
    let port = free_port();
    let _gateway = tokio::process::Command::new(proxy_binary())
        .arg("mcp-proxy")
        .arg("--policy")
        .arg(dir.join("policy.toml"))
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--upstream-url", &url])
        .env("TOOLGUARD_HOST_KEYS", TEST_HOST_KEYS)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the gateway");
    wait_for_port(port, "the gateway").await;
    let gateway_url = format!("http://localhost:{port}/mcp");
    let through = server_scenarios(&gateway_url, true, &dir).await;

    let passing: Vec<&String> = direct
        .iter()
        .filter(|(_, ok)| **ok)
        .map(|(n, _)| n)
        .collect();
    // Our fixture offers everything the pinned suite's server scenarios ask for: all pass.
    let failing: Vec<&String> = direct
        .iter()
        .filter(|(_, ok)| !**ok)
        .map(|(n, _)| n)
        .collect();
    assert!(
        direct.len() >= SERVER_SCENARIOS,
        "the suite ran {} server scenarios: {direct:?}",
        direct.len()
    );
    assert!(
        failing.is_empty(),
        "scenarios our fixture fails directly: {failing:?}"
    );
    let lost: Vec<&&String> = passing
        .iter()
        .filter(|n| through.get(n.as_str()) != Some(&true))
        .collect();
    eprintln!(
        "conformance server scenarios: {} of {} pass directly, {} of {} through the gateway",
        passing.len(),
        direct.len(),
        through.values().filter(|ok| **ok).count(),
        through.len()
    );
    assert!(
        lost.is_empty(),
        "scenarios that pass directly but not through the gateway: {lost:?}"
    );
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_conformance),
    ignore = "needs TOOLGUARD_CONFORMANCE (set by .ci/run)"
)]
async fn the_gateway_passes_the_client_scenarios_as_a_client_of_its_upstream() {
    let dir = Scratch::new("tg-conformance-client");
    std::fs::write(dir.join("policy.toml"), POLICY).expect("policy");
    for scenario in ["initialize", "tools_call"] {
        let out = tokio::process::Command::new(node())
            .arg(suite())
            .args(["client", "--scenario", scenario, "--command"])
            .arg(helper("gateway-client.sh"))
            .env("TOOLGUARD_BIN", proxy_binary())
            .env("TOOLGUARD_HOST_KEYS", TEST_HOST_KEYS)
            .env("TOOLGUARD_CONFORMANCE_POLICY", dir.join("policy.toml"))
            .current_dir(&dir.0)
            .output()
            .await
            .expect("run the conformance suite");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("OVERALL: PASSED") && text.contains(" 0 failed"),
            "client scenario {scenario}: {text}"
        );
    }
}

/// The fixture's tools through a stdio gateway: `test_simple_text` is a state-changing tool the
/// flow policy refuses once the session read untrusted content; `sections` is appended.
fn fixture_policy(port: u16, sections: &str) -> String {
    format!(
        r#"[proxy]
store = "audit.sqlite"
reviewer_listen = "127.0.0.1:{port}"

[principal]
tenant = "conformance"
subject = "agent"
roles = ["agent"]

[[tokens]]
token = "{REVIEWER}"
tenant = "conformance"
subject = "alice"
roles = ["approver"]

[default_tool]
risk = "low"
read_only = true

[tools.test_simple_text]
risk = "medium"
read_only = false
output = "trusted"
flow = "deny"

[prompts]
expose = ["*"]
{sections}
"#
    )
}

const REVIEWER: &str = "conformance-reviewer-0123456789abcdef";

/// A stdio gateway in front of the fixture at `url` with `sections` in its policy; the reviewer
/// endpoint's port.
async fn gateway(
    dir: &Scratch,
    url: &str,
    sections: &str,
    host: Host,
) -> (RunningService<RoleClient, Host>, u16) {
    let port = free_port();
    std::fs::write(dir.join("policy.toml"), fixture_policy(port, sections)).expect("policy");
    let mut cmd = proxy_command(&dir.join("policy.toml"));
    cmd.args(["--upstream-url", url]);
    let client = connect(cmd, host).await;
    wait_for_port(port, "the reviewer endpoint").await;
    (client, port)
}

async fn call_tool(
    client: &RunningService<RoleClient, Host>,
    name: &str,
    arguments: Value,
) -> rmcp::model::CallToolResult {
    let arguments = arguments.as_object().cloned().expect("object");
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(arguments))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_conformance),
    ignore = "needs TOOLGUARD_CONFORMANCE (set by .ci/run)"
)]
async fn image_audio_and_embedded_resource_results_pass_unchanged() {
    let dir = Scratch::new("tg-fixture");
    let (_fixture, url) = fixture().await;
    let transport = rmcp::transport::StreamableHttpClientTransport::from_uri(url.clone());
    let direct = Host::default().serve(transport).await.expect("direct");
    let (through, _) = gateway(&dir, &url, "", Host::default()).await;
    for name in [
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_resource_link",
        "test_multiple_content_types",
        "test_structured_content",
    ] {
        let want = upstream_part(&call_tool(&direct, name, json!({})).await);
        let got = call_tool(&through, name, json!({})).await;
        assert_eq!(payload(&got)["status"], "ok", "{name}");
        assert_eq!(
            upstream_part(&got),
            want,
            "{name}: the result changed on its way"
        );
    }
    let mixed = upstream_part(&call_tool(&through, "test_multiple_content_types", json!({})).await);
    let kinds: Vec<&str> = mixed["content"]
        .as_array()
        .expect("content")
        .iter()
        .filter_map(|b| b["type"].as_str())
        .collect();
    assert_eq!(kinds, ["text", "image", "resource"], "{mixed}");
    // Input schemas as the upstream wrote them (`$schema` too), tightened by the policy only.
    let direct_tools = direct.list_all_tools().await.expect("tools");
    let gateway_tools = through.list_all_tools().await.expect("tools");
    for tool in &gateway_tools {
        let original = direct_tools
            .iter()
            .find(|t| t.name == tool.name)
            .expect("an upstream tool");
        assert_eq!(
            tool.input_schema.get("$schema"),
            original.input_schema.get("$schema")
        );
        assert_eq!(
            tool.input_schema.get("properties"),
            original.input_schema.get("properties")
        );
    }
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_conformance),
    ignore = "needs TOOLGUARD_CONFORMANCE (set by .ci/run)"
)]
async fn logging_and_progress_reach_the_client_that_asked() {
    let dir = Scratch::new("tg-fixture");
    let (_fixture, url) = fixture().await;
    let host = Host::default();
    let (client, _) = gateway(&dir, &url, "", host.clone()).await;
    // The upstream sends its log messages and progress before the result: the client has them
    // all when the result arrives (the SDK hands each notification to a task of its own; the
    // gateway still passes none on after the answer, and drops none).
    call_tool(&client, "test_tool_with_logging", json!({})).await;
    let logs = host.logs.lock().unwrap().len();
    assert!(logs >= 3, "{:?}", host.logs.lock().unwrap());
    let done = call_tool(&client, "test_tool_with_progress", json!({})).await;
    assert_eq!(payload(&done)["status"], "ok", "{done:?}");
    let progress = host.progress.lock().unwrap().clone();
    assert!(progress.len() >= 3, "{progress:?}");
    assert!(
        progress.iter().all(|(t, _)| *t == progress[0].0),
        "one request's token: {progress:?}"
    );
    assert!(progress.windows(2).all(|w| w[0].1 < w[1].1), "{progress:?}");
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_conformance),
    ignore = "needs TOOLGUARD_CONFORMANCE (set by .ci/run)"
)]
async fn sampling_and_elicitation_are_allowed_held_or_denied_as_the_policy_says() {
    let (_fixture, url) = fixture().await;
    let sample = json!({"prompt": "Say hello"});
    let elicit = json!({"message": "Your name?"});

    // Denied (also the default): the host is never asked.
    let dir = Scratch::new("tg-fixture");
    let host = Host::default();
    let (client, _) = gateway(&dir, &url, "[sampling]\naction = \"deny\"\n", host.clone()).await;
    // (The gateway does not even offer the capabilities its policy denies.)
    let denied = call_tool(&client, "test_sampling", sample.clone()).await;
    assert!(
        !upstream_part(&denied)
            .to_string()
            .contains("sampled by the test host"),
        "{denied:?}"
    );
    let no_elicit = call_tool(&client, "test_elicitation", elicit.clone()).await;
    assert!(
        !upstream_part(&no_elicit).to_string().contains("accept"),
        "{no_elicit:?}"
    );
    assert_eq!(host.sampled.load(Ordering::SeqCst), 0);
    assert_eq!(host.elicited.load(Ordering::SeqCst), 0);
    drop(client);

    // Allowed: the requests reach the host, and its answers come back into the tools' results.
    let dir = Scratch::new("tg-fixture");
    let host = Host::default();
    let sections = "[sampling]\naction = \"allow\"\n[elicitation]\naction = \"allow\"\n";
    let (client, _) = gateway(&dir, &url, sections, host.clone()).await;
    let sampled = upstream_part(&call_tool(&client, "test_sampling", sample.clone()).await);
    assert!(
        sampled
            .to_string()
            .contains("LLM response: sampled by the test host"),
        "{sampled}"
    );
    let answered = upstream_part(&call_tool(&client, "test_elicitation", elicit.clone()).await);
    let answer = answered.to_string();
    assert!(
        answer.contains("action=accept") && answer.contains("ada@example.com"),
        "{answered}"
    );
    assert_eq!(host.sampled.load(Ordering::SeqCst), 1);
    assert_eq!(host.elicited.load(Ordering::SeqCst), 1);
    drop(client);

    // Held for a reviewer: the request waits until it is approved, then reaches the host.
    let dir = Scratch::new("tg-fixture");
    let host = Host::default();
    let (client, port) = gateway(
        &dir,
        &url,
        "[sampling]\naction = \"approval\"\n",
        host.clone(),
    )
    .await;
    let call = tokio::spawn(async move {
        let r = call_tool(&client, "test_sampling", sample).await;
        (client, r)
    });
    let id = loop {
        let (status, held) = reviewer(port, Some(REVIEWER), "GET", "/upstream-requests", "").await;
        assert_eq!(status, 200, "{held}");
        if let Some(first) = held.as_array().and_then(|a| a.first()) {
            assert_eq!(first["kind"], "sampling/createMessage", "{held}");
            break first["id"].as_str().expect("id").to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        host.sampled.load(Ordering::SeqCst),
        0,
        "not before the approval"
    );
    let path = format!("/upstream-requests/{id}/approve");
    let (status, _) = reviewer(port, Some(REVIEWER), "POST", &path, "").await;
    assert_eq!(status, 200);
    let (_client, approved) = call.await.expect("the call ends");
    assert_eq!(payload(&approved)["status"], "ok", "{approved:?}");
    assert!(
        upstream_part(&approved)
            .to_string()
            .contains("sampled by the test host"),
        "{approved:?}"
    );
    assert_eq!(host.sampled.load(Ordering::SeqCst), 1);
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_conformance),
    ignore = "needs TOOLGUARD_CONFORMANCE (set by .ci/run)"
)]
async fn untrusted_resources_prompts_and_tool_results_become_sources() {
    let (_fixture, url) = fixture().await;
    // A resource read from an untrusted upstream taints the session: the flow policy refuses
    // the state-changing tool afterwards; declared trusted, it does not.
    for (trust, after) in [("untrusted", "policy_denied"), ("trusted", "ok")] {
        let dir = Scratch::new("tg-fixture");
        let sections = format!("[resources]\nexpose = [\"test://*\"]\ntrust = \"{trust}\"\n");
        let (client, _) = gateway(&dir, &url, &sections, Host::default()).await;
        let before = call_tool(&client, "test_simple_text", json!({})).await;
        assert_eq!(payload(&before)["status"], "ok", "{before:?}");
        client
            .read_resource(ReadResourceRequestParams::new("test://static-text"))
            .await
            .expect("resources/read");
        let then = call_tool(&client, "test_simple_text", json!({})).await;
        assert_eq!(payload(&then)["status"], after, "trust = {trust}: {then:?}");
    }
    // A prompt's messages, and an untrusted tool's result (an image), are sources too.
    let dir = Scratch::new("tg-fixture");
    let (client, _) = gateway(&dir, &url, "", Host::default()).await;
    client
        .get_prompt(GetPromptRequestParams::new("test_simple_prompt"))
        .await
        .expect("prompts/get");
    let then = call_tool(&client, "test_simple_text", json!({})).await;
    assert_eq!(payload(&then)["status"], "policy_denied", "{then:?}");
    let dir = Scratch::new("tg-fixture");
    let (client, _) = gateway(&dir, &url, "", Host::default()).await;
    call_tool(&client, "test_image_content", json!({})).await;
    let then = call_tool(&client, "test_simple_text", json!({})).await;
    assert_eq!(payload(&then)["status"], "policy_denied", "{then:?}");
}
