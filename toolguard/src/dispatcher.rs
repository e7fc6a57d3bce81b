//! The dispatcher: a registry of tools and the one mandatory pipeline every call goes through.
//!
//! The stage order is written once, in [`Dispatcher::pipeline`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonschema::Validator;
use serde_json::Value;
use tracing::Instrument;

use crate::audit::{AuditEvent, AuditRecord, AuditSink, MemoryAuditSink, REDACTED};
use crate::call::{Principal, ToolCall};
use crate::clock::{Clock, SystemClock, unix_millis};
use crate::digest::request_digest;
use crate::erased::ErasedTool;
use crate::metrics;
use crate::outcome::{Status, ToolOutcome, UntrustedOutput};
use crate::sanitize::{Modification, Sanitizer};
use crate::spec::ToolSpec;
use crate::stage::authorize::{AllowAuthenticated, Authorizer};
use crate::stage::{self, Stage, Stop};
use crate::tool::{Tool, ToolContext, ToolHandle};

/// Why a dispatcher could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// Two tools share a name.
    #[error("tool `{0}` is registered twice")]
    DuplicateTool(String),
    /// A tool's schema does not compile.
    #[error("tool `{tool}` has an invalid {which} schema: {message}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// `input` or `output`.
        which: &'static str,
        /// What the schema compiler said.
        message: String,
    },
    /// `state` was called after tools were added.
    #[error("set the state before adding tools")]
    StateAfterTools,
}

/// Default maximum age of a principal's authentication.
pub const DEFAULT_PRINCIPAL_MAX_AGE: Duration = Duration::from_secs(12 * 3600);

struct Registered<S: Send + Sync + 'static> {
    tool: Arc<dyn ErasedTool<S>>,
    input: Validator,
    output: Validator,
}

struct Inner<S: Send + Sync + 'static> {
    tools: HashMap<String, Registered<S>>,
    order: Vec<String>,
    state: Arc<S>,
    authorizer: Box<dyn Authorizer>,
    sanitizer: Sanitizer,
    audit: Arc<dyn AuditSink>,
    clock: Arc<dyn Clock>,
    principal_max_age: Duration,
}

/// Runs tool calls through the guard pipeline. Cheap to clone.
pub struct Dispatcher<S: Send + Sync + 'static> {
    inner: Arc<Inner<S>>,
}

impl<S: Send + Sync + 'static> Clone for Dispatcher<S> {
    fn clone(&self) -> Self {
        Dispatcher {
            inner: self.inner.clone(),
        }
    }
}

/// Builds a [`Dispatcher`].
pub struct DispatcherBuilder<S: Send + Sync + 'static> {
    state: Arc<S>,
    tools: Vec<Arc<dyn ErasedTool<S>>>,
    authorizer: Box<dyn Authorizer>,
    sanitizer: Sanitizer,
    audit: Option<Arc<dyn AuditSink>>,
    clock: Arc<dyn Clock>,
    principal_max_age: Duration,
    error: Option<BuildError>,
}

impl Dispatcher<()> {
    /// A builder with no state; call [`DispatcherBuilder::state`] first to share application state.
    pub fn builder() -> DispatcherBuilder<()> {
        DispatcherBuilder {
            state: Arc::new(()),
            tools: Vec::new(),
            authorizer: Box::new(AllowAuthenticated),
            sanitizer: Sanitizer::default(),
            audit: None,
            clock: Arc::new(SystemClock),
            principal_max_age: DEFAULT_PRINCIPAL_MAX_AGE,
            error: None,
        }
    }
}

