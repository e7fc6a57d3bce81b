//! Building a [`Dispatcher`]: the state first, then tools and options; [`DispatcherBuilder::build`]
//! compiles every schema once and checks that every tool and field name an option mentions is
//! registered.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::Dispatcher;
use crate::audit::{AuditAnchor, AuditSink, CheckpointPolicy, CheckpointSink, MemoryAuditSink};
use crate::clock::{Clock, SystemClock};
use crate::custom::{CustomStage, CustomStages, StagePoint};
use crate::erased::ErasedTool;
use crate::erased::ToolHandle;
use crate::keys::HostKeys;
use crate::provenance::ProvenanceStore;
use crate::sanitize::Sanitizer;
use crate::spec::Risk;
use crate::stage;
use crate::stage::authorize::{AllowAuthenticated, Authorizer};
use crate::stage::core::{Core, Registered, Stores};
use crate::stage::policy::RiskPolicy;
use crate::stage::principal::PrincipalRefresher;
use crate::store::deadline::Deadlined;
use crate::store::{
    ApprovalStore, DurableBackend, IdempotencyStore, MemoryStore, OperationStore, STORE_DEADLINE,
    SessionLedger,
};
use crate::tool::Tool;

mod names;

/// Why a dispatcher could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// Two tools share a name.
    #[error("tool `{0}` is registered twice")]
    DuplicateTool(String),
    /// A tool's schema does not compile.
    #[error("tool `{tool}` has an invalid {which} schema: {source}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// `input` or `output`.
        which: &'static str,
        /// What the schema compiler refused, with the schema location it names.
        source: SchemaError,
    },
    /// A tool's declaration is unsafe (e.g. a high-risk state-changing tool without idempotency).
    #[error("tool `{tool}` is declared unsafely: {message}")]
    UnsafeDeclaration {
        /// The tool.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// An option names a tool that is not registered (a typo would silently disable the rule).
    #[error("{option} names tool `{tool}`, which is not registered{}", names::hint(.nearest))]
    UnknownTool {
        /// The builder option (`RiskPolicy`, `Sanitizer`, `idempotency_ttl`, `Authorizer`).
        option: &'static str,
        /// The name given.
        tool: String,
        /// The registered tool name nearest to it, if one is near.
        nearest: Option<String>,
    },
    /// An option names a field that the tool does not have.
    #[error("{option} names field `{field}` of tool `{tool}`, which has no such field{}", names::hint(.nearest))]
    UnknownField {
        /// The builder option.
        option: &'static str,
        /// The tool.
        tool: String,
        /// The field name given.
        field: String,
        /// The tool's field nearest to it, if one is near.
        nearest: Option<String>,
    },
    /// Tools declare `sensitive` fields but the dispatcher has no host keys: a plain digest of
    /// their arguments would let anyone reading a store or the audit recover the values by trying
    /// candidates.
    #[error(
        "tool(s) {} declare sensitive fields but no host keys were configured; call \
         `.host_keys(HostKeys::new(id, secret)?)` with a secret shared by all replicas \
         (`HostKeys::ephemeral()` in tests)",
        .tools.join(", ")
    )]
    MissingHostKeys {
        /// The tools with `sensitive` fields.
        tools: Vec<String>,
    },
    /// The audit trail cannot be set up as configured: audit checkpoints without host keys or
    /// with a sink the host built itself, or the SQLite audit table could not be opened.
    #[error("audit trail: {0}")]
    Audit(String),
    /// A durable audit trail (SQLite, PostgreSQL) without host keys and checkpoints: deleting
    /// its newest entries, or rewriting one and re-sealing the chain, would still verify.
    #[error(
        "the audit trail is kept in a database but not anchored: without host keys and \
         checkpoints, deleting its newest entries or rewriting one and re-sealing the chain \
         goes unnoticed; call `.host_keys(HostKeys::from_file(path)?)` (make the file with \
         `toolguard keys generate FILE`) and `.audit_checkpoints(Arc::new(FileCheckpoints::new(\
         path)), CheckpointPolicy::default())`, or opt out by name with \
         `.unanchored_audit(\"why\")`"
    )]
    UnanchoredAudit,
    /// A detection option has a value that would disable or break its rule (a zero window, a
    /// band above `approval_over`, ...).
    #[error(transparent)]
    Detection(#[from] crate::detect::DetectionConfigError),
}

