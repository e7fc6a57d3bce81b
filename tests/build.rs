//! Build script of the test package: tells the service tests whether their service URL is set,
//! so that without it they are reported as ignored rather than passed.
//!
//! `TOOLGUARD_PG_URL` set (non-empty) enables `cfg(toolguard_pg)`, `TOOLGUARD_REDIS_URL` enables
//! `cfg(toolguard_redis)`, `TOOLGUARD_NPM_PREFIX` (where the reference MCP servers are installed)
//! enables `cfg(toolguard_npm)`, `TOOLGUARD_CONFORMANCE` (where the MCP conformance suite and a
//! Node 22 are installed; its fixture server is `tests/conformance/server.py`) enables
//! `cfg(toolguard_conformance)`; the PostgreSQL and Redis tests carry
//! `#[cfg_attr(not(toolguard_pg), ignore = "...")]` and the like.
//!
//! A `node` program that runs (`node --version`) enables `cfg(toolguard_node)`, for the test that
//! drives the MCP server with the official TypeScript SDK (`tests/mcp_sdk.rs`); a `chromedriver`
//! (or `TOOLGUARD_CHROMEDRIVER`) that runs enables `cfg(toolguard_chromium)`, for the approval
//! console's browser test (`tests/console_browser.rs`); a `python3` that imports the Python MCP
//! SDK's FastMCP enables `cfg(toolguard_fastmcp)`, for the gateway tests against a Python tool
//! server (`tests/proxy_fastmcp.rs`).

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for (var, cfg) in [
        ("TOOLGUARD_PG_URL", "toolguard_pg"),
        ("TOOLGUARD_REDIS_URL", "toolguard_redis"),
        ("TOOLGUARD_NPM_PREFIX", "toolguard_npm"),
        ("TOOLGUARD_CONFORMANCE", "toolguard_conformance"),
    ] {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        println!("cargo::rerun-if-env-changed={var}");
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    println!("cargo::rustc-check-cfg=cfg(toolguard_node)");
    println!("cargo::rerun-if-env-changed=PATH");
    let node = std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if node {
        println!("cargo::rustc-cfg=toolguard_node");
    }
    // The Python MCP SDK (FastMCP) for the gateway tests against a Python tool server
    // (`tests/proxy_fastmcp.rs`): `python3 -c "import mcp.server.fastmcp"` succeeds.
    println!("cargo::rustc-check-cfg=cfg(toolguard_fastmcp)");
    println!("cargo::rerun-if-env-changed=PYTHONPATH");
    let fastmcp = std::process::Command::new("python3")
        .args(["-c", "import mcp.server.fastmcp"])
        .output()
        .is_ok_and(|out| out.status.success());
    if fastmcp {
        println!("cargo::rustc-cfg=toolguard_fastmcp");
    }
    println!("cargo::rustc-check-cfg=cfg(toolguard_chromium)");
    println!("cargo::rerun-if-env-changed=TOOLGUARD_CHROMEDRIVER");
    let driver = std::env::var("TOOLGUARD_CHROMEDRIVER").unwrap_or_else(|_| "chromedriver".into());
    let chromium = std::process::Command::new(driver)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if chromium {
        println!("cargo::rustc-cfg=toolguard_chromium");
    }
}
