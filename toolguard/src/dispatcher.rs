//! The dispatcher: a registry of tools and the one mandatory pipeline every call goes through.
//!
//! The stage order is written once, in `Dispatcher::pipeline` and its tail
//! `Dispatcher::execute_checked` (private; [`Dispatcher::dispatch`] runs them):
//! parse → registry → schema validation → sanitization → business preflight → principal →
//! authorization → risk policy → idempotency → approval → recheck → execution → envelope.

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
use crate::erased::{DecodedArgs, ErasedTool};
use crate::error::ToolError;
use crate::metrics;
use crate::outcome::{ApprovalTicket, ArgumentError, Status, ToolOutcome, UntrustedOutput};
use crate::sanitize::{Modification, Sanitizer};
use crate::spec::{Risk, ToolSpec};
use crate::stage::authorize::{AllowAuthenticated, Authorizer};
use crate::stage::idempotency::{self as idem, Admission, Held};
use crate::stage::policy::{PolicyDecision, RiskPolicy};
use crate::stage::{self, Stage, Stop};
use crate::store::{
    ApprovalStore, IdempotencyStore, MemoryStore, OperationRecord, OperationState, OperationStore,
    ScopedKey, SessionLedger, StoredOutcome, within_deadline,
};
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
    /// A tool's declaration is unsafe (e.g. a high-risk state-changing tool without idempotency).
    #[error("tool `{tool}` is declared unsafely: {message}")]
    UnsafeDeclaration {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// `state` was called after tools were added.
    #[error("set the state before adding tools")]
    StateAfterTools,
}

/// Default maximum age of a principal's authentication.
pub const DEFAULT_PRINCIPAL_MAX_AGE: Duration = Duration::from_secs(12 * 3600);

/// Looks the requester up again before an approved action executes; `None` when they may no
/// longer act (account disabled, roles revoked).
pub type PrincipalRefresher = Arc<dyn Fn(&Principal) -> Option<Principal> + Send + Sync>;

pub(crate) struct Registered<S: Send + Sync + 'static> {
    pub(crate) tool: Arc<dyn ErasedTool<S>>,
    pub(crate) input: Validator,
    pub(crate) output: Validator,
}

pub(crate) struct Inner<S: Send + Sync + 'static> {
    pub(crate) tools: HashMap<String, Registered<S>>,
    pub(crate) order: Vec<String>,
    pub(crate) state: Arc<S>,
    pub(crate) authorizer: Box<dyn Authorizer>,
    pub(crate) sanitizer: Sanitizer,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) principal_max_age: Duration,
    pub(crate) policy: RiskPolicy,
    pub(crate) idempotency: Arc<dyn IdempotencyStore>,
    pub(crate) approvals: Arc<dyn ApprovalStore>,
    pub(crate) ledger: Arc<dyn SessionLedger>,
    pub(crate) operations: Arc<dyn OperationStore>,
    pub(crate) idempotency_ttl: HashMap<String, Duration>,
    pub(crate) fail_open_read_only: bool,
    pub(crate) refresher: Option<PrincipalRefresher>,
    pub(crate) notifiers: crate::notify::Notifiers,
}

