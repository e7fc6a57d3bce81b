//! The dispatcher: a registry of tools and the one mandatory pipeline every call goes through.
//!
//! [`Dispatcher::dispatch`] runs a call through the stage list below, written once, in
//! `stage::list` (with the points where approval decisions and status queries enter it); each
//! stage is a private module of this crate (`src/stage/`):
//!
//! gate → parse → registry → validate → sanitize → intent (key, digest) → principal (fresh) →
//! permit (the [`Authorizer`](crate::Authorizer)) → preflight → authorize (the resource) →
//! provenance (the sources in context) → policy (limits, flow) → idempotency → approval? →
//! recheck → execute → envelope → provenance (an untrusted result becomes a source) → settle →
//! audit.
//!
//! Principal freshness and tool permission come before any of the tool's own code (preflight,
//! authorize hooks) runs. A business or policy failure of a call that already executed answers
//! with the stored outcome of that call (same key, same request digest), so retries are safe.
//! Custom stages ([`crate::custom`]) run at their named points and can stop a call, never
//! skip a built-in stage. Approval decisions ([`crate::approvals`]) and operation-status queries
//! ([`crate::operations`]) are entry points over the same stage implementations.
//!
//! ```
//! use toolguard_pipeline::{Dispatcher, Principal, ToolCall};
//!
//! # tokio_test_block_on(async {
//! let dispatcher = Dispatcher::builder(()).build().unwrap();
//! let principal = Principal::new("acme", "alice", "session-1");
//! let outcome = dispatcher
//!     .dispatch(ToolCall::new("call-1", "no_such_tool", "{}"), &principal)
//!     .await;
//! assert_eq!(outcome.status, toolguard_pipeline::Status::UnknownTool);
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
//! # }
//! ```

mod builder;
mod detections;
#[cfg(feature = "tower")]
mod service;
mod sources;

use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;

pub use crate::stage::finish::MAX_LABEL_CHARS;
pub use crate::stage::intent::redact;
pub use builder::{BuildError, DEFAULT_PRINCIPAL_MAX_AGE, DispatcherBuilder, SchemaError};
pub use detections::Detections;
#[cfg(feature = "tower")]
pub use service::DispatchRequest;

use crate::audit::AuditEvent;
use crate::call::{Principal, ToolCall};
use crate::outcome::ToolOutcome;
use crate::spec::ToolSpec;
use crate::stage;
use crate::stage::core::Core;
use crate::stage::finish::{Subject, capped};
use crate::stage::trace::{Answer, Exit, Trace};

/// Runs tool calls through the guard pipeline. Cheap to clone.
pub struct Dispatcher<S: Send + Sync + 'static> {
    pub(crate) core: Arc<Core<S>>,
}

impl<S: Send + Sync + 'static> std::fmt::Debug for Dispatcher<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut tools: Vec<&str> = self.core.tools.keys().map(|k| &**k).collect();
        tools.sort_unstable();
        f.debug_struct("Dispatcher")
            .field("tools", &tools)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> Clone for Dispatcher<S> {
    fn clone(&self) -> Self {
        Dispatcher {
            core: self.core.clone(),
        }
    }
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// Runs `call` for `principal` through the whole pipeline. Never panics; every path ends in
    /// exactly one terminal audit entry.
    ///
    /// A panic anywhere in the pipeline (a hook, the authorizer, the sanitizer, a store) is
    /// contained: the call ends `failed` with reason `panicked` (`outcome_unknown` once a
    /// state-changing handler may have begun) and its one terminal audit entry.
    ///
    /// Nothing runs until the returned future is first polled (the call's duration is measured
    /// from then); the future is `Send`, so it can be spawned.
    pub fn dispatch<'a>(
        &'a self,
        call: ToolCall,
        principal: &'a Principal,
    ) -> impl Future<Output = ToolOutcome> + Send + 'a {
        let span = tracing::info_span!(
            "execute_tool",
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = %capped(&call.tool),
            "gen_ai.tool.call.id" = %capped(&call.call_id),
            "toolguard.status" = tracing::field::Empty,
        );
        // The pipeline's future is large (every stage's state): boxed once, so that wrapping it
        // (memo, span) and awaiting it moves a pointer rather than copying it each time. The
        // wrapped future is returned as it is (this is not an `async fn`): every layer of
        // futures copies the outcome once more on its way out.
        let pipeline = Box::pin(async move {
            let started = Instant::now();
            let mut t = Trace::default();
            let result =
                stage::execute::contained(stage::list::call(&self.core, &call, principal, &mut t))
                    .await
                    .unwrap_or_else(|_| Err(Exit::Stop(stage::panicked(&self.core, &t))));
            let oversized = t.oversized;
            // The call's own strings move into the outcome.
            let about = Subject {
                event: AuditEvent::Call,
                call_id: call.call_id.into(),
                tool: call.tool.into(),
                principal,
                started,
            };
            let outcome =
                stage::finish::finish(&self.core, about, t, Answer::from_exit(result)).await;
            if oversized {
                crate::deferred_drop::release(call.arguments);
            }
            outcome
        });
        crate::canonical::with_nfc_memo(pipeline).instrument(span)
    }

    /// The declarations of the registered tools, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.core.order.iter().filter_map(|n| self.core.spec(n))
    }

    /// The declaration of tool `name`.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.core.spec(name)
    }

    /// The shared application state.
    pub fn state(&self) -> &Arc<S> {
        &self.core.state
    }
}
