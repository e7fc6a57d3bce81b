//! The `mcp-proxy` and `policy check` subcommands of the `toolguard` command.
//!
//! ```text
//! toolguard policy check FILE [--upstream-url URL | -- UPSTREAM_CMD...]
//! toolguard mcp-proxy --policy FILE [--listen 127.0.0.1:PORT] (--upstream-url URL | -- UPSTREAM_CMD...)
//! ```
//!
//! `policy check` validates a policy file without serving anything: syntax, unknown keys, and the
//! declaration rules that need no schema; given an upstream, it also connects to it, lists its
//! tools and checks every declaration against its schema (and that every tool the file names is
//! offered). Exit status 0 when valid, 1 when not (the error names file and line), 2 on a usage
//! error.
//!
//! `mcp-proxy` serves MCP on standard input and output in front of the upstream (see
//! `toolguard::proxy`), or with `--listen` over Streamable HTTP at `http://ADDR/mcp` (feature
//! `mcp-proxy-http`; callers send bearer tokens). The upstream is a command after `--` (a child
//! process over stdio) or, with `--upstream-url`, a Streamable HTTP endpoint (feature
//! `mcp-proxy-upstream-http`); exactly one of the two. Exit status 1 when it cannot start.

use std::process::ExitCode;

const USAGE: &str = "usage: toolguard policy check FILE [--upstream-url URL | -- UPSTREAM_CMD...]
       toolguard mcp-proxy --policy FILE [--listen 127.0.0.1:PORT] (--upstream-url URL | -- UPSTREAM_CMD...)";

/// Runs the subcommand `args[0]` names if it is one of this module's; `None` otherwise.
pub fn run(args: &[String]) -> Option<ExitCode> {
    match args.first().map(String::as_str) {
        Some("policy") => Some(policy(&args[1..])),
        Some("mcp-proxy") => Some(mcp_proxy(&args[1..])),
        _ => None,
    }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("toolguard: {message}\n{USAGE}");
    ExitCode::from(2)
}

#[cfg_attr(
    not(feature = "policy"),
    expect(dead_code, reason = "only the policy subcommands split a command line")
)]
/// Splits `args` at `--`: the options before, the upstream command after.
fn split_command(args: &[String]) -> (&[String], &[String]) {
    match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &[]),
    }
}

