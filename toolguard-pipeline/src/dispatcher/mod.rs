//! The dispatcher: a registry of tools and the one mandatory pipeline every call goes through.
//!
//! [`Dispatcher::dispatch`] runs a call through the stage sequence below, written once, in
//! `Dispatcher::sequence`; each stage is a module under [`crate::stage`]:
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
//! Custom stages ([`crate::stage::custom`]) run at their named points and can stop a call, never
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
#[cfg(feature = "tower")]
mod service;

use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument;

pub use crate::stage::finish::MAX_LABEL_CHARS;
pub use crate::stage::intent::redact;
pub use builder::{BuildError, DEFAULT_PRINCIPAL_MAX_AGE, DispatcherBuilder, SchemaError};
#[cfg(feature = "tower")]
pub use service::DispatchRequest;

use crate::audit::AuditEvent;
use crate::call::{Principal, ToolCall};
use crate::outcome::ToolOutcome;
use crate::spec::ToolSpec;
use crate::stage::core::Core;
use crate::stage::custom::{StageInput, StagePoint};
use crate::stage::finish::{Subject, capped};
use crate::stage::trace::{Answer, Exit, Trace};
use crate::stage::{self, Stage};

/// Runs tool calls through the guard pipeline. Cheap to clone.
pub struct Dispatcher<S: Send + Sync + 'static> {
    pub(crate) core: Arc<Core<S>>,
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
    pub async fn dispatch(&self, call: ToolCall, principal: &Principal) -> ToolOutcome {
        let started = Instant::now();
        let span = tracing::info_span!(
            "execute_tool",
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = %capped(&call.tool),
            "gen_ai.tool.call.id" = %capped(&call.call_id),
            "toolguard.status" = tracing::field::Empty,
        );
        // The pipeline's future is large (every stage's state): boxed once, so that wrapping it
        // (memo, span) and awaiting it moves a pointer rather than copying it each time.
        let pipeline = Box::pin(async move {
            let mut t = Trace::default();
            let result = stage::execute::contained(self.sequence(&call, principal, &mut t))
                .await
                .unwrap_or_else(|_| Err(Exit::Stop(stage::panicked(&self.core, &t))));
            // The call's own strings move into the outcome.
            let about = Subject {
                event: AuditEvent::Call,
                call_id: call.call_id.into(),
                tool: call.tool.into(),
                principal,
                started,
            };
            stage::finish::finish(&self.core, about, t, Answer::from_exit(result)).await
        });
        crate::canonical::with_nfc_memo(pipeline)
            .instrument(span)
            .await
    }

    /// The stage sequence of a call. Each step passes the call on, stops it, or answers it from
    /// a stored outcome (`?`).
    async fn sequence(
        &self,
        call: &ToolCall,
        p: &Principal,
        t: &mut Trace,
    ) -> Result<Answer, Exit> {
        let core = &*self.core;
        // The metrics label of a registered tool, even when its arguments do not parse.
        t.tool = core.tools.get(&call.tool).map(|r| r.name.clone());
        t.at(Stage::Parse);
        stage::gate::check(&call.arguments, core.sanitizer.limits())?;
        let args = stage::parse::arguments(&call.arguments)?;
        t.at(Stage::Registry);
        let tool = stage::registry::lookup(core, &call.tool)?;
        let spec = tool.spec();
        t.at(Stage::Validate);
        stage::validate::arguments(&tool.input, &args)?;
        stage::idempotency::check_raw_key(spec, call, &args)?;
        t.at(Stage::Sanitize);
        let clean = stage::sanitize::run(core, tool, args, t)?;
        // The one copy of the arguments every later stage reads.
        let args = Arc::new(clean.args);
        stage::intent::record(core.keys.as_deref(), spec, call, &args, p, t)?;
        self.custom(StagePoint::AfterSanitize, call, p, spec, &args)
            .await?;
        t.at(Stage::Principal);
        stage::principal::fresh(core, p)?;
        t.at(Stage::Permit);
        stage::authorize::permit(core, p, spec).await?;
        self.custom(StagePoint::AfterPermit, call, p, spec, &args)
            .await?;
        let decoded = tool.decode(&args)?;
        let call_id = t.call_id.insert(call.call_id.as_str().into()).clone();
        let mut ctx = core
            .context(p, call_id, t.operation_id.clone())
            .with_resolved_urls(clean.resolved);
        if spec.untrusted_output {
            ctx = ctx.with_source_label_slot();
        }
        t.source_label = ctx.source_label();
        stage::preflight::run(core, spec, p, &*decoded, &ctx, t).await?;
        crate::provenance::stage::load(core, spec, call, p, t).await?;
        t.at(Stage::Policy);
        let decision = stage::policy::stage(core, spec, &args, p, t).await?;
        self.custom(StagePoint::AfterPolicy, call, p, spec, &args)
            .await?;
        t.at(Stage::Idempotency);
        let held = stage::idempotency::admit(core, call, spec, p, t).await?;
        t.admitted = !spec.read_only;
        t.at(Stage::Approval);
        let answer = match decision.approval_cause {
            Some(_) => {
                let key = held.as_ref().map(|h| h.key.clone());
                // Boxed: a call that needs approval is rare, and the request's state would
                // otherwise enlarge every call's future.
                Box::pin(stage::approval::ask(core, spec, call, p, key, &decision, t)).await
            }
            None => stage::execution(core, tool, decoded, ctx, &decision, false, t).await,
        };
        let cause = decision.approval_cause.as_deref();
        let answer = crate::provenance::stage::settle(core, spec, call, p, cause, answer, t).await;
        let answer = Answer::from_result(answer);
        stage::settle::held(core, spec, held, &answer, t).await;
        Ok(answer)
    }

    /// Runs the custom stages added at `point`.
    async fn custom(
        &self,
        point: StagePoint,
        call: &ToolCall,
        principal: &Principal,
        spec: &ToolSpec,
        arguments: &serde_json::Value,
    ) -> Result<(), Exit> {
        let input = StageInput {
            call,
            principal,
            spec,
            arguments,
        };
        Ok(self.core.custom.run(point, input).await?)
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
