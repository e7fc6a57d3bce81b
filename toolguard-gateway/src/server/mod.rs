//! Serving a [`Dispatcher`](toolguard_pipeline::Dispatcher) over the Model Context Protocol:
//! [`McpServer`] answers `tools/list` with the registered tools in the MCP dialect
//! ([`toolguard_providers::mcp`]) and runs every `tools/call` through the dispatcher, with the
//! principal supplied by the host; [`GuardedTransport`] refuses malformed messages before they
//! are parsed.

mod service;
pub(crate) mod stdio;
pub(crate) mod transport;

pub use service::{
    IDEMPOTENCY_KEY_META, McpServeError, McpServer, call_tool_result, unknown_tool_error,
};
pub use toolguard_providers::mcp::{PROVIDER, TOOLS_CALL, title_of, tools};
pub use transport::{GuardedTransport, INVALID_REQUEST, MAX_MESSAGE_BYTES, PARSE_ERROR};
