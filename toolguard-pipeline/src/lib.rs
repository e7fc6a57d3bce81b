//! # toolguard-pipeline
//!
//! The core of the toolguard crate family; users depend on the facade crate `toolguard-rs`
//! (`use toolguard_pipeline::...`), which re-exports this crate.
//!
//! Declare tools that LLM agents may call, and run every call through one mandatory guard
//! pipeline: parse → registry → schema validation → sanitization → principal → tool permission →
//! preflight → resource authorization → risk policy → idempotency → approval → recheck →
//! execution under a deadline → result envelope → settle, with an audit entry on every path.
//!
//! The model's tool name and arguments are an untrusted proposal; identity and authority come from
//! the host's authenticated [`Principal`], never from arguments.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod access;
pub mod approvals;
pub mod audit;
pub mod call;
mod canonical;
pub mod clock;
pub mod custom;
pub mod declare;
mod deferred_drop;
pub mod detect;
pub mod digest;
pub mod dispatcher;
mod erased;
pub mod error;
pub mod keys;
mod mapped;
pub use toolguard_sanitize::kinds;
pub mod metrics;
pub mod notify;
pub mod operations;
pub mod outcome;
pub mod output;
pub mod provenance;
pub mod risk;
/// The sanitizer ([`toolguard_sanitize`]), re-exported for the paths the pipeline names.
#[doc(no_inline)]
pub use toolguard_sanitize as sanitize;
pub mod seal;
pub mod spec;
mod stage;
pub mod store;
mod timeout;
pub mod tool;

pub use access::{
    AllowAuthenticated, AuthorizeError, Authorizer, PrincipalRefresher, RefreshError,
    RoleAuthorizer,
};
pub use approvals::Approvals;
/// The shared string of [`Principal`] and [`audit::AuditRecord`] identities: cloning it copies a
/// pointer, it compares equal to `&str` and `String`, and it derefs to `str`.
pub use arcstr::ArcStr;
pub use audit::{AuditEntry, AuditSink, MemoryAuditSink};
pub use call::{Principal, ProviderContext, RawArguments, ToolCall};
pub use clock::{Clock, ManualClock, SystemClock};
pub use custom::{CustomStage, Refusal, StageInput, StagePoint};
pub use dispatcher::{BuildError, Dispatcher, DispatcherBuilder, SchemaError};
pub use erased::ToolHandle;
pub use error::{NotFoundClass, ToolError};
pub use keys::{HostKeys, check_idempotency_key};
pub use kinds::{Cents, Currency, Email, Identifier, Money, SafePath, Url};
pub use operations::{OperationError, OperationReport};
pub use outcome::{ApprovalTicket, ArgumentError, Reason, Status, ToolOutcome, UntrustedOutput};
pub use output::NoFreeText;
pub use provenance::{FlowAction, FlowPolicy, Source};
pub use risk::{OnExceed, RiskPolicy};
pub use spec::{Egress, FieldKind, FieldSpec, KeyReuse, Risk, Role, ToolSpec};
pub use store::{MemoryStore, OperationState};
pub use tool::{BoxFuture, Owned, Reconciled, Tool, ToolContext};
pub use toolguard_sanitize::Limits;

/// The JSON Schema crate tool argument and result types derive [`JsonSchema`] with; a crate using
/// toolguard needs no `schemars` dependency of its own (`#[derive(toolguard_pipeline::JsonSchema)]` with
/// `#[schemars(crate = "toolguard_pipeline::schemars")]`).
#[doc(no_inline)]
#[doc(no_inline)]
pub use schemars;
pub use schemars::JsonSchema;