impl<S: Send + Sync + 'static> DispatcherBuilder<S> {
    /// Sets the application state the tools share. Must come before any tool.
    pub fn state<T: Send + Sync + 'static>(self, state: T) -> DispatcherBuilder<T> {
        self.state_arc(Arc::new(state))
    }

    /// Sets shared application state the host keeps a handle to.
    pub fn state_arc<T: Send + Sync + 'static>(self, state: Arc<T>) -> DispatcherBuilder<T> {
        let error = if self.tools.is_empty() {
            self.error
        } else {
            Some(BuildError::StateAfterTools)
        };
        DispatcherBuilder {
            state,
            tools: Vec::new(),
            authorizer: self.authorizer,
            sanitizer: self.sanitizer,
            audit: self.audit,
            clock: self.clock,
            principal_max_age: self.principal_max_age,
            error,
        }
    }

    /// Registers a tool.
    pub fn tool<T: Tool<S>>(self, tool: T) -> Self {
        self.handle(ToolHandle::new(tool))
    }

    /// Registers an already wrapped tool.
    pub fn handle(mut self, handle: ToolHandle<S>) -> Self {
        self.tools.push(handle.inner);
        self
    }

    /// Registers several tools (e.g. `Bank::tools()` of a `#[toolset]`).
    pub fn tools(mut self, handles: impl IntoIterator<Item = ToolHandle<S>>) -> Self {
        self.tools.extend(handles.into_iter().map(|h| h.inner));
        self
    }

    /// Decides which principal may use which tool (default: every authenticated principal).
    pub fn authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizer = Box::new(authorizer);
        self
    }

    /// Sets the sanitizer rules.
    pub fn sanitizer(mut self, sanitizer: Sanitizer) -> Self {
        self.sanitizer = sanitizer;
        self
    }

    /// Sets the audit sink (default: an in-memory sink).
    pub fn audit(mut self, sink: impl AuditSink) -> Self {
        self.audit = Some(Arc::new(sink));
        self
    }

    /// Sets the clock (default: the system clock).
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// How long a principal's authentication stays valid (default 12 h).
    pub fn principal_max_age(mut self, max_age: Duration) -> Self {
        self.principal_max_age = max_age;
        self
    }

    /// Checks the registry and compiles every schema once.
    pub fn build(self) -> Result<Dispatcher<S>, BuildError> {
        if let Some(err) = self.error {
            return Err(err);
        }
        let mut tools = HashMap::new();
        let mut order = Vec::new();
        for tool in self.tools {
            let spec = tool.spec();
            let name = spec.name.clone();
            let compile = |schema: &Value, which| {
                stage::validate::compile(schema).map_err(|message| BuildError::InvalidSchema {
                    tool: name.clone(),
                    which,
                    message,
                })
            };
            let input = compile(&spec.input_schema, "input")?;
            let output = compile(&spec.output_schema, "output")?;
            if tools.contains_key(&name) {
                return Err(BuildError::DuplicateTool(name));
            }
            order.push(name.clone());
            tools.insert(
                name,
                Registered {
                    tool,
                    input,
                    output,
                },
            );
        }
        Ok(Dispatcher {
            inner: Arc::new(Inner {
                tools,
                order,
                state: self.state,
                authorizer: self.authorizer,
                sanitizer: self.sanitizer,
                audit: self
                    .audit
                    .unwrap_or_else(|| Arc::new(MemoryAuditSink::new())),
                clock: self.clock,
                principal_max_age: self.principal_max_age,
            }),
        })
    }
}

/// What the pipeline learns about a call, for its audit entry and outcome.
#[derive(Default)]
struct Trace {
    stage: Stage,
    tool: Option<String>,
    request_digest: Option<String>,
    arguments: Option<Value>,
    modifications: Vec<Modification>,
    operation_id: Option<String>,
    idempotency_key: Option<String>,
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// Runs `call` for `principal` through the whole pipeline. Never panics; every path ends in
    /// exactly one terminal audit entry.
    pub async fn dispatch(&self, call: ToolCall, principal: &Principal) -> ToolOutcome {
        let started = Instant::now();
        let span = tracing::info_span!(
            "execute_tool",
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = %call.tool,
            "gen_ai.tool.call.id" = %call.call_id,
            "toolguard.status" = tracing::field::Empty,
        );
        async {
            let mut trace = Trace::default();
            let result = self.pipeline(&call, principal, &mut trace).await;
            self.finish(call, principal, trace, result, started).await
        }
        .instrument(span)
        .await
    }

    /// The stage sequence. Each line either passes the call on or stops it.
    async fn pipeline(
        &self,
        call: &ToolCall,
        principal: &Principal,
        t: &mut Trace,
    ) -> Result<UntrustedOutput, Stop> {
        let inner = &*self.inner;
        t.stage = Stage::Parse;
        let mut args = stage::parse::arguments(&call.arguments)?;

        t.stage = Stage::Registry;
        let tool = inner
            .tools
            .get(&call.tool)
            .ok_or_else(|| unknown_tool(&call.tool))?;
        let spec = tool.tool.spec();
        t.tool = Some(spec.name.clone());

        t.stage = Stage::Validate;
        stage::validate::arguments(&tool.input, &args)?;

        t.stage = Stage::Sanitize;
        let report = inner.sanitizer.sanitize(spec, &mut args);
        t.modifications = report.modifications.clone();
        stage::sanitize::check(&report)?;
        t.record_arguments(spec, &args, principal, call);
        let decoded = tool
            .tool
            .decode(args)
            .map_err(stage::validate::decode_error)?;
        let ctx = ToolContext::new(
            Arc::new(principal.clone()),
            inner.state.clone(),
            call.call_id.clone(),
            t.operation_id.clone(),
        );

        t.stage = Stage::Preflight;
        decoded
            .preflight(&ctx)
            .await
            .map_err(Stop::from_tool_error)?;

        t.stage = Stage::Principal;
        stage::principal::check(principal, inner.clock.now(), inner.principal_max_age)?;

        t.stage = Stage::Authorize;
        inner
            .authorizer
            .authorize(principal, spec)
            .map_err(|reason| Stop::new(Status::Forbidden, reason, "tool not permitted"))?;
        decoded
            .authorize(&ctx)
            .await
            .map_err(Stop::from_tool_error)?;

        t.stage = Stage::Policy; // risk-policy limits: see the policy stage
        t.stage = Stage::Idempotency; // reservation: see the idempotency stage
        t.stage = Stage::Approval; // human approval: see the approval stage

        if !spec.read_only {
            t.stage = Stage::Recheck;
            decoded
                .authorize(&ctx)
                .await
                .map_err(Stop::from_tool_error)?;
            decoded
                .preflight(&ctx)
                .await
                .map_err(Stop::from_tool_error)?;
        }

        t.stage = Stage::Execute;
        let output = stage::execute::run(decoded, ctx, spec.timeout, spec.read_only).await?;

        t.stage = Stage::Envelope;
        stage::envelope::wrap(&tool.output, output, spec.read_only)
    }