#[cfg(feature = "policy")]
fn policy(args: &[String]) -> ExitCode {
    let (opts, command) = split_command(args);
    let (verb, file, rest) = match opts {
        [verb, file, rest @ ..] => (verb, file, rest),
        _ => return usage("`policy` takes `check FILE`"),
    };
    if verb != "check" {
        return usage(&format!("unknown `policy` command `{verb}`"));
    }
    let url = match rest {
        [] => None,
        [flag, url] if flag == "--upstream-url" => Some(url.clone()),
        _ => {
            return usage("`policy check FILE` takes `--upstream-url URL` or `-- UPSTREAM_CMD...`");
        }
    };
    let policy = match toolguard::declare::policy::Policy::load(file) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let names: Vec<&str> = policy.tool_names().collect();
    match upstream_target(url, command) {
        Ok(Some(target)) => check_against_upstream(&policy, target),
        Ok(None) => {
            println!(
                "{file}: valid, revision {}, declares {} tool(s): {}",
                policy.revision(),
                names.len(),
                names.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(e) => usage(&e),
    }
}

/// The upstream named on the command line: `--upstream-url URL` or a command after `--`, never
/// both; `None` when neither.
#[cfg(feature = "policy")]
fn upstream_target(url: Option<String>, command: &[String]) -> Result<Option<Upstream>, String> {
    match (url, command.is_empty()) {
        (Some(_), false) => Err(
            "give the upstream either as `--upstream-url URL` or as a command after `--`, not both"
                .to_owned(),
        ),
        (Some(url), true) => Ok(Some(Upstream::Url(url))),
        (None, false) => Ok(Some(Upstream::Command(command.to_vec()))),
        (None, true) => Ok(None),
    }
}

/// The upstream as the proxy names it.
#[cfg(feature = "mcp-proxy")]
type Upstream = toolguard::proxy::UpstreamTarget;

/// The upstream as the command line names it (without the proxy, only to refuse it clearly).
#[cfg(all(feature = "policy", not(feature = "mcp-proxy")))]
#[expect(dead_code, reason = "without the proxy an upstream is only refused")]
enum Upstream {
    Command(Vec<String>),
    Url(String),
}

#[cfg(all(feature = "policy", feature = "mcp-proxy"))]
fn check_against_upstream(
    policy: &toolguard::declare::policy::Policy,
    target: Upstream,
) -> ExitCode {
    let run = async {
        let upstream = toolguard::proxy::Upstream::open(&target, policy).await?;
        let offered = upstream.offered().await;
        upstream.close().await;
        let offered = offered?;
        let specs = policy.declare_offered(&offered)?;
        Ok::<_, toolguard::proxy::ProxyError>((offered, specs))
    };
    match runtime().and_then(|rt| rt.block_on(run).map_err(|e| e.to_string())) {
        Ok((offered, specs)) => {
            let exposed: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            let hidden: Vec<&str> = offered
                .iter()
                .map(|o| o.name.as_str())
                .filter(|n| !exposed.contains(n))
                .collect();
            println!(
                "{}: valid against the upstream, revision {}; exposed: {}; hidden: {}",
                policy.file().display(),
                policy.revision(),
                exposed.join(", "),
                hidden.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(all(feature = "policy", not(feature = "mcp-proxy")))]
fn check_against_upstream(_: &toolguard::declare::policy::Policy, target: Upstream) -> ExitCode {
    drop(target);
    usage(
        "checking against an upstream needs the `mcp-proxy` feature: cargo install ... --features cli,mcp-proxy",
    )
}

#[cfg(not(feature = "policy"))]
fn policy(_: &[String]) -> ExitCode {
    usage("`policy` needs the `policy` feature: cargo install ... --features cli,policy")
}

/// The options of `mcp-proxy`.
#[cfg(feature = "mcp-proxy")]
#[derive(Default)]
struct ProxyOptions {
    policy: Option<String>,
    listen: Option<String>,
    upstream_url: Option<String>,
}

/// `--policy FILE [--listen ADDR] [--upstream-url URL]` (also as `--name=value`).
#[cfg(feature = "mcp-proxy")]
fn proxy_options(opts: &[String]) -> Result<ProxyOptions, String> {
    let mut parsed = ProxyOptions::default();
    let mut it = opts.iter();
    while let Some(flag) = it.next() {
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_owned())),
            None => (flag.as_str(), None),
        };
        let value = inline
            .or_else(|| it.next().cloned())
            .ok_or_else(|| format!("`{name}` needs a value"))?;
        let slot = match name {
            "--policy" => &mut parsed.policy,
            "--listen" => &mut parsed.listen,
            "--upstream-url" => &mut parsed.upstream_url,
            other => return Err(format!("unknown option `{other}`")),
        };
        if slot.replace(value).is_some() {
            return Err(format!("`{name}` is given twice"));
        }
    }
    if parsed.policy.is_none() {
        return Err("`--policy FILE` is required".to_owned());
    }
    Ok(parsed)
}

#[cfg(feature = "mcp-proxy")]
fn mcp_proxy(args: &[String]) -> ExitCode {
    let (opts, command) = split_command(args);
    let (file, listen, target) = match proxy_options(opts).and_then(|o| {
        let target = upstream_target(o.upstream_url, command)?.ok_or(
            "give the upstream MCP server as `--upstream-url URL` or as a command after `--`",
        )?;
        Ok((o.policy.unwrap_or_default(), o.listen, target))
    }) {
        Ok(o) => o,
        Err(e) => return usage(&e),
    };
    let run = async {
        let guard = toolguard::proxy::Guard::start_with(&file, &target, None).await?;
        match listen {
            None => guard.serve_stdio().await,
            Some(addr) => serve_http(guard, &addr).await,
        }
    };
    match runtime().and_then(|rt| rt.block_on(run).map_err(|e| e.to_string())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolguard: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(feature = "mcp-proxy-http")]
async fn serve_http(
    guard: std::sync::Arc<toolguard::proxy::Guard>,
    addr: &str,
) -> Result<(), toolguard::proxy::ProxyError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        toolguard::proxy::ProxyError::Upstream(format!("cannot listen on {addr}: {e}"))
    })?;
    eprintln!("toolguard: serving MCP at http://{addr}/mcp");
    guard.serve_http(listener).await
}

#[cfg(all(feature = "mcp-proxy", not(feature = "mcp-proxy-http")))]
async fn serve_http(
    _: std::sync::Arc<toolguard::proxy::Guard>,
    _: &str,
) -> Result<(), toolguard::proxy::ProxyError> {
    Err(toolguard::proxy::ProxyError::Upstream(
        "`--listen` needs the `mcp-proxy-http` feature: cargo install ... --features cli,mcp-proxy-http".to_owned(),
    ))
}

#[cfg(not(feature = "mcp-proxy"))]
fn mcp_proxy(_: &[String]) -> ExitCode {
    usage("`mcp-proxy` needs the `mcp-proxy` feature: cargo install ... --features cli,mcp-proxy")
}

#[cfg(feature = "mcp-proxy")]
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}
