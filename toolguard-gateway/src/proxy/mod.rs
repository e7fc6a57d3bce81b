//! `toolguard mcp-proxy`: the whole guard pipeline in front of an existing MCP server.
//!
//! The proxy starts the upstream server as a child process and speaks MCP to it over its stdio,
//! or reaches it over Streamable HTTP ([`UpstreamTarget`]; rmcp's client either way). It serves
//! MCP itself on its own stdio (or over Streamable HTTP, [`http`]): `tools/list` answers the upstream's
//! tools the policy file exposes, as the upstream describes them with their input schemas
//! tightened by the declarations ([`toolguard_pipeline::declare`]; `$schema` kept); every
//! `tools/call` runs through a [`Dispatcher`] (all stages, stores and audit trail in SQLite)
//! before it is forwarded, and an `ok` result goes back exactly as the upstream sent it.
//!
//! Everything else of the stable MCP protocol passes through in both directions ([`GuardedServer`],
//! the relay): resources and prompts as far as `[resources]` / `[prompts]` expose them (read
//! contents of an untrusted upstream become provenance sources), completion, logging,
//! subscriptions, progress and cancellation mapped to the request they belong to, and the
//! upstream's sampling, elicitation and roots requests (sampling and elicitation as
//! `[sampling]` / `[elicitation]` allow; `approval` holds them for a reviewer, see [`reviewer`]).
//!
//! Calls run as the policy file's `[principal]`. Approvals wait in the SQLite store; reviewers
//! decide them over the local reviewer endpoint ([`reviewer`]), authenticated by the bearer tokens
//! of `[[tokens]]`. The policy file is reloaded when it changes (polled) and on `SIGHUP`: a reload
//! builds a new dispatcher on the same stores with the new policy revision, so approvals bound to
//! the old revision are refused when decided. When a reload, or the upstream's own
//! `notifications/tools/list_changed`, changes the tools the proxy exposes, connected clients are
//! sent `notifications/tools/list_changed`.
//!
//! ```text
//! toolguard mcp-proxy --policy fs.toml -- npx @modelcontextprotocol/server-filesystem /srv/data
//! toolguard mcp-proxy --policy everything.toml --upstream-url http://127.0.0.1:3001/mcp
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::server::{McpServeError, McpServer};
use toolguard_pipeline::HostKeys;
use toolguard_pipeline::ToolHandle;
use toolguard_pipeline::audit::{AuditAnchor, CheckpointPolicy, FileCheckpoints};
use toolguard_pipeline::call::Principal;
use toolguard_pipeline::dispatcher::{BuildError, Dispatcher};
use toolguard_pipeline::keys::HOST_KEYS_ENV;
use toolguard_pipeline::spec::ToolSpec;
use toolguard_pipeline::store::StoreError;
use toolguard_policy::{Offered, Policy, PolicyError};
use toolguard_sqlite::SqliteAuditSink;
use toolguard_sqlite::{Durability, SqliteStore};

mod call_results;
mod clients;
mod handler;
#[cfg(feature = "http")]
#[cfg_attr(docsrs, doc(cfg(feature = "http")))]
pub mod http;
mod relay;
mod reload;
pub mod reviewer;
mod sessions;
mod upstream;
mod user_input;

pub use handler::{GuardedServer, OUTCOME_META};
pub use sessions::{MAX_SESSION_LEN, SESSION_META};
pub use upstream::{STABLE, Upstream, UpstreamTarget};
pub use user_input::{MAX_USER_INPUT, USER_INPUT_META};

/// Why the proxy could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The policy file is invalid.
    #[error(transparent)]
    Policy(#[from] PolicyError),
    /// The upstream server could not be started or answered wrongly.
    #[error("upstream MCP server: {0}")]
    Upstream(String),
    /// The SQLite store could not be opened.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The dispatcher refused the declared tools.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Serving MCP failed.
    #[error(transparent)]
    Serve(#[from] McpServeError),
    /// The policy file names no caller.
    #[error("{0}: a stdio proxy runs calls as `[principal]` (tenant, subject, roles): add it")]
    NoPrincipal(String),
    /// The reviewer endpoint could not listen.
    #[error("reviewer endpoint: {0}")]
    Reviewer(String),
    /// No host keys: the proxy does not run with unsealed approvals and an unanchored trail.
    #[error(
        "{0}: the proxy needs host keys (approvals are sealed and the audit trail anchored with \
         them): make a key file with `toolguard keys generate toolguard.keys`, then name it in \
         the policy file (`[keys] file = \"toolguard.keys\"`), pass `--keys FILE`, or set the \
         environment variable {HOST_KEYS_ENV}"
    )]
    NoHostKeys(String),
}