    async fn finish(
        &self,
        call: ToolCall,
        principal: &Principal,
        t: Trace,
        result: Result<UntrustedOutput, Stop>,
        started: Instant,
    ) -> ToolOutcome {
        let tool_label = t
            .tool
            .clone()
            .unwrap_or_else(|| metrics::UNKNOWN_TOOL_LABEL.to_owned());
        let mut outcome = ToolOutcome::new(call.call_id.clone(), call.tool.clone(), Status::Ok);
        match result {
            Ok(output) => outcome.output = Some(output),
            Err(stop) => {
                outcome.status = stop.status;
                outcome.reason = stop.reason;
                outcome.message = stop.message;
                outcome.errors = stop.errors;
            }
        }
        outcome.operation_id = t.operation_id.clone();
        // The real not-found class stays in the audit trail; outside, every not_found is alike.
        let audit_reason = outcome.reason.clone();
        if outcome.status == Status::NotFound {
            outcome.reason = None;
        }
        let elapsed = started.elapsed();
        let record = AuditRecord {
            event: AuditEvent::Call,
            time_ms: unix_millis(self.inner.clock.now()),
            tenant: principal.tenant.clone(),
            subject: principal.subject.clone(),
            session: principal.session_id.clone(),
            tool: call.tool.clone(),
            call_id: call.call_id.clone(),
            operation_id: t.operation_id,
            idempotency_key: t.idempotency_key,
            stage: t.stage,
            status: Some(outcome.status),
            reason: audit_reason,
            request_digest: t.request_digest,
            arguments: t.arguments,
            modifications: t.modifications,
            approval_id: outcome.approval.as_ref().map(|a| a.approval_id.clone()),
            approver: None,
            replayed: outcome.replayed,
            duration_us: elapsed.as_micros() as u64,
        };
        match self.inner.audit.append(record).await {
            Ok(entry) => outcome.audit_seq = Some(entry.seq),
            Err(err) => tracing::error!(error = %err, "audit entry could not be written"),
        }
        metrics::call_finished(&tool_label, outcome.status, elapsed.as_secs_f64());
        tracing::Span::current().record("toolguard.status", outcome.status.as_str());
        outcome
    }

    /// The declarations of the registered tools, in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.inner
            .order
            .iter()
            .filter_map(|n| self.inner.tools.get(n))
            .map(|r| r.tool.spec())
    }

    /// The declaration of tool `name`.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.inner.tools.get(name).map(|r| r.tool.spec())
    }

    /// The shared application state.
    pub fn state(&self) -> &Arc<S> {
        &self.inner.state
    }
}

impl Trace {
    /// Records the sanitized arguments (sensitive fields redacted), the idempotency key and the
    /// request digest.
    fn record_arguments(
        &mut self,
        spec: &ToolSpec,
        args: &Value,
        principal: &Principal,
        call: &ToolCall,
    ) {
        self.request_digest = Some(request_digest(
            &spec.name,
            spec.revision,
            args,
            &principal.tenant,
            &principal.subject,
        ));
        self.arguments = Some(redact(spec, args));
        self.idempotency_key = call.idempotency_key.clone();
        if !spec.read_only {
            self.operation_id = Some(format!("op_{}", uuid::Uuid::new_v4().simple()));
        }
    }
}

/// `args` with every `sensitive` field replaced by [`REDACTED`].
pub fn redact(spec: &ToolSpec, args: &Value) -> Value {
    let mut out = args.clone();
    if let Value::Object(map) = &mut out {
        for field in spec.fields.iter().filter(|f| f.sensitive) {
            if let Some(v) = map.get_mut(&field.name) {
                *v = Value::String(REDACTED.to_owned());
            }
        }
    }
    out
}

fn unknown_tool(name: &str) -> Stop {
    // The name is the model's; it is not echoed back.
    let _ = name;
    Stop::new(
        Status::UnknownTool,
        "unknown_tool",
        "no tool of that name is available",
    )
}
