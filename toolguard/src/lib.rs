//! # toolguard
//!
//! Declare tools that LLM agents may call, and run every call through one mandatory guard
//! pipeline: parse → registry → schema validation → sanitization → principal → tool permission →
//! preflight → resource authorization → risk policy → idempotency → approval → recheck →
//! execution under a deadline → result envelope → settle, with an audit entry on every path.
//!
//! The model's tool name and arguments are an untrusted proposal; identity and authority come from
//! the host's authenticated [`Principal`], never from arguments.
//!
//! This is the crate users depend on. It re-exports the core ([`toolguard_pipeline`]) and the
//! `#[tool]` / `#[toolset]` macros; its features turn on the rest of the family:
//!
//! | feature | module | crate |
//! | --- | --- | --- |
//! | `providers` (default) | [`providers`] | `toolguard-providers` |
//! | `sqlite` | `sqlite` | `toolguard-sqlite` |
//! | `postgres` | `postgres` | `toolguard-postgres` |
//! | `redis` | `redis` | `toolguard-redis` |
//! | `policy` | `policy` | `toolguard-policy` |
//! | `mcp` | `mcp` | `toolguard-gateway` (server) |
//! | `mcp-proxy` | `gateway` | `toolguard-gateway` (proxy) |
//! | `console`, `webhook` | `console` | `toolguard-console` |

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod guide;

// The items a user composes, documented here.
#[doc(inline)]
pub use toolguard_pipeline::{
    AllowAuthenticated, ApprovalTicket, Approvals, ArcStr, ArgumentError, AuditEntry, AuditSink,
    AuthorizeError, Authorizer, BoxFuture, BuildError, Cents, Clock, Currency, CustomStage,
    Dispatcher, DispatcherBuilder, Egress, Email, FieldKind, FieldSpec, FlowAction, FlowPolicy,
    HostKeys, Identifier, KeyReuse, Limits, ManualClock, MemoryAuditSink, MemoryStore, Money,
    NoFreeText, NotFoundClass, OnExceed, OperationError, OperationReport, OperationState, Owned,
    Principal, PrincipalRefresher, ProviderContext, RawArguments, Reason, Reconciled, RefreshError,
    Refusal, Risk, RiskPolicy, Role, RoleAuthorizer, SafePath, SchemaError, Source, StageInput,
    StagePoint, Status, SystemClock, Tool, ToolCall, ToolContext, ToolError, ToolHandle,
    ToolOutcome, ToolSpec, UntrustedOutput, Url, check_idempotency_key,
};

// The core's modules, for everything else (stores, audit, detection, provenance, …); their
// pages are the core crate's.
#[doc(no_inline)]
pub use toolguard_pipeline::{
    access, approvals, audit, call, clock, custom, declare, detect, digest, dispatcher, error,
    keys, kinds, metrics, notify, operations, outcome, output, provenance, risk, seal, spec, store,
    tool,
};

#[doc(hidden)]
pub use toolguard_pipeline::__private;

pub use toolguard_macros::{NoFreeText, tool, toolset};

/// The JSON Schema crate tool argument and result types derive [`JsonSchema`] with; a crate using
/// toolguard needs no `schemars` dependency of its own (`#[derive(toolguard::JsonSchema)]` with
/// `#[schemars(crate = "toolguard::schemars")]`).
#[doc(no_inline)]
pub use schemars;

pub use schemars::JsonSchema;
/// The sanitizer ([`toolguard_sanitize`]), usable on its own.
#[doc(no_inline)]
pub use toolguard_sanitize as sanitize;

#[cfg(feature = "providers")]
#[cfg_attr(docsrs, doc(cfg(feature = "providers")))]
#[doc(no_inline)]
pub use toolguard_providers as providers;

#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
#[doc(no_inline)]
pub use toolguard_sqlite as sqlite;

#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
#[doc(no_inline)]
pub use toolguard_postgres as postgres;

#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
#[doc(no_inline)]
pub use toolguard_redis as redis;

#[cfg(feature = "policy")]
#[cfg_attr(docsrs, doc(cfg(feature = "policy")))]
#[doc(no_inline)]
pub use toolguard_policy as policy;

#[cfg(feature = "mcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp")))]
#[doc(no_inline)]
pub use toolguard_gateway::server as mcp;

#[cfg(feature = "mcp-proxy")]
#[cfg_attr(docsrs, doc(cfg(feature = "mcp-proxy")))]
#[doc(no_inline)]
pub use toolguard_gateway::proxy as gateway;

#[cfg(any(feature = "console", feature = "webhook"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "console", feature = "webhook"))))]
#[doc(no_inline)]
pub use toolguard_console as console;
