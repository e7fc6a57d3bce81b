//! The upstream MCP server: a child process spoken to over its stdio, or a Streamable HTTP
//! endpoint ([`http`]), with rmcp's client; its tools listed, and checked calls forwarded to it.
//!
//! The client side offers the latest stable protocol version ([`STABLE`]), never a draft, and
//! the capabilities a client of the gateway can serve: sampling and elicitation unless the
//! policy denies them, and roots. The upstream's own requests and notifications are handed to
//! the [`Relay`], which routes them to the client they belong to; its sampling and elicitation
//! requests first pass `[sampling]` / `[elicitation]` (allowed, held for a reviewer, denied).
//!
//! Every exchange with the upstream has a deadline (`[proxy] upstream_timeout_secs`, default
//! 30): an upstream that does not initialize or list its tools in time fails the start naming
//! the command or URL, and a call it does not answer in time fails (`failed`) instead of hanging.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientConfig, ClientRequest, ClientResult,
    CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams, ElicitResult,
    Implementation, ListRootsResult, ProgressNotificationParam, ProtocolVersion, Request,
    RequestNoParam, ResourceUpdatedNotificationParam, ServerCapabilities, ServerRequest,
    ServerResult,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RunningService};
use rmcp::{ClientHandler, ErrorData, RoleClient, ServiceExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::ProxyError;
use super::clients::List;
use super::relay::{CALLER, Relay};
use toolguard_pipeline::declare::{ForwardFn, RuntimeTool};
use toolguard_pipeline::error::ToolError;
use toolguard_pipeline::spec::ToolSpec;
use toolguard_policy::UpstreamRequestAction;
use toolguard_policy::{Offered, Policy};

mod http;
mod stdio;
mod tap;

/// Longest upstream error text passed on (it is untrusted and may be large).
const MAX_ERROR_TEXT: usize = 2000;

/// The protocol version the gateway speaks on both sides: the latest stable revision (drafts
/// are never offered or accepted).
pub const STABLE: ProtocolVersion = ProtocolVersion::V_2025_11_25;

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

/// The proxy's client side: the upstream's requests and notifications, handed to the relay.
#[derive(Clone)]
pub(super) struct UpstreamEvents {
    tools_changed: Arc<Notify>,
    relay: Arc<Relay>,
    timeout: Duration,
    offer_sampling: bool,
    offer_elicitation: bool,
}

impl UpstreamEvents {
    /// Applies `[sampling]` (`sampling`) or `[elicitation]` to one upstream request.
    async fn admit(&self, sampling: bool, summary: Value) -> Result<(), ErrorData> {
        let (kind, section) = if sampling {
            ("sampling/createMessage", "[sampling]")
        } else {
            ("elicitation/create", "[elicitation]")
        };
        match self.relay.action(sampling) {
            UpstreamRequestAction::Allow => Ok(()),
            UpstreamRequestAction::Approval => {
                if self.relay.hold(kind, summary, self.timeout).await {
                    Ok(())
                } else {
                    Err(ErrorData::invalid_request(
                        format!(
                            "{kind} of the upstream was not approved by a reviewer (`{section} action = \"approval\"`)"
                        ),
                        None,
                    ))
                }
            }
            _ => Err(ErrorData::invalid_request(
                format!(
                    "{kind} of the upstream is denied by the gateway's policy (`{section} action`)"
                ),
                None,
            )),
        }
    }
}

#[allow(deprecated)]
impl ClientHandler for UpstreamEvents {
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = json!({"roots": {"listChanged": true}});
        if self.offer_sampling {
            capabilities["sampling"] = json!({});
        }
        if self.offer_elicitation {
            capabilities["elicitation"] = json!({"form": {}, "url": {}});
        }
        let capabilities = serde_json::from_value(capabilities).unwrap_or_default();
        let mut config = ClientConfig::new(
            capabilities,
            Implementation::new("toolguard-gateway", env!("CARGO_PKG_VERSION")),
        );
        config.protocol_version = STABLE;
        config
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.admit(true, serde_json::to_value(&params).unwrap_or(Value::Null))
            .await?;
        let request = ServerRequest::CreateMessageRequest(Request::new(params));
        match self.relay.ask_client(request, &context).await? {
            ClientResult::CreateMessageResult(r) => Ok(*r),
            other => reread(other),
        }
    }

    async fn create_elicitation(
        &self,
        params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.admit(false, serde_json::to_value(&params).unwrap_or(Value::Null))
            .await?;
        let request = ServerRequest::ElicitRequest(Request::new(params));
        match self.relay.ask_client(request, &context).await? {
            ClientResult::ElicitResult(r) => Ok(r),
            other => reread(other),
        }
    }

    async fn list_roots(
        &self,
        context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let request = ServerRequest::ListRootsRequest(RequestNoParam {
            method: Default::default(),
            extensions: Default::default(),
        });
        match self.relay.ask_client(request, &context).await? {
            ClientResult::ListRootsResult(r) => Ok(r),
            other => reread(other),
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.relay.progress(params).await;
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _passed = self.relay.notes.passing();
        if let Some(peer) = self.relay.log_target() {
            let _ = peer.notify_logging_message(params).await;
        }
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        for peer in self.relay.subscribers(&params.uri) {
            let _ = peer.notify_resource_updated(params.clone()).await;
        }
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relay.clients.changed(List::Resources).await;
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relay.clients.changed(List::Prompts).await;
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.notify_one();
    }
}

/// A result of another shape than expected read again as `T` (the union of results is
/// untagged, so a small result can land in another variant).
fn reread<T: serde::de::DeserializeOwned>(other: impl serde::Serialize) -> Result<T, ErrorData> {
    serde_json::to_value(other)
        .and_then(serde_json::from_value)
        .map_err(|e| ErrorData::internal_error(format!("unexpected answer: {e}"), None))
}

/// `T` from a server result.
pub(super) fn server_result<T: serde::de::DeserializeOwned>(
    result: ServerResult,
) -> Result<T, ErrorData> {
    reread(result)
}

/// A connected upstream MCP server.
pub struct Upstream {
    service: RunningService<RoleClient, UpstreamEvents>,
    tools_changed: Arc<Notify>,
    relay: Arc<Relay>,
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
        let policy = Policy::parse("(none)", String::new())?;
        Self::open(&target, &policy).await
    }

    /// Connects to `target` with the upstream settings of `policy` (deadline, bearer token).
    pub async fn open(target: &UpstreamTarget, policy: &Policy) -> Result<Self, ProxyError> {
        Self::open_with(target, policy, Arc::default()).await
    }

    /// [`Upstream::open`] handing the upstream's requests and notifications to `relay`.
    pub(super) async fn open_with(
        target: &UpstreamTarget,
        policy: &Policy,
        relay: Arc<Relay>,
    ) -> Result<Self, ProxyError> {
        let token = http::bearer_token(target, policy)?;
        relay.set_policy(policy);
        let timeout = policy.proxy.upstream_timeout();
        let events = UpstreamEvents {
            tools_changed: Arc::default(),
            relay: relay.clone(),
            timeout,
            offer_sampling: policy.sampling.action != UpstreamRequestAction::Deny,
            offer_elicitation: policy.elicitation.action != UpstreamRequestAction::Deny,
        };
        Self::start(target.clone(), token, timeout, events, relay).await
    }

    async fn start(
        target: UpstreamTarget,
        token: Option<String>,
        timeout: Duration,
        events: UpstreamEvents,
        relay: Arc<Relay>,
    ) -> Result<Self, ProxyError> {
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
            relay,
            target,
            timeout,
        })
    }

    /// The session with the upstream.
    pub(super) fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    /// How long the upstream has to answer one request.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The relay between the clients and the upstream.
    pub(super) fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// What the upstream announced at initialization: protocol version, capabilities, name.
    pub fn server_info(&self) -> Option<rmcp::model::ServerPeerInfo> {
        self.service.peer_info().map(|i| i.as_ref().clone())
    }

    /// The upstream's capabilities (none known: empty).
    pub(super) fn capabilities(&self) -> ServerCapabilities {
        self.server_info()
            .map(|i| i.capabilities)
            .unwrap_or_default()
    }

    /// Where the upstream is.
    pub fn target(&self) -> &UpstreamTarget {
        &self.target
    }

    /// The tools the upstream offers, as it describes them.
    pub async fn tools(&self) -> Result<Vec<rmcp::model::Tool>, ProxyError> {
        let list = async {
            self.service
                .list_all_tools()
                .await
                .map_err(|e| format!("tools/list failed: {e}"))
        };
        within(self.timeout, &self.target, "list its tools", list).await
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
        Ok(tools.iter().map(offered).collect())
    }

    /// Resolves when the upstream announces that its tool list changed.
    pub async fn tools_changed(&self) {
        self.tools_changed.notified().await;
    }

    /// A run-time tool for `spec` that forwards to this upstream.
    pub fn tool(&self, spec: ToolSpec) -> RuntimeTool {
        RuntimeTool::new(
            spec,
            forwarder(
                self.service.peer().clone(),
                self.relay.clone(),
                self.timeout,
            ),
        )
        .with_source_label(content_label)
    }

    /// Closes the session and stops the child.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The declaration input of an upstream tool: name, description, input schema.