/// Runs tool calls through the guard pipeline. Cheap to clone.
pub struct Dispatcher<S: Send + Sync + 'static> {
    pub(crate) inner: Arc<Inner<S>>,
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
    policy: RiskPolicy,
    idempotency: Option<Arc<dyn IdempotencyStore>>,
    approvals: Option<Arc<dyn ApprovalStore>>,
    ledger: Option<Arc<dyn SessionLedger>>,
    operations: Option<Arc<dyn OperationStore>>,
    idempotency_ttl: HashMap<String, Duration>,
    fail_open_read_only: bool,
    refresher: Option<PrincipalRefresher>,
    pub(crate) notifiers: Vec<Arc<dyn crate::notify::ApprovalNotifier>>,
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
            policy: RiskPolicy::default(),
            idempotency: None,
            approvals: None,
            ledger: None,
            operations: None,
            idempotency_ttl: HashMap::new(),
            fail_open_read_only: false,
            refresher: None,
            notifiers: Vec::new(),
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
            policy: self.policy,
            idempotency: self.idempotency,
            approvals: self.approvals,
            ledger: self.ledger,
            operations: self.operations,
            idempotency_ttl: self.idempotency_ttl,
            fail_open_read_only: self.fail_open_read_only,
            refresher: self.refresher,
            notifiers: self.notifiers,
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

    /// Sets the risk policy.
    pub fn policy(mut self, policy: RiskPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Uses one backend for every store (idempotency, approvals, ledger, operations).
    pub fn store<B>(mut self, store: Arc<B>) -> Self
    where
        B: IdempotencyStore + ApprovalStore + SessionLedger + OperationStore,
    {
        self.idempotency = Some(store.clone());
        self.approvals = Some(store.clone());
        self.ledger = Some(store.clone());
        self.operations = Some(store);
        self
    }

    /// Keeps every store and the audit trail in the SQLite file at `path`, created if missing
    /// (feature `sqlite`; see [`crate::store::SqliteStore`]). Store statements and audit entries
    /// share one connection and its group commits, fully synced ([`crate::store::Durability::Full`]).
    #[cfg(feature = "sqlite")]
    pub fn sqlite(
        self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<Self, crate::store::StoreError> {
        let store = Arc::new(crate::store::SqliteStore::open_with(
            path,
            crate::store::Durability::Full,
        )?);
        let audit = store.audit_sink()?;
        Ok(self.store(store).audit(audit))
    }

    /// Sets the idempotency store alone.
    pub fn idempotency_store(mut self, store: Arc<dyn IdempotencyStore>) -> Self {
        self.idempotency = Some(store);
        self
    }

    /// Sets the approval store alone.
    pub fn approval_store(mut self, store: Arc<dyn ApprovalStore>) -> Self {
        self.approvals = Some(store);
        self
    }

    /// Sets the session ledger alone.
    pub fn session_ledger(mut self, ledger: Arc<dyn SessionLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// Sets the operation store alone.
    pub fn operation_store(mut self, store: Arc<dyn OperationStore>) -> Self {
        self.operations = Some(store);
        self
    }

    /// Lifetime of `tool`'s idempotency records (default 24 h).
    pub fn idempotency_ttl(mut self, tool: &str, ttl: Duration) -> Self {
        self.idempotency_ttl.insert(tool.to_owned(), ttl);
        self
    }

    /// Lets read-only tools run without idempotency when the store is down (default: closed).
    pub fn fail_open_read_only(mut self, yes: bool) -> Self {
        self.fail_open_read_only = yes;
        self
    }

    /// Looks the requester up again before an approved action executes.
    pub fn principal_refresher(
        mut self,
        f: impl Fn(&Principal) -> Option<Principal> + Send + Sync + 'static,
    ) -> Self {
        self.refresher = Some(Arc::new(f));
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
            if spec.risk >= Risk::High && !spec.read_only && !spec.idempotent {
                return Err(BuildError::UnsafeDeclaration {
                    tool: name,
                    message: "a high-risk tool that changes state must be idempotent".to_owned(),
                });
            }
            if let Err(message) = crate::spec::check_identity_properties(&spec.input_schema) {
                return Err(BuildError::UnsafeDeclaration {
                    tool: name,
                    message,
                });
            }
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
        let memory = Arc::new(MemoryStore::new());
        let audit: Arc<dyn AuditSink> = self
            .audit
            .unwrap_or_else(|| Arc::new(MemoryAuditSink::new()));
        let notifiers =
            crate::notify::Notifiers::new(self.notifiers, audit.clone(), self.clock.clone());
        Ok(Dispatcher {
            inner: Arc::new(Inner {
                tools,
                order,
                state: self.state,
                authorizer: self.authorizer,
                sanitizer: self.sanitizer,
                audit,
                clock: self.clock,
                principal_max_age: self.principal_max_age,
                policy: self.policy,
                idempotency: self.idempotency.unwrap_or_else(|| memory.clone()),
                approvals: self.approvals.unwrap_or_else(|| memory.clone()),
                ledger: self.ledger.unwrap_or_else(|| memory.clone()),
                operations: self.operations.unwrap_or(memory),
                idempotency_ttl: self.idempotency_ttl,
                fail_open_read_only: self.fail_open_read_only,
                refresher: self.refresher,
                notifiers,
            }),
        })
    }
}

/// What the pipeline learns about a call, for its audit entry and outcome.
#[derive(Default)]
pub(crate) struct Trace {
    pub(crate) stage: Stage,
    pub(crate) tool: Option<String>,
    pub(crate) request_digest: Option<String>,
    pub(crate) arguments: Option<Value>,
    pub(crate) modifications: Vec<Modification>,
    pub(crate) operation_id: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) approval_id: Option<String>,
    pub(crate) approver: Option<String>,
    /// The call was admitted past idempotency and has an operation record to keep current.
    pub(crate) admitted: bool,
    /// Unredacted normalized arguments, kept in the operation record for reconciliation.
    pub(crate) arguments_for_operation: Option<Value>,
}

/// A call's answer when no stage stopped it: executed, pending a human, or replayed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: Status,
    pub(crate) reason: Option<String>,
    pub(crate) message: Option<String>,
    pub(crate) output: Option<UntrustedOutput>,
    pub(crate) approval: Option<ApprovalTicket>,
    pub(crate) replayed: bool,
    pub(crate) errors: Vec<ArgumentError>,
}

