//! A [`Dispatcher`] served as an MCP server with the official Rust SDK (`rmcp`), over stdio.
//!
//! `tools/list` answers the MCP export of the registered tools; `tools/call` runs the call through
//! the dispatcher's full pipeline for the principal the host supplied for the connection.
//! Tool-level failures (every non-ok status) are results with `isError: true` and the shared
//! explanation; a successful object result is also sent as `structuredContent`.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    NumberOrString, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value, json};

use super::{PROVIDER, TOOLS_CALL, tools};
use crate::dispatcher::Dispatcher;
use crate::provider::{ADAPTER_REVISION, ExportError, ExportOptions, model_text};
use crate::{Principal, ProviderContext, RawArguments, Status, ToolCall, ToolOutcome};

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
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The tools `tools/list` answers.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// Serves one MCP session on standard input and output until the client disconnects.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| McpServeError::Session(e.to_string()))?;
        Ok(())
    }

    /// Runs one `tools/call` through the dispatcher.
    pub async fn call(
        &self,
        call_id: String,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> ToolOutcome {
        let arguments = Value::Object(arguments.unwrap_or_default());
        let call = ToolCall::new(call_id, name, RawArguments::Value(arguments)).with_provider(
            ProviderContext {
                provider: PROVIDER.to_owned(),
                api_family: TOOLS_CALL.to_owned(),
                adapter_revision: ADAPTER_REVISION.to_owned(),
                response_id: None,
            },
        );
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
        let outcome = self
            .call(call_id(&context.id), &request.name, request.arguments)
            .await;
        Ok(call_tool_result(&outcome).into())
    }
}
