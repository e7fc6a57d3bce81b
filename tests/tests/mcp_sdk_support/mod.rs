//! The MCP server example's binary, shared by the tests that drive it over stdio.

use std::path::PathBuf;

/// The example binary next to the running test's binary, (re)built with the features the
/// README's test command uses, so that a test run never drives a stale server.
pub fn server_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile dir");
    let mut build = std::process::Command::new(env!("CARGO"));
    build
        .args(["build", "--quiet", "--workspace", "--all-features"])
        .args(["--example", "mcp_server"])
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "building the example failed");
    profile_dir
        .join("examples")
        .join(format!("mcp_server{}", std::env::consts::EXE_SUFFIX))
}