/// Verifies a bearer token of a Streamable HTTP caller and names its principal (the host's own
/// verifier: JWT, introspection, ...). Without one, the policy file's `[[tokens]]` are used.
pub trait TokenVerifier: Send + Sync + 'static {
    /// The principal `token` stands for, `None` when it is not valid.
    fn verify(&self, token: &str, session: &str) -> Option<Principal>;
}

/// The policy in force and the dispatcher built from it.
pub struct Current {
    /// The policy.
    pub policy: Policy,
    /// The dispatcher (stores shared by every revision).
    pub dispatcher: Dispatcher<()>,
    /// The MCP view of the dispatcher for the local principal.
    pub server: McpServer<()>,
    /// The tools `tools/list` answers: the upstream's own descriptions, input schemas tightened
    /// by the policy.
    pub tools: Arc<Vec<rmcp::model::Tool>>,
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Current")
            .field("dispatcher", &self.dispatcher)
            .finish_non_exhaustive()
    }
}

/// The proxy's state: the upstream, the stores and the policy in force.
pub struct Guard {
    file: PathBuf,
    upstream: Upstream,
    store: Arc<SqliteStore>,
    audit: Arc<SqliteAuditSink>,
    keys: HostKeys,
    session: String,
    sessions: sessions::Sessions,
    user_inputs: user_input::UserInputs,
    current: RwLock<Arc<Current>>,
    verifier: Option<Arc<dyn TokenVerifier>>,
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("file", &self.file)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// Registers `text`, the user's current turn, as trusted input in `principal`'s session,
    /// once per distinct turn (see [`USER_INPUT_META`]).
    pub(crate) async fn user_turn(
        &self,
        current: &Current,
        principal: &toolguard_pipeline::Principal,
        text: &str,
    ) -> Result<(), toolguard_pipeline::store::StoreError> {
        if !self.user_inputs.is_new(&principal.session_id, text) {
            return Ok(());
        }
        current.dispatcher.add_trusted_input(principal, text).await
    }

    /// Loads the policy file, starts the upstream command and opens the store.
    pub async fn start(
        file: impl AsRef<Path>,
        command: &[String],
    ) -> Result<Arc<Guard>, ProxyError> {
        Self::start_with_verifier(file, command, None).await
    }

    /// [`Guard::start`] with the host's bearer-token verifier for Streamable HTTP callers.
    pub async fn start_with_verifier(
        file: impl AsRef<Path>,
        command: &[String],
        verifier: Option<Arc<dyn TokenVerifier>>,
    ) -> Result<Arc<Guard>, ProxyError> {
        let target = UpstreamTarget::Command(command.to_vec());
        Self::start_with(file, &target, verifier).await
    }

    /// Loads the policy file, connects to the upstream at `target` (a command or a Streamable
    /// HTTP URL) and opens the store; `verifier` checks Streamable HTTP callers' bearer tokens
    /// (`None`: the policy file's `[[tokens]]`). The host keys are those `[keys]` names, else
    /// those of the environment variable [`HOST_KEYS_ENV`]; without keys the proxy does not start.
    pub async fn start_with(
        file: impl AsRef<Path>,
        target: &UpstreamTarget,
        verifier: Option<Arc<dyn TokenVerifier>>,
    ) -> Result<Arc<Guard>, ProxyError> {
        Self::start_with_keys(file, target, verifier, None).await
    }

