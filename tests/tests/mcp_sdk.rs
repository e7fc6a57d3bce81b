//! The MCP server example driven by the official TypeScript MCP SDK client
//! (`@modelcontextprotocol/sdk`, pinned in `tests/js/package.json`) over stdio.
//!
//! `listTools` runs the SDK's schema validation of the whole list (a single non-object property
//! schema would make it refuse every tool); the example serves tools with untyped, optional,
//! enum, nested and collection arguments. `callTool` round trips check results, the SDK's
//! validation of `structuredContent` against each output schema, a tool-level error and the
//! JSON-RPC error of an unknown tool.
//!
//! Ignored when `node` is not on the machine (see `build.rs`). The SDK is installed by `.ci/run`
//! (`npm ci` in `tests/js`); without it this test installs it the same way.

mod mcp_sdk_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn js_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("js")
}

/// Installs the pinned SDK when `tests/js/node_modules` lacks it.
fn ensure_sdk(dir: &Path) {
    if dir
        .join("node_modules/@modelcontextprotocol/sdk/package.json")
        .exists()
    {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .expect("npm runs");
    assert!(
        status.success(),
        "installing @modelcontextprotocol/sdk failed: run `npm ci` in {}",
        dir.display()
    );
}

/// Runs the SDK client script against the example server; its JSON report.
fn run_sdk_client() -> Value {
    let server = mcp_sdk_support::server_binary();
    let dir = js_dir();
    ensure_sdk(&dir);
    let output = Command::new("node")
        .arg("mcp_sdk_client.mjs")
        .arg(&server)
        .current_dir(&dir)
        .output()
        .expect("node runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the SDK client failed: {stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("the SDK client's report is JSON ({e}); stderr: {stderr}"))
}

#[test]
#[cfg_attr(not(toolguard_node), ignore = "node is not installed")]
fn typescript_sdk_lists_and_calls_every_tool() {
    let report = run_sdk_client();

    // `listTools` accepted the list (it throws otherwise) and kept every tool.
    let tools = report["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "get_balance",
            "transfer_funds",
            "reset_ledger",
            "add_note",
            "schedule_payment"
        ]
    );
    let schedule = &tools[4]["inputSchema"]["properties"];
    // Untyped (an object schema saying what it accepts), optional, enum, nested, collection.
    assert_eq!(
        schedule["metadata"],
        json!({"description": toolguard::providers::ANY_VALUE})
    );
    assert_eq!(
        schedule["start_in_days"]["type"],
        json!(["integer", "null"])
    );
    assert_eq!(schedule["frequency"]["$ref"], "#/$defs/Frequency");
    assert_eq!(schedule["payee"]["$ref"], "#/$defs/Payee");
    assert_eq!(schedule["tags"]["items"], json!({"type": "string"}));
    // No non-standard format reached the client (schemars writes `uint32` and `uint16`).
    let text = report["tools"].to_string();
    assert!(!text.contains("\"format\":\"uint"), "{text}");
    // Account arguments are declared as identifiers.
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["account"]["pattern"],
        toolguard::Identifier::PATTERN
    );

    // Round trips: the SDK validated each structuredContent against the tool's output schema.
    assert_eq!(report["balance"]["isError"], false);
    assert_eq!(
        report["balance"]["structuredContent"],
        json!({"minor_units": 125000, "currency": "EUR"})
    );
    assert_eq!(
        report["scheduled"]["isError"], false,
        "{}",
        report["scheduled"]
    );
    assert_eq!(
        report["scheduled"]["structuredContent"]["payments_per_year"],
        12
    );
    assert_eq!(report["scheduled"]["payload"]["status"], "ok");

    // An account with a space and a semicolon is not an identifier.
    assert_eq!(report["invalid"]["isError"], true);
    assert_eq!(report["invalid"]["payload"]["status"], "invalid_arguments");
    assert_eq!(
        report["invalid"]["payload"]["errors"][0]["pointer"],
        "/account"
    );

    // An unknown tool: the JSON-RPC error MCP prescribes.
    assert_eq!(report["unknown"]["code"], -32602);
    assert!(
        report["unknown"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Unknown tool: drop_tables")),
        "{}",
        report["unknown"]
    );
}
