//! # toolguard
//!
//! Declare tools that LLM agents may call, and run every call through one mandatory guard
//! pipeline: parse → registry → schema validation → sanitization → preflight → principal →
//! authorization → risk policy → idempotency → approval → recheck → execution under a deadline →
//! result envelope, with an audit entry on every path.
//!
//! The model's tool name and arguments are an untrusted proposal; identity and authority come from
//! the host's authenticated [`Principal`], never from arguments.

#![warn(missing_docs)]

pub mod audit;
pub mod call;
pub mod clock;
pub mod digest;
pub mod dispatcher;
mod erased;
pub mod error;
pub mod metrics;
pub mod outcome;
pub mod provider;
pub mod sanitize;
pub mod spec;
pub mod stage;
pub mod tool;

pub use audit::{AuditEntry, AuditSink, MemoryAuditSink};
pub use call::{Principal, ProviderContext, RawArguments, ToolCall};
pub use clock::{Clock, ManualClock, SystemClock};
pub use dispatcher::{BuildError, Dispatcher, DispatcherBuilder};
pub use error::{NotFoundClass, ToolError};
pub use outcome::{ApprovalTicket, ArgumentError, Status, ToolOutcome, UntrustedOutput};
pub use spec::{FieldKind, FieldSpec, KeyReuse, Risk, ToolSpec};
pub use stage::authorize::{AllowAuthenticated, Authorizer, RoleAuthorizer};
pub use tool::{BoxFuture, Owned, Tool, ToolContext, ToolHandle};
pub use toolguard_macros::tool;

/// Items the generated code uses. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use schemars;
    pub use serde;
    pub use serde_json;

    /// The JSON Schema (draft 2020-12) of `T`, as a JSON value.
    pub fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
        serde_json::to_value(schema).unwrap_or(serde_json::Value::Bool(false))
    }
}