    /// [`Guard::start_with`] with host keys given by the host (`--keys FILE`), which take
    /// precedence over `[keys]` and the environment. Approvals are sealed and the audit trail is
    /// sealed under the keys, with checkpoints appended to the policy's checkpoints file.
    pub async fn start_with_keys(
        file: impl AsRef<Path>,
        target: &UpstreamTarget,
        verifier: Option<Arc<dyn TokenVerifier>>,
        keys: Option<HostKeys>,
    ) -> Result<Arc<Guard>, ProxyError> {
        let file = file.as_ref().to_path_buf();
        let policy = Policy::load(&file)?;
        let keys = match keys {
            Some(keys) => keys,
            None => proxy_keys(&policy)?,
        };
        let upstream = Upstream::open_with(target, &policy, Arc::default()).await?;
        let store = Arc::new(SqliteStore::open_with(
            policy.store_path(),
            Durability::Full,
        )?);
        let checkpoints = Arc::new(FileCheckpoints::new(policy.checkpoints_path()));
        let anchor = AuditAnchor::new(Arc::new(keys.clone())).checkpoints(checkpoints, CHECKPOINTS);
        let audit = Arc::new(store.audit_sink_anchored(anchor)?);
        let session = format!("proxy-{}", uuid::Uuid::new_v4().simple());
        let (dispatcher, server, tools) =
            build(&policy, &upstream, &store, &audit, &keys, &session).await?;
        Ok(Arc::new(Guard {
            file,
            upstream,
            store,
            audit,
            keys,
            session,
            sessions: sessions::Sessions::default(),
            user_inputs: user_input::UserInputs::default(),
            current: RwLock::new(Arc::new(Current {
                policy,
                dispatcher,
                server,
                tools,
            })),
            verifier,
        }))
    }