/// The schema compiler's error, kept whole as the source of [`BuildError::InvalidSchema`].
///
/// Two values compare equal when they print the same message.
#[derive(Debug, Clone)]
pub struct SchemaError(Arc<jsonschema::ValidationError<'static>>);

impl SchemaError {
    /// The JSON pointer, inside the schema, of the keyword the compiler refused.
    #[must_use]
    pub fn schema_path(&self) -> String {
        self.0.schema_path().to_string()
    }
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at `{}`)", self.0, self.0.schema_path())
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl PartialEq for SchemaError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for SchemaError {}

/// Default maximum age of a principal's authentication.
pub const DEFAULT_PRINCIPAL_MAX_AGE: Duration = Duration::from_secs(12 * 3600);

/// Builds a [`Dispatcher`]; see [`Dispatcher::builder`].
#[must_use = "a builder does nothing until `build()` is called"]
pub struct DispatcherBuilder<S: Send + Sync + 'static> {
    state: Arc<S>,
    tools: Vec<Arc<dyn ErasedTool<S>>>,
    authorizer: Box<dyn Authorizer>,
    refresher: Option<Box<dyn PrincipalRefresher>>,
    notifiers: Vec<Arc<dyn crate::notify::ApprovalNotifier>>,
    sanitizer: Sanitizer,
    audit: Option<Arc<dyn AuditSink>>,
    clock: Arc<dyn Clock>,
    principal_max_age: Duration,
    policy: RiskPolicy,
    idempotency: Option<Arc<dyn IdempotencyStore>>,
    approvals: Option<Arc<dyn ApprovalStore>>,
    ledger: Option<Arc<dyn SessionLedger>>,
    operations: Option<Arc<dyn OperationStore>>,
    provenance: Option<Arc<dyn ProvenanceStore>>,
    store_deadline: Duration,
    idempotency_ttl: BTreeMap<String, Duration>,
    fail_open_read_only: bool,
    custom: CustomStages,
    keys: Option<Arc<HostKeys>>,
    /// The durable backend that also keeps the audit trail ([`DispatcherBuilder::durable`]);
    /// its sink is opened at build, anchored when host keys are given.
    durable_audit: Option<Arc<dyn DurableBackend>>,
    /// Why the host keeps a durable trail without an anchor ([`DispatcherBuilder::unanchored_audit`]).
    unanchored: Option<String>,
    checkpoints: Option<(Arc<dyn CheckpointSink>, CheckpointPolicy)>,
    detection: Option<crate::detect::Detection>,
}

impl<S: Send + Sync + 'static> std::fmt::Debug for DispatcherBuilder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tools: Vec<&str> = self.tools.iter().map(|t| t.spec().name.as_str()).collect();
        f.debug_struct("DispatcherBuilder")
            .field("tools", &tools)
            .finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// A builder over the application state `state` the tools share (a database pool, a
    /// ledger, ...). Stateless hosts write `Dispatcher::builder(())`.
    pub fn builder(state: S) -> DispatcherBuilder<S> {
        Self::builder_arc(Arc::new(state))
    }

    /// A builder over shared application state the host keeps a handle to.
    pub fn builder_arc(state: Arc<S>) -> DispatcherBuilder<S> {
        DispatcherBuilder {
            state,
            tools: Vec::new(),
            authorizer: Box::new(AllowAuthenticated),
            refresher: None,
            notifiers: Vec::new(),
            sanitizer: Sanitizer::default(),
            audit: None,
            clock: Arc::new(SystemClock),
            principal_max_age: DEFAULT_PRINCIPAL_MAX_AGE,
            policy: RiskPolicy::default(),
            idempotency: None,
            approvals: None,
            ledger: None,
            operations: None,
            provenance: None,
            store_deadline: STORE_DEADLINE,
            idempotency_ttl: BTreeMap::new(),
            fail_open_read_only: false,
            custom: CustomStages::default(),
            keys: None,
            durable_audit: None,
            unanchored: None,
            checkpoints: None,
            detection: None,
        }
    }
}

