//! The MCP server side of the proxy: answers from the policy in force at each request.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult, NumberOrString,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Map, Value};

use super::{Guard, ProxyError};
use crate::Status;
use crate::provider::mcp::{IDEMPOTENCY_KEY_META, call_tool_result, unknown_tool_error};

/// The proxy as an MCP server: `tools/list` and `tools/call` go to the dispatcher of the policy
/// in force (a reload takes effect at the next request).
#[derive(Clone)]
pub struct GuardedServer {
    guard: Arc<Guard>,
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
            .map_err(|e| crate::provider::mcp::McpServeError::Initialize(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| crate::provider::mcp::McpServeError::Session(e.to_string()))?;
        Ok(())
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

impl ServerHandler for GuardedServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        let name = self.guard.current().policy.proxy.name.clone();
        config.server_info = Implementation::new(
            name.unwrap_or_else(|| "toolguard".to_owned()),
            env!("CARGO_PKG_VERSION"),
        );
        config
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
        let key = host_key(&request, &context);
        let call_id = match &context.id {
            NumberOrString::Number(n) => format!("mcp-{n}"),
            NumberOrString::String(s) => format!("mcp-{s}"),
        };
        let current = self.guard.current();
        let outcome = current
            .server
            .call_with_key(call_id, &request.name, request.arguments, key)
            .await;
        if outcome.status == Status::UnknownTool {
            return Err(unknown_tool_error(&request.name));
        }
        Ok(call_tool_result(&outcome).into())
    }
}