    /// The policy and dispatcher in force.
    pub fn current(&self) -> Arc<Current> {
        match self.current.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The session id of the local principal (one per proxy process): the provenance session
    /// of a stdio client that names none in `_meta` ([`SESSION_META`]) until it is idle for
    /// `[proxy] session_idle`.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The principal of a stdio request: the policy file's `[principal]`, in the provenance
    /// session of the client's session id (`client`, from [`SESSION_META`]) as the idle time
    /// of `[proxy] session_idle` renews it.
    pub(crate) fn local_principal(&self, client: Option<&str>) -> Option<Principal> {
        let current = self.current();
        let mut principal = current.policy.local_principal(&self.session)?;
        let idle = current
            .policy
            .proxy
            .session_idle
            .map(toolguard_policy::Span::duration);
        let now = std::time::Instant::now();
        let session = self
            .sessions
            .resolve(&principal.session_id, client, idle, now);
        principal.session_id = session.as_str().into();
        Some(principal)
    }

    /// The principal of a bearer token: the host's verifier, else the policy's `[[tokens]]`.
    pub fn token_principal(&self, token: &str, session: &str) -> Option<Principal> {
        match &self.verifier {
            Some(v) => v.verify(token, session),
            None => self.current().policy.token_principal(token, session),
        }
    }

    /// The policy file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Reads the policy file again and, when it is valid, puts it in force; returns the new
    /// revision. On error the policy in force stays.
    pub async fn reload(&self) -> Result<u32, ProxyError> {
        let policy = Policy::load(&self.file)?;
        self.install(policy).await
    }

    /// Lists the upstream's tools again and rebuilds the dispatcher for the policy in force
    /// (after the upstream announced a change); returns the revision.
    pub async fn refresh_upstream_tools(&self) -> Result<u32, ProxyError> {
        self.install(self.current().policy.clone()).await
    }

    /// Builds a dispatcher for `policy` over the upstream's current tools and puts it in force;
    /// connected clients are notified when the exposed tools changed.
    async fn install(&self, policy: Policy) -> Result<u32, ProxyError> {
        let (dispatcher, server, tools) = build(
            &policy,
            &self.upstream,
            &self.store,
            &self.audit,
            &self.keys,
            &self.session,
        )
        .await?;
        let revision = policy.revision();
        self.upstream.relay().set_policy(&policy);
        let next = Arc::new(Current {
            policy,
            dispatcher,
            server,
            tools,
        });
        // What the clients see, or a declaration behind it (an approval, a risk), changed.
        let before = self.current();
        let changed = before.tools != next.tools || before.server.tools() != next.server.tools();
        match self.current.write() {
            Ok(mut c) => *c = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
        if changed {
            let reached = self.upstream.relay().clients.tools_changed().await;
            tracing::info!(reached, "the exposed tools changed: clients notified");
        }
        Ok(revision)
    }

    /// Registers a connected client for `notifications/tools/list_changed`.
    pub fn add_client(&self, peer: rmcp::service::Peer<rmcp::RoleServer>) {
        self.upstream.relay().clients.add(peer);
    }

    /// The upstream.
    pub fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// Serves MCP on stdio until the client disconnects, with reloads and the reviewer endpoint
    /// running beside it.
    pub async fn serve_stdio(self: Arc<Self>) -> Result<(), ProxyError> {
        if self.current().policy.principal.is_none() {
            return Err(ProxyError::NoPrincipal(self.file.display().to_string()));
        }
        self.clone().spawn_side_tasks().await?;
        GuardedServer::new(self.clone()).serve_stdio().await
    }

    /// Starts the reviewer endpoint (when configured) and the policy watcher.
    pub async fn spawn_side_tasks(self: Arc<Self>) -> Result<(), ProxyError> {
        let policy = &self.current().policy;
        if let Some(listen) = policy.proxy.reviewer_listen.clone() {
            let listener = tokio::net::TcpListener::bind(&listen)
                .await
                .map_err(|e| ProxyError::Reviewer(format!("cannot listen on {listen}: {e}")))?;
            tracing::info!(%listen, "reviewer endpoint");
            tokio::spawn(reviewer::serve(listener, self.clone()));
        }
        tokio::spawn(reload::watch(self.clone()));
        tokio::spawn(reload::follow_upstream(self.clone()));
        Ok(())
    }
}

/// How often the proxy anchors its trail: every 64 entries, or after an append once a second has
/// passed since the last checkpoint (each checkpoint is a synced append to the checkpoints
/// file; entries after the newest one are protected against editing, and against removal once
/// the next checkpoint is written).
const CHECKPOINTS: CheckpointPolicy = CheckpointPolicy {
    every_entries: 64,
    every: std::time::Duration::from_secs(1),
};

/// The host keys of the policy's `[keys]`, else of the environment variable [`HOST_KEYS_ENV`].
fn proxy_keys(policy: &Policy) -> Result<HostKeys, ProxyError> {
    if let Some(keys) = policy.host_keys()? {
        return Ok(keys);
    }
    if std::env::var_os(HOST_KEYS_ENV).is_some() {
        return HostKeys::from_env(HOST_KEYS_ENV).map_err(|e| {
            ProxyError::Policy(PolicyError {
                file: policy.file().to_owned(),
                line: None,
                message: e.to_string(),
            })
        });
    }
    Err(ProxyError::NoHostKeys(policy.file().display().to_string()))
}

/// What [`build`] makes: the dispatcher, its MCP view and the tools `tools/list` answers.
type Built = (Dispatcher<()>, McpServer<()>, Arc<Vec<rmcp::model::Tool>>);

/// Builds a dispatcher for `policy` over the upstream's tools and the shared stores.
async fn build(
    policy: &Policy,
    upstream: &Upstream,
    store: &Arc<SqliteStore>,
    audit: &Arc<SqliteAuditSink>,
    keys: &HostKeys,
    session: &str,
) -> Result<Built, ProxyError> {
    // The MCP export only; calls run as the principal the handler picks per request.
    let principal = policy
        .local_principal(session)
        .unwrap_or_else(|| Principal::new("", "", session));
    let listed = upstream.tools().await?;
    let offered: Vec<Offered> = listed.iter().map(upstream::offered).collect();
    let specs = policy.declare_offered(&offered)?;
    let tools = Arc::new(exported(&listed, &specs));
    let sanitizer = policy.sanitizer(&specs);
    let risk = policy.risk_policy(&specs);
    let handles = specs.into_iter().map(|s| ToolHandle::new(upstream.tool(s)));
    let dispatcher = Dispatcher::builder(())
        .tools(handles)
        .authorizer(policy.authorizer())
        .sanitizer(sanitizer)
        .policy(risk)
        .store(store.clone())
        .audit(audit.clone())
        .host_keys(keys.clone())
        .build()?;
    let name = policy
        .proxy
        .name
        .clone()
        .unwrap_or_else(|| "toolguard".to_owned());
    let server = McpServer::new(dispatcher.clone(), principal)?.with_name(name);
    Ok((dispatcher, server, tools))
}

/// The upstream's tools the policy exposes, each as the upstream describes it (title,
/// annotations, output schema, `_meta`, icons) with the declared description and the input
/// schema as the policy tightens it (the upstream's `$schema` kept).
fn exported(listed: &[rmcp::model::Tool], specs: &[ToolSpec]) -> Vec<rmcp::model::Tool> {
    specs
        .iter()
        .filter_map(|spec| {
            let mut tool = listed.iter().find(|t| t.name == spec.name)?.clone();
            let mut schema = spec.input_schema.as_object().cloned().unwrap_or_default();
            if let Some(dialect) = tool.input_schema.get("$schema") {
                schema.insert("$schema".to_owned(), dialect.clone());
            }
            tool.input_schema = Arc::new(schema);
            if !spec.description.is_empty() {
                tool.description = Some(spec.description.clone().into());
            }
            Some(tool)
        })
        .collect()
}
