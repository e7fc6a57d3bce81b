//! A [`Dispatcher`] served as an MCP server with the official Rust SDK (`rmcp`), over stdio.
//!
//! Messages are read by a [`GuardedTransport`] first: malformed JSON-RPC (invalid JSON, lone
//! surrogates, numbers out of range, nesting too deep, repeated keys) gets an error reply
//! carrying the request id whenever it can be read, and requests before `initialize` are refused
//! as the MCP lifecycle prescribes.
//!
//! `tools/list` answers the MCP export of the registered tools; `tools/call` runs the call through
//! the dispatcher's full pipeline for the principal the host supplied for the connection.
//! Tool-level failures (every non-ok status but `unknown_tool`) are results with `isError: true`
//! and the shared explanation; a successful object result is also sent as `structuredContent`.
//!
//! A call naming a tool the server does not have still runs through the dispatcher (so it is
//! audited like every other call) and is answered with the JSON-RPC error the MCP specification
//! prescribes for unknown tools: `-32602` (invalid params), message `Unknown tool: <name>`.
//!
//! The host (the MCP client, not the model) may supply the idempotency key of a call in the
//! request's `_meta` under [`IDEMPOTENCY_KEY_META`]; it takes precedence over a key in the
//! arguments, as [`ToolCall::with_idempotency_key`] does. This is how a tool declared
//! `idempotent(key = "host")` gets its key over MCP; without it such a call is refused by the
//! dispatcher's idempotency stage like any host-keyed call without a key.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    NumberOrString, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

use tokio::io::{AsyncRead, AsyncWrite};

use super::transport::GuardedTransport;
use super::{PROVIDER, TOOLS_CALL, tools};
use toolguard_pipeline::dispatcher::Dispatcher;
use toolguard_pipeline::{Principal, ProviderContext, RawArguments, Status, ToolCall, ToolOutcome};
use toolguard_providers::{
    ADAPTER_REVISION, ExportError, ExportOptions, is_valid_tool_name, model_text,
};

/// The request `_meta` field that carries a host-supplied idempotency key (a string).
pub const IDEMPOTENCY_KEY_META: &str = "toolguard/idempotencyKey";

/// Why the MCP server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum McpServeError {
    /// A registered tool could not be exported to MCP.
    #[error(transparent)]
    Export(#[from] ExportError),
    /// The exported tool list did not convert to the SDK's types.
    #[error("tool export does not match the MCP tool shape: {0}")]
    Shape(String),
    /// The MCP session failed to initialize.
    #[error("MCP initialization failed: {0}")]
    Initialize(String),
    /// The session ended abnormally.
    #[error("MCP session failed: {0}")]
    Session(String),
}

/// An MCP server over a [`Dispatcher`], for one connection and its principal.
pub struct McpServer<S: Send + Sync + 'static> {
    dispatcher: Dispatcher<S>,
    principal: Arc<Principal>,
    tools: Arc<Vec<Tool>>,
    name: String,
}

impl<S: Send + Sync + 'static> std::fmt::Debug for McpServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.name)
            .field("principal", &self.principal)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> Clone for McpServer<S> {
    fn clone(&self) -> Self {
        McpServer {
            dispatcher: self.dispatcher.clone(),
            principal: self.principal.clone(),
            tools: self.tools.clone(),
            name: self.name.clone(),
        }
    }
}

