//! The MCP server side of the proxy: answers from the policy in force at each request.
//!
//! `tools/call` runs the guard pipeline ([`Guard::current`]'s dispatcher) before it is
//! forwarded; an `ok` result goes back exactly as the upstream sent it (content blocks,
//! `structuredContent`, annotations, `_meta`), with the outcome under
//! `_meta["toolguard/outcome"]`; a refusal is the pipeline's explanation with `isError`.
//! Resources and prompts are listed and read as far as `[resources]` / `[prompts]` expose them
//! (from an untrusted upstream, what is read becomes a provenance source of the session);
//! completion, logging levels, subscriptions and ping pass through. The protocol version is the
//! latest stable one both sides support.

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, NumberOrString, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, Request, RequestOptionalParam,
    ServerCapabilities, ServerConfig, ServerResult, SetLevelRequestParams, SubscribeRequestParams,
    UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::relay::{CALLER, Caller};
use super::sessions::{SESSION_META, check_session_id};
use super::upstream::{STABLE, block_kind, server_result};
use super::user_input::{USER_INPUT_META, check_user_input};
use super::{Current, Guard, ProxyError};
use crate::server::{
    GuardedTransport, IDEMPOTENCY_KEY_META, PROVIDER, TOOLS_CALL, call_tool_result,
    unknown_tool_error,
};
use toolguard_pipeline::{Principal, ProviderContext, RawArguments, Status, ToolCall, ToolOutcome};
use toolguard_policy::ExposeSection;
use toolguard_providers::ADAPTER_REVISION;

/// The `_meta` key of a forwarded tool result that carries the pipeline's outcome
/// (`{"status": "ok", "call_id": ..., "replayed": ...}`).
pub const OUTCOME_META: &str = "toolguard/outcome";

/// Ids of connected clients (one per stdio session or Streamable HTTP session).
static NEXT_CLIENT: AtomicU64 = AtomicU64::new(1);

/// The proxy as an MCP server: every request is answered from the policy in force (a reload
/// takes effect at the next request).
#[derive(Clone)]
pub struct GuardedServer {
    guard: Arc<Guard>,
    client: u64,
}

impl std::fmt::Debug for GuardedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedServer")
            .field("guard", &self.guard)
            .finish()
    }
}