/// Items the generated code uses. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use arcstr;
    pub use schemars;
    pub use serde;
    pub use serde_json;

    /// The JSON Schema (draft 2020-12) of `T`, as a JSON value.
    pub fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
        let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
        serde_json::to_value(schema).unwrap_or(serde_json::Value::Bool(false))
    }

    /// A tool's result as JSON (the erased pipeline's form of every result).
    pub fn output_json<T: serde::Serialize>(out: T) -> Result<serde_json::Value, crate::ToolError> {
        serde_json::to_value(out).map_err(|e| {
            crate::ToolError::failed(format!("unserializable result: {e}")).with_source(e)
        })
    }

    /// What a tool's result type must be; named in the error when it is not.
    #[diagnostic::on_unimplemented(
        message = "the tool result type `{Self}` must implement `Serialize` and `JsonSchema` \
                   (and be `Send + 'static`)",
        label = "this is the tool's output type",
        note = "derive both: `#[derive(serde::Serialize, schemars::JsonSchema)]`; the JSON Schema \
                of `{Self}` is the tool's output schema"
    )]
    pub trait ToolOutput: serde::Serialize + schemars::JsonSchema + Send + 'static {}

    impl<T: serde::Serialize + schemars::JsonSchema + Send + 'static> ToolOutput for T {}

    /// Converts a handler's error; named in the error when `E` has no conversion.
    #[diagnostic::on_unimplemented(
        message = "the tool's error type `{Self}` does not convert into `ToolError`",
        label = "this error type has no conversion into `toolguard::ToolError`",
        note = "implement `From<{Self}> for toolguard::ToolError` (choosing the status each error \
                maps to), or return `Result<T, ToolError>` and convert in the handler with \
                `.map_err(...)`"
    )]
    pub trait IntoToolError {
        /// The error as a [`ToolError`](crate::ToolError).
        fn into_tool_error(self) -> crate::ToolError;
    }

    #[diagnostic::do_not_recommend]
    impl<E: Into<crate::ToolError>> IntoToolError for E {
        fn into_tool_error(self) -> crate::ToolError {
            self.into()
        }
    }

    /// What the amount field (`#[arg(amount)]` or named `amount`) may be: an unsigned integer
    /// of minor units, [`Cents`](crate::Cents), [`Money`](crate::Money), or an `Option` of those.
    #[diagnostic::on_unimplemented(
        message = "the amount field has type `{Self}`, which is not an unsigned integer amount",
        label = "approvals and session limits compare this amount with integer thresholds",
        note = "use `u64` (or `u8`..`u32`) minor units, `toolguard::Cents` or `toolguard::Money`, \
                optionally in an `Option`; signed numbers, floats and strings are refused, also \
                behind a type alias"
    )]
    pub trait AmountType {}

    impl AmountType for u8 {}
    impl AmountType for u16 {}
    impl AmountType for u32 {}
    impl AmountType for u64 {}
    impl AmountType for crate::Cents {}
    impl AmountType for crate::Money {}
    impl<T: AmountType> AmountType for Option<T> {}

    /// What a `preflight` or `authorize` hook must be; named, with the expected signature, at the
    /// hook's path when it is not.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be this tool's `preflight` or `authorize` hook",
        label = "expected `async fn(&ToolContext<{S}>, &{A}) -> Result<(), ToolError>`",
        note = "a guard hook is `async fn hook(ctx: &ToolContext<{S}>, args: &{A}) -> \
                Result<(), ToolError>`: `async`, the context and the tool's arguments by \
                reference, and `Ok(())` to let the call go on or a `ToolError` to stop it"
    )]
    pub trait GuardHook<'a, S, A> {
        /// Runs the hook.
        fn call_hook(
            self,
            ctx: &'a crate::ToolContext<S>,
            args: &'a A,
        ) -> crate::BoxFuture<'a, Result<(), crate::ToolError>>;
    }

    #[diagnostic::do_not_recommend]
    impl<'a, S: 'a, A: 'a, F, Fut> GuardHook<'a, S, A> for F
    where
        F: FnOnce(&'a crate::ToolContext<S>, &'a A) -> Fut,
        Fut: core::future::Future<Output = Result<(), crate::ToolError>> + Send + 'a,
    {
        fn call_hook(
            self,
            ctx: &'a crate::ToolContext<S>,
            args: &'a A,
        ) -> crate::BoxFuture<'a, Result<(), crate::ToolError>> {
            Box::pin(self(ctx, args))
        }
    }

    /// What a `reconcile` hook must be; named, with the expected signature, at the hook's path
    /// when it is not.
    #[diagnostic::on_unimplemented(
        message = "`{Self}` cannot be this tool's `reconcile` hook",
        label = "expected `async fn(&ToolContext<{S}>, &{A}) -> Result<Reconciled<{O}>, ToolError>`",
        note = "a reconcile hook is `async fn hook(ctx: &ToolContext<{S}>, args: &{A}) -> \
                Result<Reconciled<{O}>, ToolError>`, where `{O}` is the tool's output type: \
                `async`, the context and the tool's arguments by reference"
    )]
    pub trait ReconcileHook<'a, S, A, O> {
        /// Runs the hook.
        fn call_hook(
            self,
            ctx: &'a crate::ToolContext<S>,
            args: &'a A,
        ) -> crate::BoxFuture<'a, Result<crate::Reconciled<O>, crate::ToolError>>;
    }

    #[diagnostic::do_not_recommend]
    impl<'a, S: 'a, A: 'a, O, F, Fut> ReconcileHook<'a, S, A, O> for F
    where
        F: FnOnce(&'a crate::ToolContext<S>, &'a A) -> Fut,
        Fut: core::future::Future<Output = Result<crate::Reconciled<O>, crate::ToolError>>
            + Send
            + 'a,
    {
        fn call_hook(
            self,
            ctx: &'a crate::ToolContext<S>,
            args: &'a A,
        ) -> crate::BoxFuture<'a, Result<crate::Reconciled<O>, crate::ToolError>> {
            Box::pin(self(ctx, args))
        }
    }
}
