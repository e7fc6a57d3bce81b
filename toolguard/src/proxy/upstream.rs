//! The upstream MCP server: started as a child process and spoken to over its stdio with rmcp's
//! client; its tools listed, and checked calls forwarded to it.

use std::sync::Arc;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{Peer, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::ProxyError;
use crate::declare::policy::Offered;
use crate::declare::{ForwardFn, RuntimeTool};
use crate::error::ToolError;
use crate::spec::ToolSpec;

/// Longest upstream error text passed on (it is untrusted and may be large).
const MAX_ERROR_TEXT: usize = 2000;

/// A connected upstream MCP server.
pub struct Upstream {
    service: RunningService<RoleClient, ()>,
}

impl Upstream {
    /// Starts `command` (program and arguments) and initializes an MCP session over its stdio.
    pub async fn spawn(command: &[String]) -> Result<Self, ProxyError> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| ProxyError::Upstream("no upstream command given".to_owned()))?;
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args).kill_on_drop(true);
        let transport = TokioChildProcess::new(cmd)
            .map_err(|e| ProxyError::Upstream(format!("cannot start `{program}`: {e}")))?;
        let service = ().serve(transport).await.map_err(|e| {
            ProxyError::Upstream(format!(
                "`{program}` did not initialize an MCP session: {e}"
            ))
        })?;
        Ok(Upstream { service })
    }

    /// The tools the upstream offers.
    pub async fn offered(&self) -> Result<Vec<Offered>, ProxyError> {
        let tools = self
            .service
            .list_all_tools()
            .await
            .map_err(|e| ProxyError::Upstream(format!("tools/list failed: {e}")))?;
        Ok(tools
            .into_iter()
            .map(|t| Offered {
                name: t.name.to_string(),
                description: t.description.map(|d| d.to_string()).unwrap_or_default(),
                input_schema: Value::Object(t.input_schema.as_ref().clone()),
            })
            .collect())
    }

    /// A run-time tool for `spec` that forwards to this upstream.
    pub fn tool(&self, spec: ToolSpec) -> RuntimeTool {
        RuntimeTool::new(spec, forwarder(self.service.peer().clone()))
    }

    /// Closes the session and stops the child.
    pub async fn close(self) {
        let _ = self.service.cancel().await;
    }
}

/// The handler of every forwarded tool: `tools/call` on the upstream; an `isError` result is a
/// failed call, anything else the (untrusted) result.
fn forwarder(peer: Peer<RoleClient>) -> ForwardFn {
    Arc::new(move |name, args| {
        let peer = peer.clone();
        Box::pin(async move {
            let Value::Object(arguments) = args else {
                return Err(ToolError::Failed("arguments are not an object".to_owned()));
            };
            let params = CallToolRequestParams::new(name).with_arguments(arguments);
            let result = peer
                .call_tool(params)
                .await
                .map_err(|e| ToolError::Failed(format!("the upstream call failed: {e}")))?;
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
        return Err(ToolError::Failed(format!(
            "the upstream tool failed: {cut}"
        )));
    }
    if let Some(structured) = result.structured_content.filter(Value::is_object) {
        return Ok(structured);
    }
    Ok(json!({ "content": result.content }))
}