impl<S: Send + Sync + 'static> DispatcherBuilder<S> {
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

    /// Looks the requester up again before an approved action executes (a closure
    /// `Fn(&Principal) -> Option<Principal>`, or an async [`PrincipalRefresher`]).
    pub fn principal_refresher(mut self, refresher: impl PrincipalRefresher) -> Self {
        self.refresher = Some(Box::new(refresher));
        self
    }

    /// Adds a notifier told when approval requests open, progress, are decided or expire.
    /// Several notifiers may be added; each gets every event.
    pub fn notifier(mut self, notifier: impl crate::notify::ApprovalNotifier) -> Self {
        self.notifiers.push(Arc::new(notifier));
        self
    }

    /// Sets the sanitizer rules.
    pub fn sanitizer(mut self, sanitizer: Sanitizer) -> Self {
        self.sanitizer = sanitizer;
        self
    }

    /// Sets the argument limits (size, depth, keys, string length) every call meets before
    /// parsing, whichever adapter delivered it; see [`RawArguments::check_limits`](crate::RawArguments::check_limits). Call after
    /// [`DispatcherBuilder::sanitizer`], which brings its own limits.
    pub fn argument_limits(mut self, limits: crate::Limits) -> Self {
        self.sanitizer = self.sanitizer.argument_limits(limits);
        self
    }

    /// Sets the audit sink (default: an in-memory sink, sealed under the host keys when
    /// [`host_keys`](Self::host_keys) are given). A sink the host builds itself is anchored by the
    /// host (`MemoryAuditSink::with_anchor`, `SqliteAuditSink::open_anchored`,
    /// `PgAuditSink::connect_anchored`).
    pub fn audit(mut self, sink: impl AuditSink) -> Self {
        self.audit = Some(Arc::new(sink));
        self.durable_audit = None;
        self
    }

    /// Writes signed checkpoints of the audit chain head to `sink` as `policy` says, so that
    /// removing the newest entries from the trail is detected
    /// ([`AuditQuery::verify_against`](crate::audit::AuditQuery::verify_against)). Applies to the
    /// built-in sinks the builder opens (the default in-memory sink and
    /// `toolguard-sqlite`'s `SqliteBuilderExt::sqlite`) and needs [`host_keys`](Self::host_keys); [`build`](Self::build)
    /// refuses it otherwise.
    pub fn audit_checkpoints(
        mut self,
        sink: Arc<dyn CheckpointSink>,
        policy: CheckpointPolicy,
    ) -> Self {
        self.checkpoints = Some((sink, policy));
        self
    }

    /// Accepts a durable audit trail (SQLite, PostgreSQL) without host keys or checkpoints, for
    /// the reason given (a development database, a trail anchored by other means). Without this
    /// opt-out [`build`](Self::build) refuses such a trail ([`BuildError::UnanchoredAudit`]). The
    /// opt-out shows where the trail is checked: its entries carry plain SHA-256 links, and
    /// `AuditQuery::verify_against` reports it unanchored ([`VerifyReport::anchored`](crate::audit::VerifyReport::anchored)
    /// is `false`); the build logs the reason as a warning.
    pub fn unanchored_audit(mut self, reason: impl Into<String>) -> Self {
        self.unanchored = Some(reason.into());
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

    /// Adds a custom stage at `point` (see [`crate::custom`]). Stages at one point run
    /// in the order they were added.
    pub fn custom_stage(mut self, point: StagePoint, stage: impl CustomStage) -> Self {
        self.custom.push(point, Arc::new(stage));
        self
    }

    /// Uses one backend for every store (idempotency, approvals, ledger, operations; and the
    /// provenance sources, when the ledger keeps them, see [`SessionLedger::provenance`]).
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

    /// Keeps every store and the audit trail in one durable backend (SQLite's file, a PostgreSQL
    /// database): the stores as [`store`](Self::store) does, and the audit sink opened from the
    /// backend when the dispatcher is built. With [`host_keys`](Self::host_keys) (given before or
    /// after this call) the trail is sealed under them and writes the
    /// [`audit_checkpoints`](Self::audit_checkpoints), if any.
    pub fn durable<B: DurableBackend>(self, backend: Arc<B>) -> Self {
        let mut builder = self.store(backend.clone());
        builder.audit = None;
        builder.durable_audit = Some(backend);
        builder
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

    /// Sets the store of the sessions' provenance sources alone (see [`crate::provenance`]).
    /// Replicas that share sessions must share it, as they share the session ledger. Without it
    /// the session ledger's own ([`SessionLedger::provenance`]: memory, SQLite, PostgreSQL and
    /// Redis keep sources) is used, else an in-memory store of this process.
    pub fn provenance_store(mut self, store: Arc<dyn ProvenanceStore>) -> Self {
        self.provenance = Some(store);
        self
    }

    /// Sets the operation store alone.
    pub fn operation_store(mut self, store: Arc<dyn OperationStore>) -> Self {
        self.operations = Some(store);
        self
    }

    /// Longest wait for one store operation, on every entry point (calls, approval decisions,
    /// status queries, reconciliation); default [`STORE_DEADLINE`]. A store that does not
    /// answer in time counts as unavailable: state-changing calls fail closed.
    pub fn store_deadline(mut self, deadline: Duration) -> Self {
        self.store_deadline = deadline;
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

    /// The host's MAC keys: request digests (idempotency records, approvals, audit entries)
    /// become HMAC-SHA256 under the active key, so a `sensitive` value cannot be recovered from
    /// them by trying candidates. Give every replica the same keys; rotate with
    /// [`HostKeys::accept`] (older digests keep matching while their key is accepted).
    /// Required when any tool has a `sensitive` field.
    pub fn host_keys(mut self, keys: HostKeys) -> Self {
        self.keys = Some(Arc::new(keys));
        self
    }

    /// Feeds every finished call to a detector with these rules (see [`crate::detect`]).
    pub fn detection(mut self, detection: crate::detect::Detection) -> Self {
        self.detection = Some(detection);
        self
    }

    /// Checks the registry and every option's tool and field names, and compiles every schema
    /// once. Refuses tools with `sensitive` fields without [`host_keys`](Self::host_keys).
    pub fn build(self) -> Result<Dispatcher<S>, BuildError> {
        let audit = self.audit_sink()?;
        let (mut tools, order) = register(self.tools)?;
        if self.keys.is_none() {
            let sensitive: Vec<String> = order
                .iter()
                .filter_map(|name| tools.get(name))
                .filter(|r| r.spec().fields.iter().any(|f| f.sensitive))
                .map(|r| r.spec().name.clone())
                .collect();
            if !sensitive.is_empty() {
                return Err(BuildError::MissingHostKeys { tools: sensitive });
            }
        }
        names::check(
            &tools,
            &self.policy,
            &self.sanitizer,
            &*self.authorizer,
            self.idempotency_ttl.keys(),
        )?;
        if let Some(detection) = &self.detection {
            names::check_detection(&tools, detection)?;
        }
        // Each tool's rules and key lifetime, decided here rather than looked up per call.
        for (name, r) in &mut tools {
            if let Some(rules) = self.policy.rules.get(name) {
                r.rules = rules.clone();
            }
            if let Some(ttl) = self.idempotency_ttl.get(name) {
                r.idempotency_ttl = *ttl;
            }
        }
        for name in &order {
            if let Some(r) = tools.get(name) {
                crate::provenance::flow::check_egress(r.spec(), &self.sanitizer).map_err(
                    |message| BuildError::UnsafeDeclaration {
                        tool: name.clone(),
                        message,
                    },
                )?;
            }
        }
        let memory = Arc::new(MemoryStore::new());
        let deadline = self.store_deadline;
        let stores = Stores {
            idempotency: Deadlined::new(
                self.idempotency.unwrap_or_else(|| memory.clone()),
                deadline,
            ),
            approvals: Deadlined::new(self.approvals.unwrap_or_else(|| memory.clone()), deadline),
            provenance: Deadlined::new(
                self.provenance
                    .or_else(|| self.ledger.clone().and_then(|l| l.provenance()))
                    .unwrap_or_else(|| memory.clone()),
                deadline,
            ),
            ledger: Deadlined::new(self.ledger.unwrap_or_else(|| memory.clone()), deadline),
            operations: Deadlined::new(self.operations.unwrap_or(memory), deadline),
        };
        let notifiers =
            crate::notify::Notifiers::new(self.notifiers, audit.clone(), self.clock.clone());
        let core = Core {
            tools,
            order,
            state: self.state,
            authorizer: self.authorizer,
            refresher: self.refresher,
            sanitizer: self.sanitizer,
            audit,
            clock: self.clock,
            principal_max_age: self.principal_max_age,
            policy: self.policy,
            stores,
            fail_open_read_only: self.fail_open_read_only,
            custom: self.custom,
            notifiers,
            value_key: self.keys.as_deref().map_or_else(
                crate::provenance::ValueKey::random,
                crate::provenance::ValueKey::from_host_keys,
            ),
            keys: self.keys,
            detector: self
                .detection
                .map(|config| crate::stage::detect::Detector { config, deadline }),
            unknown_metrics: crate::metrics::ToolKeys::new(crate::metrics::UNKNOWN_TOOL_LABEL),
            flights: Default::default(),
        };
        Ok(Dispatcher {
            core: Arc::new(core),
        })
    }
}

impl<S: Send + Sync + 'static> DispatcherBuilder<S> {
    /// The audit sink to build with: the host's own, else the SQLite store's, else an in-memory
    /// one; the built-in ones anchored under the host keys (with the checkpoints, if any).
    fn audit_sink(&self) -> Result<Arc<dyn AuditSink>, BuildError> {
        let anchor = self.keys.clone().map(|keys| match &self.checkpoints {
            Some((sink, policy)) => AuditAnchor::new(keys).checkpoints(sink.clone(), *policy),
            None => AuditAnchor::new(keys),
        });
        if self.checkpoints.is_some() && anchor.is_none() {
            let message = "audit_checkpoints needs host keys (call `.host_keys(..)`)";
            return Err(BuildError::Audit(message.to_owned()));
        }
        if let Some(audit) = &self.audit {
            if self.checkpoints.is_some() {
                let message = "audit_checkpoints applies to the built-in sinks; give a sink you \
                               build yourself its own AuditAnchor with checkpoints";
                return Err(BuildError::Audit(message.to_owned()));
            }
            self.check_anchored(audit.durable_unanchored())?;
            return Ok(audit.clone());
        }
        if let Some(backend) = &self.durable_audit {
            self.check_anchored(!anchor.as_ref().is_some_and(AuditAnchor::has_checkpoints))?;
            return backend
                .open_audit(anchor)
                .map_err(|err| BuildError::Audit(err.to_string()));
        }
        Ok(match anchor {
            Some(anchor) => Arc::new(MemoryAuditSink::with_anchor(anchor)),
            None => Arc::new(MemoryAuditSink::new()),
        })
    }
}

impl<S: Send + Sync + 'static> DispatcherBuilder<S> {
    /// Refuses a durable trail without an anchor unless the host opted out by name.
    fn check_anchored(&self, durable_unanchored: bool) -> Result<(), BuildError> {
        match (&self.unanchored, durable_unanchored) {
            (_, false) => Ok(()),
            (None, true) => Err(BuildError::UnanchoredAudit),
            (Some(reason), true) => {
                tracing::warn!(
                    reason = reason.as_str(),
                    "the durable audit trail is not anchored (no host keys or checkpoints): \
                     truncation and re-sealing go unnoticed"
                );
                Ok(())
            }
        }
    }
}

