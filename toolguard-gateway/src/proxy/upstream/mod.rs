//! The upstream MCP server: a child process spoken to over its stdio, or a Streamable HTTP
//! endpoint ([`http`]), with rmcp's client; its tools listed, and checked calls forwarded to it.
//!
//! Every exchange with the upstream has a deadline (`[proxy] upstream_timeout_secs`, default
//! 30): an upstream that does not initialize or list its tools in time fails the start naming
//! the command or URL, and a call it does not answer in time fails (`failed`) instead of hanging.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{NotificationContext, Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::ProxyError;
use toolguard_pipeline::declare::{ForwardFn, RuntimeTool};
use toolguard_pipeline::error::ToolError;
use toolguard_pipeline::spec::ToolSpec;
use toolguard_policy::{Offered, Policy};

mod http;

/// Longest upstream error text passed on (it is untrusted and may be large).
const MAX_ERROR_TEXT: usize = 2000;

/// Where the upstream MCP server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamTarget {
    /// A program and its arguments, started as a child process and spoken to over its stdio.
    Command(Vec<String>),
    /// A Streamable HTTP endpoint, e.g. `http://127.0.0.1:3001/mcp` (feature
    /// `mcp-proxy-upstream-http`); the bearer token comes from `[proxy] upstream_token_env`.
    Url(String),
}

impl std::fmt::Display for UpstreamTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamTarget::Command(c) => write!(f, "`{}`", c.join(" ")),
            UpstreamTarget::Url(u) => write!(f, "{u}"),
        }
    }
}

/// The proxy's client side: records the upstream's `notifications/tools/list_changed`.
#[derive(Clone, Default)]
pub(super) struct UpstreamEvents {
    tools_changed: Arc<Notify>,
}

impl ClientHandler for UpstreamEvents {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

/// A connected upstream MCP server.
pub struct Upstream {
    service: RunningService<RoleClient, UpstreamEvents>,
    tools_changed: Arc<Notify>,
    target: UpstreamTarget,
    timeout: Duration,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Starts `command` (program and arguments) and initializes an MCP session over its stdio,
    /// with the default deadline.
    pub async fn spawn(command: &[String]) -> Result<Self, ProxyError> {
        let target = UpstreamTarget::Command(command.to_vec());
        let timeout = toolguard_policy::ProxySection::default().upstream_timeout();
        Self::start(target, None, timeout).await
    }

    /// Connects to `target` with the upstream settings of `policy` (deadline, bearer token).
    pub async fn open(target: &UpstreamTarget, policy: &Policy) -> Result<Self, ProxyError> {
        let token = http::bearer_token(target, policy)?;
        Self::start(target.clone(), token, policy.proxy.upstream_timeout()).await
    }

    async fn start(
        target: UpstreamTarget,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<Self, ProxyError> {
        let events = UpstreamEvents::default();
        let tools_changed = events.tools_changed.clone();
        let service = match &target {
            UpstreamTarget::Command(command) => {
                within(timeout, &target, "initialize", spawn(command, events)).await?
            }
            UpstreamTarget::Url(url) => {
                within(
                    timeout,
                    &target,
                    "initialize",
                    http::connect(url, token, events),
                )
                .await?
            }
        };
        Ok(Upstream {
            service,
            tools_changed,
            target,
            timeout,
        })
    }

    /// Where the upstream is.
    pub fn target(&self) -> &UpstreamTarget {
        &self.target
    }

    /// The tools the upstream offers.
    pub async fn offered(&self) -> Result<Vec<Offered>, ProxyError> {
        let list = async {
            self.service
                .list_all_tools()
                .await
                .map_err(|e| format!("tools/list failed: {e}"))
        };
        let tools = within(self.timeout, &self.target, "list its tools", list).await?;
        Ok(tools
            .into_iter()
            .map(|t| Offered {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object(t.input_schema.as_ref().clone()),
            })
            .collect())
    }

    /// Resolves when the upstream announces that its tool list changed.
    pub async fn tools_changed(&self) {
        self.tools_changed.notified().await;
    }

    /// A run-time tool for `spec` that forwards to this upstream.
    pub fn tool(&self, spec: ToolSpec) -> RuntimeTool {
        RuntimeTool::new(spec, forwarder(self.service.peer().clone(), self.timeout))
    }

    /// Closes the session and stops the child.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// Starts `command` as a child process and initializes MCP over its stdio.
async fn spawn(
    command: &[String],
    events: UpstreamEvents,
) -> Result<RunningService<RoleClient, UpstreamEvents>, String> {
    let (program, args) = command
        .split_first()
        .ok_or_else(|| "no upstream command given".to_owned())?;
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args).kill_on_drop(true);
    let transport =
        TokioChildProcess::new(cmd).map_err(|e| format!("cannot start `{program}`: {e}"))?;
    events
        .serve(transport)
        .await
        .map_err(|e| format!("did not initialize an MCP session: {e}"))
}

/// Runs `step` with the upstream deadline; a failure or a missed deadline names the upstream.
async fn within<T>(
    timeout: Duration,
    target: &UpstreamTarget,
    what: &str,
    step: impl Future<Output = Result<T, String>>,
) -> Result<T, ProxyError> {
    match tokio::time::timeout(timeout, step).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(ProxyError::Upstream(format!("{target}: {e}"))),
        Err(_) => Err(ProxyError::Upstream(format!(
            "{target}: did not {what} within {}s (`[proxy] upstream_timeout_secs`)",
            timeout.as_secs()
        ))),
    }
}

/// The handler of every forwarded tool: `tools/call` on the upstream within `timeout`; an
/// `isError` result is a failed call, anything else the (untrusted) result.
fn forwarder(peer: Peer<RoleClient>, timeout: Duration) -> ForwardFn {
    Arc::new(move |name, args| {
        let peer = peer.clone();
        Box::pin(async move {
            let Value::Object(arguments) = args else {
                return Err(ToolError::failed("arguments are not an object".to_owned()));
            };
            let params = CallToolRequestParams::new(name).with_arguments(arguments);
            let result = tokio::time::timeout(timeout, peer.call_tool(params))
                .await
                .map_err(|_| {
                    ToolError::failed(format!(
                        "the upstream did not answer within {}s",
                        timeout.as_secs()
                    ))
                })?
                .map_err(|e| {
                    ToolError::failed(format!("the upstream call failed: {e}")).with_source(e)
                })?;
            result_value(result)
        })
    })
}

fn result_value(result: CallToolResult) -> Result<Value, ToolError> {
    if result.is_error == Some(true) {
        let text: String = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        let cut: String = text.chars().take(MAX_ERROR_TEXT).collect();
        return Err(ToolError::failed(format!(
            "the upstream tool failed: {cut}"
        )));
    }
    if let Some(structured) = result.structured_content.filter(Value::is_object) {
        return Ok(structured);
    }
    Ok(json!({ "content": result.content }))
}