impl Answer {
    pub(crate) fn executed(output: UntrustedOutput) -> Self {
        Answer {
            status: Status::Ok,
            reason: None,
            message: None,
            output: Some(output),
            approval: None,
            replayed: false,
            errors: Vec::new(),
        }
    }

    fn pending(ticket: ApprovalTicket) -> Self {
        Answer {
            status: Status::PendingApproval,
            reason: None,
            message: Some(format!(
                "a human must approve this action (approval {})",
                ticket.approval_id
            )),
            output: None,
            approval: Some(ticket),
            replayed: false,
            errors: Vec::new(),
        }
    }

    pub(crate) fn replay(stored: StoredOutcome) -> Self {
        Answer {
            status: stored.status,
            reason: stored.reason,
            message: stored.message,
            output: stored.output.map(UntrustedOutput::new),
            approval: stored.approval,
            replayed: true,
            errors: Vec::new(),
        }
    }

    pub(crate) fn from_result(result: Result<Answer, Stop>) -> Self {
        result.unwrap_or_else(|stop| Answer {
            status: stop.status,
            reason: stop.reason,
            message: stop.message,
            output: None,
            approval: None,
            replayed: false,
            errors: stop.errors,
        })
    }

    pub(crate) fn stored(&self, operation_id: Option<&str>) -> StoredOutcome {
        StoredOutcome {
            status: self.status,
            reason: self.reason.clone(),
            message: self.message.clone(),
            output: self.output.as_ref().map(|o| o.data.clone()),
            approval: self.approval.clone(),
            operation_id: operation_id.map(str::to_owned),
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
        async {
            let mut trace = Trace::default();
            let result = stage::execute::contained(self.pipeline(&call, principal, &mut trace))
                .await
                .unwrap_or_else(|_| Err(self.panicked(&trace)));
            let answer = Answer::from_result(result);
            self.finish(
                AuditEvent::Call,
                &call.call_id,
                &call.tool,
                principal,
                trace,
                answer,
                started,
            )
            .await
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
    ) -> Result<Answer, Stop> {
        let inner = &*self.inner;
        // The metrics label of a registered tool, even when its arguments do not parse.
        t.tool = inner
            .tools
            .get(&call.tool)
            .map(|r| r.tool.spec().name.clone());
        t.stage = Stage::Parse;
        let mut args = stage::parse::arguments(&call.arguments)?;

        t.stage = Stage::Registry;
        let tool = inner.tools.get(&call.tool).ok_or_else(unknown_tool)?;
        let spec = tool.tool.spec();
        t.tool = Some(spec.name.clone());

        t.stage = Stage::Validate;
        stage::validate::arguments(&tool.input, &args)?;

        t.stage = Stage::Sanitize;
        let report = inner.sanitizer.sanitize(spec, &mut args);
        t.modifications = report.modifications.clone();
        stage::sanitize::check(&report)?;
        // What the sanitizer stripped may leave a value the schema refuses (a string of
        // zero-width characters under `min_len = 1` becomes "").
        stage::validate::sanitized(&tool.input, &args)?;
        let key = idem::extract_key(spec, call, &args)?;
        t.record_arguments(spec, &args, principal, key.clone());
        let decoded = tool
            .tool
            .decode(args.clone())
            .map_err(stage::validate::decode_error)?;
        let ctx = self
            .context(principal, &call.call_id, t.operation_id.clone())
            .with_resolved_urls(report.resolved.clone());

        // A business check that fails because the call already took effect (the order is now
        // refunded, the account closed) must not hide that call's stored outcome from its retry:
        // such failures are held until the principal and tool checks have passed, and a stored
        // outcome of the same request under the caller's own key is replayed instead.
        t.stage = Stage::Preflight;
        let mut held = deferrable(decoded.preflight(&ctx).await, Stage::Preflight)?;

        t.stage = Stage::Principal;
        stage::principal::check(principal, inner.clock.now(), inner.principal_max_age)?;

        t.stage = Stage::Authorize;
        self.authorize_tool(principal, spec)?;
        // Resource authorization runs even when the preflight failed, and wins: a foreign
        // resource answers not_found, never a business error that reveals its state.
        if let Some(denied) = deferrable(decoded.authorize(&ctx).await, Stage::Authorize)? {
            held = Some(denied);
        }
        if let Some((stage, stop)) = held {
            return self
                .replay_or_stop(spec, principal, key.as_deref(), stage, stop, t)
                .await;
        }

        t.stage = Stage::Policy;
        let now = inner.clock.now();
        // A denial (limit used up, rate hit) is deferred like a failed preflight: the retry of a
        // call that already executed gets its stored outcome.
        let decision = match stage::policy::evaluate(
            &inner.policy,
            &*inner.ledger,
            spec,
            &args,
            principal,
            now,
        )
        .await
        {
            Ok(decision) => decision,
            Err(stop) if stop.status == Status::PolicyDenied => {
                return self
                    .replay_or_stop(spec, principal, key.as_deref(), Stage::Policy, stop, t)
                    .await;
            }
            Err(stop) => return Err(stop),
        };

        t.stage = Stage::Idempotency;
        let digest = t.request_digest.clone().unwrap_or_default();
        let ttl = self.idempotency_ttl(spec);
        // `None` inside: a wait too long to represent, i.e. no deadline.
        let wait_until = call.wait_in_progress.map(|w| Instant::now().checked_add(w));
        let admission = loop {
            let attempt = idem::reserve(
                &*inner.idempotency,
                spec,
                principal,
                key.clone(),
                &digest,
                t.operation_id.as_deref(),
                ttl,
                inner.clock.now(),
                inner.fail_open_read_only,
            )
            .await;
            match attempt {
                // The caller asked to wait for the call that holds the key.
                Err(stop)
                    if stop.status == Status::InProgress
                        && wait_until.is_some_and(|until| {
                            until.is_none_or(|until| Instant::now() < until)
                        }) =>
                {
                    tokio::time::sleep(idem::WAIT_POLL).await;
                }
                other => break other?,
            }
        };
        let held = match admission {
            Admission::Replay(stored) => {
                t.operation_id = stored.operation_id.clone().or(t.operation_id.take());
                return Ok(self.replayed(spec, stored).await);
            }
            Admission::Proceed(held) => held,
        };
        t.admitted = !spec.read_only;

        t.stage = Stage::Approval;
        let result = match &decision.approval_cause {
            // Without a key, a retry could not find the request and would open another one.
            Some(_) if held.is_none() => Err(Stop::new(
                Status::PolicyDenied,
                "approval_needs_idempotency_key",
                "this call needs a human's approval, which needs an idempotency key; nothing was done",
            )),
            Some(cause) => {
                let redacted = t.arguments.clone().unwrap_or(Value::Null);
                let pending = stage::approval::Pending {
                    spec,
                    call,
                    principal,
                    arguments: &args,
                    redacted: &redacted,
                    request_digest: &digest,
                    operation_id: t.operation_id.as_deref().unwrap_or_default(),
                    idempotency: held.as_ref().map(|h| h.key.clone()),
                    cause,
                    amount: decision.amount,
                };
                let (store, notifiers) = (&*inner.approvals, &inner.notifiers);
                let opened = stage::approval::open(store, &inner.policy, notifiers, pending, now);
                match opened.await {
                    Ok(ticket) => {
                        t.approval_id = Some(ticket.approval_id.clone());
                        Ok(Answer::pending(ticket))
                    }
                    Err(stop) => Err(stop),
                }
            }
            None => self
                .execute_checked(tool, decoded, ctx, &decision, false, t)
                .await
                .map(Answer::executed),
        };
        self.settle(held, &result, ttl, t).await;
        result
    }

    /// The tail every execution goes through, whether straight from a call or after approval:
    /// recheck authorization and state, admit the amount to the session ledger, execute under
    /// the deadline, envelope the result.
    pub(crate) async fn execute_checked(
        &self,
        tool: &Registered<S>,
        decoded: Box<dyn DecodedArgs<S>>,
        ctx: ToolContext<S>,
        decision: &PolicyDecision,
        approved: bool,
        t: &mut Trace,
    ) -> Result<UntrustedOutput, Stop> {
        let inner = &*self.inner;
        let spec = tool.tool.spec();
        let entry = t
            .operation_id
            .clone()
            .unwrap_or_else(|| ctx.call_id().to_owned());

        t.stage = Stage::Recheck;
        if !spec.read_only {
            decoded
                .authorize(&ctx)
                .await
                .map_err(Stop::from_tool_error)?;
            decoded
                .preflight(&ctx)
                .await
                .map_err(Stop::from_tool_error)?;
        }
        let scopes = decision.scopes();
        if let Some(amount) = decision.amount.filter(|_| !scopes.is_empty()) {
            let now = inner.clock.now();
            // A ledger that does not answer in time counts as unavailable (fail closed); a late
            // write can only over-count, never let an amount through unseen.
            let admitted = if approved {
                within_deadline(inner.ledger.record(&entry, amount, &scopes, now))
                    .await
                    .map(|_| true)
            } else {
                within_deadline(inner.ledger.admit(&entry, amount, &decision.limits, now)).await
            };
            match admitted {
                Ok(true) => {}
                Ok(false) => {
                    return Err(Stop::new(
                        Status::PolicyDenied,
                        "session_limit",
                        "the cumulative limit for this session is reached",
                    ));
                }
                Err(_) => {
                    return Err(Stop::new(
                        Status::Unavailable,
                        "ledger_unavailable",
                        "the risk ledger is unavailable; nothing was done",
                    ));
                }
            }
        }
        if t.admitted {
            self.put_operation(
                ctx.principal(),
                spec,
                ctx.call_id(),
                t,
                OperationState::Executing,
                None,
                true,
            )
            .await?;
        }

        t.stage = Stage::Execute;
        let executed =
            stage::execute::run(&spec.name, decoded, ctx, spec.timeout, spec.read_only).await;
        if let Err(stop) = &executed
            && stop.status != Status::OutcomeUnknown
            && !scopes.is_empty()
        {
            let _ = within_deadline(inner.ledger.retract(&entry, &scopes)).await;
        }

        let output = executed?;

        t.stage = Stage::Envelope;
        stage::envelope::wrap(&tool.output, output, spec.read_only)
    }

    /// Stores the outcome under the call's idempotency key, or releases the key.
    async fn settle(
        &self,
        held: Option<Held>,
        result: &Result<Answer, Stop>,
        ttl: Duration,
        t: &Trace,
    ) {
        let answer = Answer::from_result(result.clone());
        let stored = answer.stored(t.operation_id.as_deref());
        idem::settle(
            &*self.inner.idempotency,
            held,
            &stored,
            ttl,
            self.inner.clock.now(),
        )
        .await;
    }

    /// A stopped call's stored outcome under the caller's own key and the same request digest,
    /// replayed; without one, `stop` at `stage`.
    async fn replay_or_stop(
        &self,
        spec: &ToolSpec,
        principal: &Principal,
        key: Option<&str>,
        stage: Stage,
        stop: Stop,
        t: &mut Trace,
    ) -> Result<Answer, Stop> {
        let inner = &*self.inner;
        let digest = t.request_digest.clone().unwrap_or_default();
        match idem::stored_replay(
            &*inner.idempotency,
            spec,
            principal,
            key,
            &digest,
            inner.clock.now(),
        )
        .await
        {
            Some(stored) => {
                t.stage = Stage::Idempotency;
                t.operation_id = stored.operation_id.clone().or(t.operation_id.take());
                Ok(self.replayed(spec, stored).await)
            }
            None => {
                t.stage = stage;
                Err(stop)
            }
        }
    }

    /// The stop of a call during which something panicked. Once a state-changing handler may
    /// have begun, its effect is unknown.
    pub(crate) fn panicked(&self, t: &Trace) -> Stop {
        let read_only = t
            .tool
            .as_deref()
            .and_then(|name| self.spec(name))
            .is_none_or(|spec| spec.read_only);
        if t.stage >= Stage::Execute && !read_only {
            Stop::new(
                Status::OutcomeUnknown,
                "panicked",
                "the call crashed after the tool may have begun; query the operation status \
                 before retrying",
            )
        } else {
            Stop::new(Status::Failed, "panicked", "the call failed unexpectedly")
        }
    }

    /// A stored outcome returned again. A pending approval that has meanwhile expired is closed
    /// and answers `approval_expired`.
    async fn replayed(&self, spec: &ToolSpec, stored: StoredOutcome) -> Answer {
        metrics::idempotency_hit(&spec.name);
        if stored.status == Status::PendingApproval
            && let Some(ticket) = &stored.approval
            && let Some(expired) = self.approvals().expire_if_due(&ticket.approval_id).await
        {
            return Answer::replay(expired);
        }
        Answer::replay(stored)
    }

    pub(crate) fn authorize_tool(
        &self,
        principal: &Principal,
        spec: &ToolSpec,
    ) -> Result<(), Stop> {
        self.inner
            .authorizer
            .authorize(principal, spec)
            .map_err(|reason| Stop::new(Status::Forbidden, reason, "tool not permitted"))
    }

    pub(crate) fn context(
        &self,
        principal: &Principal,
        call_id: &str,
        operation_id: Option<String>,
    ) -> ToolContext<S> {
        ToolContext::new(
            Arc::new(principal.clone()),
            self.inner.state.clone(),
            call_id,
            operation_id,
        )
    }

    pub(crate) fn idempotency_ttl(&self, spec: &ToolSpec) -> Duration {
        self.inner
            .idempotency_ttl
            .get(&spec.name)
            .copied()
            .unwrap_or(idem::DEFAULT_TTL)
    }

    /// Writes the operation record; `required` makes a store error stop the call (before
    /// execution), otherwise it is logged.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn put_operation(
        &self,
        principal: &Principal,
        spec: &ToolSpec,
        call_id: &str,
        t: &Trace,
        state: OperationState,
        outcome: Option<StoredOutcome>,
        required: bool,
    ) -> Result<(), Stop> {
        let Some(id) = t.operation_id.clone() else {
            return Ok(());
        };
        let record = OperationRecord {
            id,
            tenant: principal.tenant.clone(),
            subject: principal.subject.clone(),
            tool: spec.name.clone(),
            call_id: call_id.to_owned(),
            state,
            outcome,
            arguments: t.arguments_for_operation.clone().unwrap_or(Value::Null),
            idempotency: t.idempotency_key.as_ref().map(|k| ScopedKey {
                tenant: principal.tenant.clone(),
                subject: principal.subject.clone(),
                tool: spec.name.clone(),
                key: k.clone(),
            }),
            approval_id: t.approval_id.clone(),
            updated_at_ms: unix_millis(self.inner.clock.now()),
        };
        match within_deadline(self.inner.operations.put(&record)).await {
            Ok(()) => Ok(()),
            Err(_) if required => Err(Stop::new(
                Status::Unavailable,
                "operation_store_unavailable",
                "the operation store is unavailable; nothing was done",
            )),
            Err(err) => {
                tracing::error!(error = %err, "operation record could not be written");
                Ok(())
            }
        }
    }

    /// Turns an answer into the outcome, writes the audit entry, metrics and span status.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn finish(
        &self,
        event: AuditEvent,
        call_id: &str,
        tool: &str,
        principal: &Principal,
        t: Trace,
        answer: Answer,
        started: Instant,
    ) -> ToolOutcome {
        let tool_label = t
            .tool
            .clone()
            .unwrap_or_else(|| metrics::UNKNOWN_TOOL_LABEL.to_owned());
        if t.admitted
            && !answer.replayed
            && let Some(spec) = self.spec(&tool_label)
        {
            let state = OperationState::from_status(answer.status);
            let stored = answer.stored(t.operation_id.as_deref());
            let written = stage::execute::contained(self.put_operation(
                principal,
                spec,
                call_id,
                &t,
                state,
                Some(stored),
                false,
            ))
            .await;
            if written.is_err() {
                tracing::error!("the operation store panicked; the record was not updated");
            }
        }
        let mut outcome = ToolOutcome::new(call_id, tool, answer.status);
        outcome.reason = answer.reason;
        outcome.message = answer.message;
        outcome.output = answer.output;
        outcome.approval = answer.approval;
        outcome.replayed = answer.replayed;
        outcome.errors = answer.errors;
        outcome.operation_id = t.operation_id.clone();
        // The real not-found class stays in the audit trail; outside, every not_found is alike.
        let audit_reason = outcome.reason.clone();
        if outcome.status == Status::NotFound {
            outcome.reason = None;
        }
        let elapsed = started.elapsed();
        let record = AuditRecord {
            event,
            time_ms: unix_millis(self.inner.clock.now()),
            tenant: principal.tenant.clone(),
            subject: principal.subject.clone(),
            session: principal.session_id.clone(),
            tool: capped(tool),
            call_id: capped(call_id),
            operation_id: t.operation_id,
            idempotency_key: t.idempotency_key,
            stage: t.stage,
            status: Some(outcome.status),
            reason: audit_reason,
            request_digest: t.request_digest,
            arguments: t.arguments,
            modifications: t.modifications,
            approval_id: t
                .approval_id
                .or_else(|| outcome.approval.as_ref().map(|a| a.approval_id.clone())),
            approver: t.approver,
            replayed: outcome.replayed,
            duration_us: elapsed.as_micros() as u64,
        };
        match stage::execute::contained(self.inner.audit.append(record)).await {
            Ok(Ok(seq)) => outcome.audit_seq = Some(seq),
            Ok(Err(err)) => tracing::error!(error = %err, "audit entry could not be written"),
            Err(_) => tracing::error!("the audit sink panicked; the entry was not written"),
        }
        metrics::call_finished(&tool_label, outcome.status);
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
    /// Records the sanitized arguments (sensitive fields redacted), the idempotency key, the
    /// request digest and, for state-changing tools, a fresh operation id.
    fn record_arguments(
        &mut self,
        spec: &ToolSpec,
        args: &Value,
        principal: &Principal,
        key: Option<String>,
    ) {
        let action = idem::action_arguments(spec, args);
        self.request_digest = Some(request_digest(
            &spec.name,
            spec.revision,
            &action,
            &principal.tenant,
            &principal.subject,
        ));
        self.arguments = Some(redact(spec, args));
        self.arguments_for_operation = Some(args.clone());
        self.idempotency_key = key;
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

/// A hook's result: `Ok(Some(..))` holds a business failure (`precondition_failed`, `not_found`)
/// that a stored replay may override; any other error stops the call at once.
fn deferrable(result: Result<(), ToolError>, stage: Stage) -> Result<Option<(Stage, Stop)>, Stop> {
    match result {
        Ok(()) => Ok(None),
        Err(err @ (ToolError::Precondition(_) | ToolError::NotFound(_))) => {
            Ok(Some((stage, Stop::from_tool_error(err))))
        }
        Err(err) => Err(Stop::from_tool_error(err)),
    }
}

/// Longest untrusted tool name or call id, in characters, written to audit entries and spans.
pub const MAX_LABEL_CHARS: usize = 128;

/// `s` cut to [`MAX_LABEL_CHARS`] characters.
fn capped(s: &str) -> String {
    match s.char_indices().nth(MAX_LABEL_CHARS) {
        Some((end, _)) => s[..end].to_owned(),
        None => s.to_owned(),
    }
}

/// The model's tool name is not echoed back.
fn unknown_tool() -> Stop {
    Stop::new(
        Status::UnknownTool,
        "unknown_tool",
        "no tool of that name is available",
    )
}