type Registry<S> = (BTreeMap<String, Registered<S>>, Vec<String>);

/// Checks each tool's declaration, compiles its schemas and registers it once.
fn register<S: Send + Sync + 'static>(
    list: Vec<Arc<dyn ErasedTool<S>>>,
) -> Result<Registry<S>, BuildError> {
    let mut tools = BTreeMap::new();
    let mut order = Vec::new();
    for tool in list {
        let spec = tool.spec();
        let name = spec.name.clone();
        let unsafe_decl = |message: String| BuildError::UnsafeDeclaration {
            tool: name.clone(),
            message,
        };
        if spec.risk >= Risk::High && !spec.read_only && !spec.idempotent {
            let message = "a high-risk tool that changes state must be idempotent";
            return Err(unsafe_decl(message.to_owned()));
        }
        crate::spec::check_identity_of(spec).map_err(unsafe_decl)?;
        crate::spec::check_output_trust(spec).map_err(unsafe_decl)?;
        let compile = |schema: &Value, which| {
            stage::validate::compile(schema).map_err(|error| BuildError::InvalidSchema {
                tool: name.clone(),
                which,
                source: SchemaError(Arc::new(error)),
            })
        };
        // Before compiling: the compiler follows the same `$ref`s.
        for (schema, which) in [
            (&spec.input_schema, "input"),
            (&spec.output_schema, "output"),
        ] {
            stage::validate::check_branching(schema)
                .map_err(|message| unsafe_decl(format!("its {which} schema: {message}")))?;
        }
        let input = compile(&spec.input_schema, "input")?;
        let output = compile(&spec.output_schema, "output")?;
        if tools.contains_key(&name) {
            return Err(BuildError::DuplicateTool(name));
        }
        order.push(name.clone());
        let registered = Registered {
            name: tool
                .static_name()
                .filter(|shared| *shared == name)
                .unwrap_or_else(|| name.as_str().into()),
            metrics: crate::metrics::ToolKeys::new(&name),
            settled: stage::core::settled_fields(spec),
            rules: crate::risk::ToolRules::default(),
            idempotency_ttl: crate::store::DEFAULT_IDEMPOTENCY_TTL,
            tool,
            input,
            output,
        };
        tools.insert(name, registered);
    }
    Ok((tools, order))
}
