//! `toolguard mcp-proxy`: the guard pipeline in front of an upstream MCP server.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use clap::error::ErrorKind;
#[cfg(feature = "mcp-proxy")]
use std::path::Path;
#[cfg(feature = "mcp-proxy")]
use toolguard::gateway::{Guard, UpstreamTarget};

use crate::upstream::UpstreamArgs;

/// The exit statuses of `mcp-proxy`, at the end of its `--help`.
const EXIT_STATUS: &str = "\
Exit status:
  0  the session ended
  1  the proxy cannot start (policy file, upstream, store) or stopped on an error
  2  usage error";

/// Serve MCP in front of an upstream MCP server, every tool call through the guard pipeline.
///
/// Serves MCP on standard input and output (or with `--listen` over Streamable HTTP) and
/// answers `tools/list` with the upstream's tools the policy file exposes; every `tools/call`
/// runs through the guard pipeline the policy file declares (stores and audit trail in SQLite)
/// before it is forwarded. The upstream is a command after `--` (a child process spoken to over
/// its standard input and output) or `--upstream-url`: exactly one of the two.
#[derive(Debug, Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct ProxyArgs {
    /// The policy file (TOML): the tools exposed, principal, limits, approvals, reviewer tokens.
    #[arg(long, value_name = "FILE")]
    policy: PathBuf,
    /// Serve MCP over Streamable HTTP at http://ADDR/mcp instead of standard input and output,
    /// e.g. 127.0.0.1:8080; callers send bearer tokens (feature `http`).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The host key file (approvals are sealed and the audit trail anchored with it); default:
    /// the policy file's `[keys]`, else the environment variable TOOLGUARD_HOST_KEYS. Without
    /// keys the proxy does not start. Make one with `toolguard keys generate FILE`.
    #[arg(long, value_name = "FILE")]
    keys: Option<PathBuf>,
    #[command(flatten)]
    upstream: UpstreamArgs,
}

/// Runs `toolguard mcp-proxy` until the session ends.
#[cfg(feature = "mcp-proxy")]
pub(crate) fn run(args: ProxyArgs) -> ExitCode {
    let listen = match Listen::new(args.listen) {
        Ok(listen) => listen,
        Err(message) => return usage(ErrorKind::InvalidValue, message),
    };
    match args.upstream.target() {
        Ok(Some(target)) => serve(&args.policy, args.keys.as_deref(), listen, target.into()),
        Ok(None) => usage(
            ErrorKind::MissingRequiredArgument,
            "give the upstream MCP server as `--upstream-url URL` or as a command after `--`"
                .to_owned(),
        ),
        Err(message) => usage(ErrorKind::ArgumentConflict, message),
    }
}

#[cfg(not(feature = "mcp-proxy"))]
pub fn run(_: ProxyArgs) -> ExitCode {
    usage(
        ErrorKind::InvalidSubcommand,
        crate::missing_feature("`mcp-proxy`", "mcp-proxy"),
    )
}

/// A usage error of `mcp-proxy`: exit status 2.
fn usage(kind: ErrorKind, message: String) -> ExitCode {
    crate::usage_error(&["mcp-proxy"], kind, message)
}

/// Where the proxy serves MCP.
#[cfg(feature = "mcp-proxy")]
enum Listen {
    /// On its own standard input and output.
    Stdio,
    /// Over Streamable HTTP at `http://ADDR/mcp`.
    #[cfg(feature = "http")]
    Http(String),
}

#[cfg(feature = "mcp-proxy")]
impl Listen {
    /// `--listen ADDR`, refused when this build cannot serve HTTP.
    fn new(listen: Option<String>) -> Result<Listen, String> {
        match listen {
            None => Ok(Listen::Stdio),
            #[cfg(feature = "http")]
            Some(addr) => Ok(Listen::Http(addr)),
            #[cfg(not(feature = "http"))]
            Some(_) => Err(crate::missing_feature("`--listen`", "http")),
        }
    }
}

/// Starts the proxy and serves until the session ends.
#[cfg(feature = "mcp-proxy")]
fn serve(policy: &Path, keys: Option<&Path>, listen: Listen, target: UpstreamTarget) -> ExitCode {
    let keys = match keys.map(toolguard::HostKeys::from_file).transpose() {
        Ok(keys) => keys,
        Err(e) => {
            eprintln!("toolguard: {e}");
            return crate::failure();
        }
    };
    let session = async {
        let guard = Guard::start_with_keys(policy, &target, None, keys).await?;
        match listen {
            Listen::Stdio => guard.serve_stdio().await,
            #[cfg(feature = "http")]
            Listen::Http(addr) => serve_http(guard, &addr).await,
        }
    };
    let served =
        crate::upstream::runtime().and_then(|rt| rt.block_on(session).map_err(|e| e.to_string()));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolguard: {e}");
            crate::failure()
        }
    }
}

/// Serves the proxy over Streamable HTTP on `addr`.
#[cfg(feature = "http")]
async fn serve_http(
    guard: std::sync::Arc<Guard>,
    addr: &str,
) -> Result<(), toolguard::gateway::ProxyError> {
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| {
        toolguard::gateway::ProxyError::Upstream(format!("cannot listen on {addr}: {e}"))
    })?;
    eprintln!("toolguard: serving MCP at http://{addr}/mcp");
    guard.serve_http(listener).await
}
