//! The upstream MCP server as `policy check` and `mcp-proxy` name it: `--upstream-url URL` or a
//! command after `--`, never both.

use clap::Args;

/// The options that name the upstream MCP server.
#[derive(Debug, Args)]
pub(crate) struct UpstreamArgs {
    /// The upstream MCP server as a Streamable HTTP endpoint, e.g. http://127.0.0.1:3001/mcp
    /// (feature `upstream-http`; plain http:// only).
    #[arg(long, value_name = "URL")]
    upstream_url: Option<String>,
    /// The upstream MCP server as a program and its arguments, started as a child process and
    /// spoken to over its standard input and output.
    #[arg(last = true, value_name = "UPSTREAM_CMD")]
    command: Vec<String>,
}

/// Where the upstream MCP server is.
#[derive(Debug)]
#[cfg_attr(
    not(feature = "mcp-proxy"),
    expect(dead_code, reason = "without the proxy an upstream is only refused")
)]
pub enum Upstream {
    Command(Vec<String>),
    Url(String),
}

impl UpstreamArgs {
    /// The upstream named on the command line, `None` when neither form is given; `Err` holds
    /// the message of a usage error.
    pub(crate) fn target(self) -> Result<Option<Upstream>, String> {
        match (self.upstream_url, self.command.is_empty()) {
            (Some(_), false) => Err(
                "give the upstream either as `--upstream-url URL` or as a command after `--`, \
                 not both"
                    .to_owned(),
            ),
            (Some(url), true) => check_url_feature().map(|()| Some(Upstream::Url(url))),
            (None, false) => Ok(Some(Upstream::Command(self.command))),
            (None, true) => Ok(None),
        }
    }
}

/// `--upstream-url` is refused up front when this build cannot reach an upstream over HTTP.
fn check_url_feature() -> Result<(), String> {
    if cfg!(feature = "upstream-http") {
        Ok(())
    } else {
        Err(crate::missing_feature("`--upstream-url`", "upstream-http"))
    }
}

#[cfg(feature = "mcp-proxy")]
impl From<Upstream> for toolguard::gateway::UpstreamTarget {
    fn from(upstream: Upstream) -> Self {
        match upstream {
            Upstream::Command(command) => toolguard::gateway::UpstreamTarget::Command(command),
            Upstream::Url(url) => toolguard::gateway::UpstreamTarget::Url(url),
        }
    }
}

/// The async runtime the upstream (or an audit database) is spoken to on.
#[cfg(any(feature = "mcp-proxy", feature = "audit"))]
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}