impl GuardedServer {
    /// A server over `guard` for one client session.
    pub fn new(guard: Arc<Guard>) -> Self {
        GuardedServer {
            guard,
            client: NEXT_CLIENT.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Serves one MCP session on standard input and output until the client disconnects,
    /// read as [`serve_io`](Self::serve_io) reads (pipes and Unix sockets without blocking, see
    /// [`McpServer::serve_stdio`](crate::server::McpServer::serve_stdio)).
    pub async fn serve_stdio(self) -> Result<(), ProxyError> {
        let (read, write) = crate::server::stdio::streams();
        self.serve_io(read, write).await
    }

    /// Serves one MCP session of newline-delimited JSON-RPC read from `read` and written to
    /// `write` until the input ends. Every message is read strictly before the SDK sees it, as
    /// [`GuardedTransport`] reads (size, nesting and key limits, repeated keys, batches, requests
    /// before `initialize`): what fails is answered with a JSON-RPC error and never forwarded.
    pub async fn serve_io<R, W>(self, read: R, write: W) -> Result<(), ProxyError>
    where
        R: tokio::io::AsyncRead + Unpin + Send + 'static,
        W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let running = self
            .serve(GuardedTransport::new(read, write))
            .await
            .map_err(|e| crate::server::McpServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| crate::server::McpServeError::Session(e.to_string()))?;
        Ok(())
    }

    /// The caller: over Streamable HTTP the principal of the request's verified bearer token,
    /// over stdio the policy file's `[principal]` in the session the request's `_meta` names
    /// (in `context`, or `params` of a request that has some), see [`SESSION_META`].
    fn principal(
        &self,
        context: &RequestContext<RoleServer>,
        params: Option<&Map<String, Value>>,
    ) -> Result<Principal, ErrorData> {
        #[cfg(feature = "http")]
        if let Some(parts) = context.extensions.get::<http::request::Parts>() {
            return self
                .guard
                .http_principal(parts)
                .ok_or_else(|| ErrorData::invalid_request("no valid bearer token", None));
        }
        let named = context
            .meta
            .0
            .0
            .get(SESSION_META)
            .or_else(|| params?.get(SESSION_META));
        let client = named
            .map(check_session_id)
            .transpose()
            .map_err(|m| ErrorData::invalid_params(m, None))?;
        self.guard
            .local_principal(client)
            .ok_or_else(|| ErrorData::invalid_request("the policy file names no [principal]", None))
    }

    /// Forwards `request` upstream for the client of `context`.
    async fn forward(
        &self,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let upstream = self.guard.upstream();
        let caller = Caller::of(self.client, context);
        upstream
            .relay()
            .forward(upstream.peer(), &caller, request, upstream.timeout())
            .await
    }

    /// Records `content`, which an untrusted upstream handed to the caller's session, as a
    /// provenance source with its values (so that the precise flow mode traces an argument
    /// copied from it); content that cannot be recorded is not handed over (fail closed).
    async fn record_source(
        &self,
        current: &Current,
        section: &ExposeSection,
        context: &RequestContext<RoleServer>,
        label: String,
        content: &Value,
    ) -> Result<(), ErrorData> {
        if !section.untrusted() {
            return Ok(());
        }
        let principal = self.principal(context, None)?;
        current
            .dispatcher
            .add_source_json(&principal, label, content)
            .await
            .map(drop)
            .map_err(|e| {
                ErrorData::internal_error(
                    format!("the session's provenance could not be recorded: {e}"),
                    None,
                )
            })
    }
}

/// The host's idempotency key from the request `_meta`.
fn host_key(
    request: &CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Option<String> {
    let from = |meta: &Map<String, Value>| {
        meta.get(IDEMPOTENCY_KEY_META)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    from(&context.meta.0.0).or_else(|| request.meta.as_ref().and_then(|m| from(&m.0.0)))
}

/// The idempotency key of a call that carries none, when the policy says to derive it
/// (`[proxy] derive_idempotency_key`): a digest of the MCP session and the JSON-RPC request id,
/// so a transport retry of the same request (same session, same id) replays its outcome and a
/// new request id is a new action. The key is scoped by tenant, subject and tool like any other.
fn derived_key(principal: &Principal, id: &NumberOrString) -> String {
    let id = match id {
        NumberOrString::Number(n) => format!("n:{n}"),
        NumberOrString::String(s) => format!("s:{s}"),
    };
    let material = format!(
        "toolguard/mcp-derived-key/v1\0{}\0{id}",
        principal.session_id
    );
    let digest = toolguard_pipeline::digest::sha256_hex(material.as_bytes());
    format!("mcp-{}", &digest[..40])
}

/// The answer to a `tools/call`: an `ok` result exactly as the upstream sent it, a refusal as
/// the pipeline's explanation; the outcome under [`OUTCOME_META`] either way.
fn tool_answer(outcome: &ToolOutcome) -> CallToolResult {
    // Read from the stored value in place (no copy of the whole result first).
    let upstream = (outcome.status == Status::Ok)
        .then(|| outcome.data())
        .flatten()
        .and_then(|d| CallToolResult::deserialize(d).ok());
    let mut result = upstream.unwrap_or_else(|| call_tool_result(outcome));
    let summary = json!({
        "status": outcome.status.as_str(),
        "call_id": outcome.call_id,
        "replayed": outcome.replayed,
    });
    let mut meta = result.meta.take().unwrap_or_default();
    meta.0.insert(OUTCOME_META.to_owned(), summary);
    result.meta = Some(meta);
    result
}

/// `resource <uri> (text text/plain, blob image/png)`: what a read handed over.
fn resource_label(uri: &str, result: &Value) -> String {
    let kinds: Vec<String> = result
        .get("contents")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let kind = if c.get("blob").is_some() {
                "blob"
            } else {
                "text"
            };
            match c.get("mimeType").and_then(Value::as_str) {
                Some(m) => format!("{kind} {m}"),
                None => kind.to_owned(),
            }
        })
        .collect();
    format!("resource {uri} ({})", kinds.join(", "))
}

/// `prompt <name> (text, image image/png)`: the content types of a prompt's messages.
fn prompt_label(name: &str, result: &Value) -> String {
    let mut kinds: Vec<String> = result
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content"))
        .map(block_kind)
        .collect();
    kinds.dedup();
    format!("prompt {name} ({})", kinds.join(", "))
}

/// A request whose parameters may be absent.
fn optional<M: Default>(
    params: Option<PaginatedRequestParams>,
) -> RequestOptionalParam<M, PaginatedRequestParams> {
    match params {
        Some(params) => RequestOptionalParam::with_param(params),
        None => RequestOptionalParam::default(),
    }
}

fn not_exposed(what: &str, name: &str, section: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("{what} `{name}` is not exposed by the gateway's policy (`[{section}] expose`)"),
        None,
    )
}

