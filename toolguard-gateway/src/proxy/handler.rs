//! The MCP server side of the proxy: answers from the policy in force at each request.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, NumberOrString,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};

use super::{Guard, ProxyError};
use crate::server::{
    IDEMPOTENCY_KEY_META, PROVIDER, TOOLS_CALL, call_tool_result, unknown_tool_error,
};
use toolguard_pipeline::{Principal, ProviderContext, RawArguments, Status, ToolCall};
use toolguard_providers::ADAPTER_REVISION;

/// The proxy as an MCP server: `tools/list` and `tools/call` go to the dispatcher of the policy
/// in force (a reload takes effect at the next request).
#[derive(Clone)]
pub struct GuardedServer {
    guard: Arc<Guard>,
}

impl std::fmt::Debug for GuardedServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedServer")
            .field("guard", &self.guard)
            .finish()
    }
}

impl GuardedServer {
    /// A server over `guard`.
    pub fn new(guard: Arc<Guard>) -> Self {
        GuardedServer { guard }
    }

    /// Serves one MCP session on standard input and output until the client disconnects.
    pub async fn serve_stdio(self) -> Result<(), ProxyError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| crate::server::McpServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| crate::server::McpServeError::Session(e.to_string()))?;
        Ok(())
    }
}

impl GuardedServer {
    /// The caller: over Streamable HTTP the principal of the request's verified bearer token,
    /// over stdio the policy file's `[principal]`.
    fn principal(&self, context: &RequestContext<RoleServer>) -> Result<Principal, ErrorData> {
        #[cfg(feature = "http")]
        if let Some(parts) = context.extensions.get::<http::request::Parts>() {
            return self
                .guard
                .http_principal(parts)
                .ok_or_else(|| ErrorData::invalid_request("no valid bearer token", None));
        }
        #[cfg(not(feature = "http"))]
        let _ = context;
        self.guard
            .current()
            .policy
            .local_principal(self.guard.session())
            .ok_or_else(|| ErrorData::invalid_request("the policy file names no [principal]", None))
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

impl ServerHandler for GuardedServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        let mut config = ServerConfig::new(capabilities);
        let name = self.guard.current().policy.proxy.name.clone();
        config.server_info = Implementation::new(
            name.unwrap_or_else(|| "toolguard".to_owned()),
            env!("CARGO_PKG_VERSION"),
        );
        config
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.guard.add_client(context.peer);
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let current = self.guard.current();
        Ok(ListToolsResult::with_all_items(
            current.server.tools().to_vec(),
        ))
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
        let principal = self.principal(&context)?;
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
        let outcome = current.dispatcher.dispatch(call, &principal).await;
        if outcome.status == Status::UnknownTool {
            return Err(unknown_tool_error(&request.name));
        }
        Ok(call_tool_result(&outcome).into())
    }
}