pub(super) fn offered(t: &rmcp::model::Tool) -> Offered {
    Offered {
        name: t.name.to_string(),
        description: t.description.as_deref().unwrap_or_default().to_owned(),
        input_schema: Value::Object(t.input_schema.as_ref().clone()),
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
    cmd.args(args);
    let transport = stdio::ChildStdio::spawn(cmd, events.relay.clone())
        .map_err(|e| format!("cannot start `{program}`: {e}"))?;
    let transport = tap::Tapped::new(transport, events.relay.clone());
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

/// The handler of every forwarded tool: `tools/call` on the upstream within `timeout` (for the
/// client whose call it is: its progress and cancellation pass through); an `isError` result is
/// a failed call, anything else the (untrusted) result exactly as the upstream sent it (kept by
/// the upstream transport as JSON where it can, [`CallResults`](super::call_results)).
fn forwarder(peer: Peer<RoleClient>, relay: Arc<Relay>, timeout: Duration) -> ForwardFn {
    Arc::new(move |name, args| {
        let peer = peer.clone();
        let relay = relay.clone();
        Box::pin(async move {
            let Value::Object(arguments) = args else {
                return Err(ToolError::failed("arguments are not an object".to_owned()));
            };
            let params = CallToolRequestParams::new(name).with_arguments(arguments);
            let request = ClientRequest::CallToolRequest(Request::new(params));
            let caller = CALLER.try_with(Clone::clone).ok();
            let failed = |e: ErrorData| {
                ToolError::failed(format!("the upstream call failed: {}", e.message))
            };
            let (answer, kept) = relay
                .forward_with(&peer, caller.as_ref(), request, timeout, |id| {
                    relay.results.want(id.clone())
                })
                .await
                .map_err(failed)?;
            match kept.take() {
                Some(result) => checked(result),
                None => {
                    let typed = match answer {
                        ServerResult::CallToolResult(r) => r,
                        other => server_result::<CallToolResult>(other).map_err(failed)?,
                    };
                    let result = serde_json::to_value(&typed).map_err(|e| {
                        ToolError::failed(format!("the upstream result does not serialize: {e}"))
                    })?;
                    checked(result)
                }
            }
        })
    })
}

/// `result`, the `result` member of a `tools/call` answer, if it is a tool call result that
/// succeeded; an `isError` result is a failed call (with its text), anything that is not a
/// tool call result a failed exchange.
fn checked(result: Value) -> Result<Value, ToolError> {
    let typed = CallToolResult::deserialize(&result).map_err(|e| {
        ToolError::failed(format!(
            "the upstream call failed: the answer is not a tool call result: {e}"
        ))
    })?;
    if typed.is_error == Some(true) {
        let text: String = typed
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
    Ok(result)
}

/// The provenance label of a forwarded result: its content types (`text`, `image image/png`,
/// `resource text/plain`, `structuredContent`), so reviewers see what entered the session.
pub(super) fn content_label(result: &Value) -> Option<String> {
    let mut kinds: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        kinds.push(block_kind(block));
    }
    if result.get("structuredContent").is_some() {
        kinds.push("structuredContent".to_owned());
    }
    kinds.dedup();
    (!kinds.is_empty()).then(|| kinds.join(", "))
}

/// `text`, `image image/png`, `resource file:///x (text/plain)`, ... of one content block.
pub(super) fn block_kind(block: &Value) -> String {
    let kind = block
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mime = block
        .get("mimeType")
        .or_else(|| block.pointer("/resource/mimeType"))
        .and_then(Value::as_str);
    match mime {
        Some(m) => format!("{kind} {m}"),
        None => kind.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::content_label;
    use serde_json::json;

    #[test]
    fn a_result_source_is_labelled_with_its_content_types() {
        let result = json!({
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "file:///a", "mimeType": "text/plain", "text": "a"}}
            ],
            "structuredContent": {"a": 1}
        });
        assert_eq!(
            content_label(&result).as_deref(),
            Some("text, image image/png, resource text/plain, structuredContent")
        );
        assert_eq!(content_label(&json!({"content": []})), None);
    }
}