impl ServerHandler for GuardedServer {
    fn get_info(&self) -> ServerConfig {
        let current = self.guard.current();
        let policy = &current.policy;
        let upstream = self.guard.upstream().capabilities();
        let mut caps = json!({"tools": {"listChanged": true}});
        if let Some(r) = upstream
            .resources
            .filter(|_| policy.resources.exposes_any())
        {
            caps["resources"] = serde_json::to_value(r).unwrap_or_default();
        }
        if let Some(p) = upstream.prompts.filter(|_| policy.prompts.exposes_any()) {
            caps["prompts"] = serde_json::to_value(p).unwrap_or_default();
        }
        if let Some(c) = upstream.completions {
            caps["completions"] = Value::Object(c);
        }
        if let Some(l) = upstream.logging {
            caps["logging"] = Value::Object(l);
        }
        let capabilities: ServerCapabilities = serde_json::from_value(caps).unwrap_or_default();
        let mut config = ServerConfig::new(capabilities);
        config.protocol_version = STABLE;
        config.instructions = self
            .guard
            .upstream()
            .server_info()
            .and_then(|i| i.instructions);
        let name = policy.proxy.name.clone();
        config.server_info = Implementation::new(
            name.unwrap_or_else(|| "toolguard".to_owned()),
            env!("CARGO_PKG_VERSION"),
        );
        config
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&STABLE))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.guard.add_client(context.peer);
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        let _ = self
            .guard
            .upstream()
            .peer()
            .notify_roots_list_changed()
            .await;
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let current = self.guard.current();
        Ok(ListToolsResult::with_all_items(current.tools.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let call_id = match &context.id {
            NumberOrString::Number(n) => format!("mcp-{n}"),
            NumberOrString::String(s) => format!("mcp-{s}"),
        };
        let current = self.guard.current();
        let params = request.meta.as_ref().map(|m| &m.0.0);
        let principal = self.principal(&context, params)?;
        let turn = context
            .meta
            .0
            .0
            .get(USER_INPUT_META)
            .or_else(|| params?.get(USER_INPUT_META));
        if let Some(turn) = turn {
            let text = check_user_input(turn).map_err(|m| ErrorData::invalid_params(m, None))?;
            self.guard
                .user_turn(&current, &principal, text)
                .await
                .map_err(|e| {
                    ErrorData::internal_error(
                        format!("the user's input could not be recorded: {e}"),
                        None,
                    )
                })?;
        }
        let key = host_key(&request, &context).or_else(|| {
            let derive = current.policy.proxy.derive_idempotency_key;
            derive.then(|| derived_key(&principal, &context.id))
        });
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let mut call = ToolCall::new(
            call_id,
            request.name.as_ref(),
            RawArguments::Value(arguments),
        );
        if let Some(key) = key {
            call = call.with_idempotency_key(key);
        }
        let call = call.with_provider(ProviderContext {
            provider: PROVIDER.to_owned(),
            api_family: TOOLS_CALL.to_owned(),
            adapter_revision: ADAPTER_REVISION.to_owned(),
            response_id: None,
        });
        let caller = Caller::of(self.client, &context);
        let outcome = CALLER
            .scope(caller, current.dispatcher.dispatch(call, &principal))
            .await;
        if outcome.status == Status::UnknownTool {
            return Err(unknown_tool_error(&request.name));
        }
        Ok(tool_answer(&outcome).into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let current = self.guard.current();
        let answer = self
            .forward(
                ClientRequest::ListResourcesRequest(optional(request)),
                &context,
            )
            .await?;
        let mut list: ListResourcesResult = match answer {
            ServerResult::ListResourcesResult(r) => r,
            other => server_result(other)?,
        };
        list.resources
            .retain(|r| current.policy.resources.exposes(&r.uri));
        Ok(list)
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let current = self.guard.current();
        let request = ClientRequest::ListResourceTemplatesRequest(optional(request));
        let mut list: ListResourceTemplatesResult = match self.forward(request, &context).await? {
            ServerResult::ListResourceTemplatesResult(r) => r,
            other => server_result(other)?,
        };
        list.resource_templates
            .retain(|t| current.policy.resources.exposes(&t.uri_template));
        Ok(list)
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let current = self.guard.current();
        let uri = request.uri.clone();
        if !current.policy.resources.exposes(&uri) {
            return Err(not_exposed("resource", &uri, "resources"));
        }
        let answer = self
            .forward(
                ClientRequest::ReadResourceRequest(Request::new(request)),
                &context,
            )
            .await?;
        let value = serde_json::to_value(&answer).unwrap_or_default();
        self.record_source(
            &current,
            &current.policy.resources,
            &context,
            resource_label(&uri, &value),
            &value,
        )
        .await?;
        match answer {
            ServerResult::ReadResourceResult(r) => Ok(ReadResourceResponse::Complete(r)),
            other => server_result(other).map(ReadResourceResponse::Complete),
        }
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        if !self.guard.current().policy.resources.exposes(&request.uri) {
            return Err(not_exposed("resource", &request.uri, "resources"));
        }
        let uri = request.uri.clone();
        self.forward(
            ClientRequest::SubscribeRequest(Request::new(request)),
            &context,
        )
        .await?;
        let caller = Caller::of(self.client, &context);
        self.guard.upstream().relay().subscribe(&uri, &caller);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let caller = Caller::of(self.client, &context);
        let last = self
            .guard
            .upstream()
            .relay()
            .unsubscribe(&request.uri, &caller);
        if last {
            self.forward(
                ClientRequest::UnsubscribeRequest(Request::new(request)),
                &context,
            )
            .await?;
        }
        Ok(())
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let current = self.guard.current();
        let answer = self
            .forward(
                ClientRequest::ListPromptsRequest(optional(request)),
                &context,
            )
            .await?;
        let mut list: ListPromptsResult = match answer {
            ServerResult::ListPromptsResult(r) => r,
            other => server_result(other)?,
        };
        list.prompts
            .retain(|p| current.policy.prompts.exposes(&p.name));
        Ok(list)
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let current = self.guard.current();
        let name = request.name.clone();
        if !current.policy.prompts.exposes(&name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "prompt `{name}` is not exposed by the gateway's policy (`[prompts] expose`)"
                ),
                None,
            ));
        }
        let answer = self
            .forward(
                ClientRequest::GetPromptRequest(Request::new(request)),
                &context,
            )
            .await?;
        let value = serde_json::to_value(&answer).unwrap_or_default();
        self.record_source(
            &current,
            &current.policy.prompts,
            &context,
            prompt_label(&name, &value),
            &value,
        )
        .await?;
        match answer {
            ServerResult::GetPromptResult(r) => Ok(GetPromptResponse::Complete(r)),
            other => server_result(other).map(GetPromptResponse::Complete),
        }
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let policy = &self.guard.current().policy;
        let reference = serde_json::to_value(&request.r#ref).unwrap_or_default();
        let exposed = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => reference
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| policy.prompts.exposes(n)),
            Some("ref/resource") => reference
                .get("uri")
                .and_then(Value::as_str)
                .is_some_and(|u| policy.resources.exposes(u)),
            _ => false,
        };
        if !exposed {
            return Err(ErrorData::invalid_params(
                "the completion refers to a prompt or resource the gateway's policy does not expose",
                None,
            ));
        }
        match self
            .forward(
                ClientRequest::CompleteRequest(Request::new(request)),
                &context,
            )
            .await?
        {
            ServerResult::CompleteResult(r) => Ok(r),
            other => server_result(other),
        }
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.forward(
            ClientRequest::SetLevelRequest(Request::new(request)),
            &context,
        )
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::{prompt_label, resource_label};
    use serde_json::json;

    #[test]
    fn resource_and_prompt_sources_name_their_content_types() {
        let read = json!({"contents": [
            {"uri": "test://a", "mimeType": "text/plain", "text": "a"},
            {"uri": "test://b", "mimeType": "image/png", "blob": "AA=="}
        ]});
        assert_eq!(
            resource_label("test://a", &read),
            "resource test://a (text text/plain, blob image/png)"
        );
        let prompt = json!({"messages": [
            {"role": "user", "content": {"type": "text", "text": "hi"}},
            {"role": "user", "content": {"type": "image", "data": "AA==", "mimeType": "image/png"}}
        ]});
        assert_eq!(
            prompt_label("greet", &prompt),
            "prompt greet (text, image image/png)"
        );
    }
}