impl<S: Send + Sync + 'static> McpServer<S> {
    /// A server for `dispatcher`'s tools; every call runs as `principal` (the host's
    /// authenticated caller for this connection).
    pub fn new(dispatcher: Dispatcher<S>, principal: Principal) -> Result<Self, McpServeError> {
        let specs: Vec<_> = dispatcher.specs().cloned().collect();
        let exported = tools(&specs, &ExportOptions::default())?;
        let tools: Vec<Tool> = serde_json::from_value(exported.tools)
            .map_err(|e| McpServeError::Shape(e.to_string()))?;
        Ok(McpServer {
            dispatcher,
            principal: Arc::new(principal),
            tools: Arc::new(tools),
            name: "toolguard".to_owned(),
        })
    }

    /// Sets the server name announced at initialization.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The tools `tools/list` answers.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Serves one MCP session on standard input and output until the client disconnects,
    /// through a [`GuardedTransport`] (malformed messages and requests before `initialize` are
    /// answered with JSON-RPC errors).
    ///
    /// Standard input and output that are pipes or Unix sockets (as a host that starts the
    /// server as its child passes them) are read and written without blocking, on the runtime's
    /// event loop; anything else through Tokio's `stdin()` and `stdout()`.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        let (read, write) = super::stdio::streams();
        self.serve_io(read, write).await
    }

    /// Serves one MCP session of newline-delimited JSON-RPC read from `read` and written to
    /// `write` (a pipe, a socket), through a [`GuardedTransport`], until the input ends.
    pub async fn serve_io<R, W>(self, read: R, write: W) -> Result<(), McpServeError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let running = self
            .serve(GuardedTransport::new(read, write))
            .await
            .map_err(|e| McpServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| McpServeError::Session(e.to_string()))?;
        Ok(())
    }

    /// Runs one `tools/call` through the dispatcher.
    ///
    /// The arguments are already a map, so repeated keys can no longer be seen here: a server
    /// that takes messages from elsewhere than [`serve_io`](Self::serve_io) /
    /// [`serve_stdio`](Self::serve_stdio) must read them strictly first (see
    /// [`json::parse`](toolguard_providers::json::parse)).
    pub async fn call(
        &self,
        call_id: String,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> ToolOutcome {
        self.call_with_key(call_id, name, arguments, None).await
    }

    /// [`Self::call`] with a host-supplied idempotency key (see [`IDEMPOTENCY_KEY_META`]).
    pub async fn call_with_key(
        &self,
        call_id: String,
        name: &str,
        arguments: Option<Map<String, Value>>,
        idempotency_key: Option<String>,
    ) -> ToolOutcome {
        let arguments = Value::Object(arguments.unwrap_or_default());
        let mut call = ToolCall::new(call_id, name, RawArguments::Value(arguments));
        if let Some(key) = idempotency_key {
            call = call.with_idempotency_key(key);
        }
        let call = call.with_provider(ProviderContext {
            provider: PROVIDER.to_owned(),
            api_family: TOOLS_CALL.to_owned(),
            adapter_revision: ADAPTER_REVISION.to_owned(),
            response_id: None,
        });
        self.dispatcher.dispatch(call, &self.principal).await
    }
}

/// The MCP result of an outcome: the shared explanation as text, `isError` for every non-ok
/// status, and an object result as `structuredContent`.
pub fn call_tool_result(outcome: &ToolOutcome) -> CallToolResult {
    let mut result = json!({
        "content": [{"type": "text", "text": model_text(outcome)}],
        "isError": outcome.status != Status::Ok,
    });
    if outcome.status == Status::Ok
        && let Some(data) = outcome.data().filter(|d| d.is_object())
    {
        result["structuredContent"] = data.clone();
    }
    serde_json::from_value(result).unwrap_or_else(|_| CallToolResult::error(Vec::new()))
}

/// The JSON-RPC error MCP prescribes for a `tools/call` naming an unknown tool: `-32602`
/// (invalid params). The name is repeated only when it is a valid tool name.
pub fn unknown_tool_error(name: &str) -> ErrorData {
    let message = if is_valid_tool_name(name) {
        format!("Unknown tool: {name}")
    } else {
        "Unknown tool".to_owned()
    };
    ErrorData::invalid_params(message, None)
}

/// The host's idempotency key from the request `_meta` (rmcp moves it into the context; the
/// params are read too, for a request built without rmcp's service loop).
fn host_idempotency_key(
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

fn call_id(id: &NumberOrString) -> String {
    match id {
        NumberOrString::Number(n) => format!("mcp-{n}"),
        NumberOrString::String(s) => format!("mcp-{s}"),
    }
}

impl<S: Send + Sync + 'static> ServerHandler for McpServer<S> {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new(self.name.clone(), env!("CARGO_PKG_VERSION"));
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let key = host_idempotency_key(&request, &context);
        let outcome = self
            .call_with_key(call_id(&context.id), &request.name, request.arguments, key)
            .await;
        if outcome.status == Status::UnknownTool {
            return Err(unknown_tool_error(&request.name));
        }
        Ok(call_tool_result(&outcome).into())
    }
}
