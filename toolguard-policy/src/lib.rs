//! The policy file (TOML): per tool its [`Declaration`] and who may call it, session limits,
//! approval settings, sanitizer allowlists, the caller of a local proxy, bearer tokens, and a
//! default for tools the file does not name (hidden unless `[default_tool]` is given), and
//! for the MCP gateway the upstream's resources and prompts it exposes and what it does with the
//! upstream's sampling and elicitation requests ([`ExposeSection`], [`UpstreamRequestSection`]).
//!
//! Every error names the file and line and says what to change: unknown keys, wrong types, rule
//! violations ([`toolguard_pipeline::declare::rules`]) and tool names the upstream does not offer.
//!
//! ```toml
//! [proxy]
//! store = "toolguard.sqlite"          # stores and audit trail, relative to this file
//! reviewer_listen = "127.0.0.1:7411"  # reviewer endpoint (approvals)
//! session_idle = "30m"                # a stdio client's session ends after 30 min without a request
//!
//! [principal]                          # the caller of a local stdio proxy
//! tenant = "acme"
//! subject = "agent"
//! roles = ["agent"]
//!
//! [[tokens]]                           # bearer tokens of reviewers (and HTTP clients)
//! token = "reviewer-secret"
//! tenant = "acme"
//! subject = "alice"
//! roles = ["approver"]
//!
//! [flow]                               # provenance: what a session that read untrusted content may do
//! mode = "per_argument"                # judge each argument by its origin ("session": any source holds)
//! destination = "approval"             # an untrusted destination (every risk): allow, approval, deny
//! risk.critical = { destination = "deny", amount = "deny" }
//!
//! [tools.read_text_file]
//! risk = "low"
//! read_only = true
//! roles = ["agent"]
//! fields."/path" = { kind = "path", root = "/srv/data", max_len = 256 }
//!
//! [tools.send_email]
//! risk = "medium"
//! read_only = false
//! egress = "open"
//! fields."/to" = { kind = "email", role = "destination" }
//! fields."/body" = { max_len = 5000, role = "content" }
//! flow_roles = { destination = "deny" }  # this tool's rule per role
//! flow_fields = { "/body" = "allow" }     # this tool's rule per field
//! ```
//!
//! A server someone else wrote is described as it is, without renaming its fields:
//!
//! ```toml
//! [tools.send_money]                   # `send_money(recipient: str, amount: float, subject: str)`
//! risk = "high"
//! read_only = false
//! idempotent = true
//! amount = "/amount"
//! approval_over = 100000               # minor units: 1000.00 USD
//! # A float amount read exactly from the number's text as minor units; more decimals than
//! # the scale are refused (`amount_too_precise`), never rounded.
//! fields."/amount" = { kind = "money", scale = 2, currency = "USD", description = "Dollars." }
//! # Named like the caller's identity, but a transfer's subject line: judged as text.
//! fields."/subject" = { kind = "text", identity = false, max_len = 140, description = "Subject." }
//! fields."/recipient" = { kind = "identifier", max_len = 34, description = "IBAN." }
//!
//! [tools.get_webpage]
//! risk = "medium"
//! read_only = true
//! egress = "allowlisted"
//! # `www.example.com/x` is read (and forwarded) as `https://www.example.com/x`.
//! fields."/url" = { kind = "url", default_scheme = "https", allow_hosts = ["*.example.com"] }
//!
//! [tools.read_file]                    # names in the upstream's own (virtual) drive
//! risk = "low"
//! read_only = true
//! fields."/file_path" = { kind = "path", namespace = "upstream", max_len = 256 }
//!
//! [tools.create_calendar_event]        # data leaves only with participants
//! risk = "medium"
//! read_only = false
//! egress = "open"
//! output = "trusted"
//! fields."/participants" = { kind = "email", max_items = 10, egress = true }
//! ```
//!
//! A field's `egress = "outside"` narrows it further: the call is egress only when the field
//! names an address (an e-mail domain, a URL host) outside `internal`; an invitation among
//! colleagues runs in a session that read untrusted content, one to an outside address waits
//! for a human. A value that cannot be read as an address counts as outside.
//!
//! ```toml
//! fields."/participants" = { kind = "email", max_items = 10, egress = "outside", internal = ["example.com", "*.example.com"] }
//! ```
//!
//! Sessions of a stdio client: provenance is kept per session, and a stdio proxy serves one
//! client for the life of its process. The client names its sessions in a request's `_meta`
//! (`"toolguard/session": "conversation-42"`, 1 to 128 ASCII letters, digits, `.`, `_`, `:`,
//! `-`): each distinct id is a session of its own, so untrusted content read in one
//! conversation never holds the actions of another. `[proxy] session_idle` (`"30m"`, `"2h"`,
//! `"90s"`) ends a session after that long without a request: the next one starts clean.
//!
//! Optional fields (`anyOf: [T, {"type": "null"}]`, `type: [T, "null"]`) get every rule of
//! their inner type; the tightened schema bounds the inner schema and keeps the null branch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use toml::Spanned;

use toolguard_pipeline::access::Authorizer;
use toolguard_pipeline::call::Principal;
use toolguard_pipeline::declare::{Declaration, FieldDecl, KeySource, declare, rules};
use toolguard_pipeline::provenance::{FlowAction, FlowMode, FlowPolicy};
use toolguard_pipeline::risk::{OnExceed, RiskPolicy};
use toolguard_pipeline::sanitize::Sanitizer;
use toolguard_pipeline::spec::{KeyReuse, Risk, ToolSpec};

mod duration;
mod review;
mod surface;

pub use duration::{Span, SpanError};
pub use review::{FieldGuard, Guarding, Refusal, Review, ToolReview, ToolState};
pub use surface::{ExposeSection, UpstreamRequestAction, UpstreamRequestSection, pattern_matches};

/// A policy file error: where (file, line) and what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct PolicyError {
    /// The policy file.
    pub file: PathBuf,
    /// 1-based line, when the error has a place in the file.
    pub line: Option<usize>,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// `[proxy]`: how `toolguard mcp-proxy` runs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ProxySection {
    /// Server name announced to the client (default `toolguard`).
    #[serde(default)]
    pub name: Option<String>,
    /// SQLite file for stores and audit trail, relative to the policy file (default
    /// `toolguard.sqlite` beside it).
    #[serde(default)]
    pub store: Option<String>,
    /// Address of the reviewer endpoint (loopback only), e.g. `127.0.0.1:7411`.
    #[serde(default)]
    pub reviewer_listen: Option<String>,
    /// Seconds between checks of the file for changes (default 1; 0 turns polling off, `SIGHUP`
    /// still reloads).
    #[serde(default)]
    pub reload_poll_secs: Option<u64>,
    /// Name of the environment variable holding the bearer token sent to an upstream reached over
    /// Streamable HTTP (`--upstream-url`); the file names the variable, never the secret.
    #[serde(default)]
    pub upstream_token_env: Option<String>,
    /// Seconds the upstream has to start and list its tools, and to answer each forwarded call
    /// (default 30).
    #[serde(default)]
    pub upstream_timeout_secs: Option<u64>,
    /// Derive the idempotency key of a `tools/call` that carries none in `_meta` from the MCP
    /// session and the JSON-RPC request id (default `false`: such a call of a tool that needs a
    /// key is refused with `missing_idempotency_key`). A transport retry of the same request
    /// (same session, same request id) then replays the first outcome instead of running twice;
    /// a new request id is a new action. A client that reuses a request id in one session for
    /// another call gets `idempotency_conflict`.
    #[serde(default)]
    pub derive_idempotency_key: bool,
    /// A stdio client's provenance session ends after this long without a request
    /// (`"30m"`, `"2h"`): the next request starts a new session, with no untrusted content in
    /// it. Default: a session lasts as long as its client (or its `_meta` session id).
    #[serde(default)]
    pub session_idle: Option<Span>,
}

impl ProxySection {
    /// How long the upstream may take to start, list its tools or answer one call.
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_secs(self.upstream_timeout_secs.unwrap_or(30))
    }
}

/// `[keys]`: where the host keys come from (a key file or an environment variable, never the
/// secret itself), and where audit checkpoints go. See `toolguard::keys::file` for the key file
/// format; `toolguard keys generate FILE` makes one.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeysSection {
    /// The key file, relative to the policy file.
    #[serde(default)]
    pub file: Option<String>,
    /// The environment variable holding the keys (capitals, digits, `_`).
    #[serde(default)]
    pub env: Option<String>,
    /// The file audit checkpoints are appended to, relative to the policy file (default: the
    /// store's file name with `.checkpoints` appended). Keep it where the store's writers cannot
    /// write.
    #[serde(default)]
    pub checkpoints: Option<String>,
}

/// `[principal]`: who calls through a local stdio proxy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct PrincipalSection {
    /// Tenant.
    pub tenant: String,
    /// Subject.
    pub subject: String,
    /// Roles.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Session id (default: one per proxy process).
    #[serde(default)]
    pub session: Option<String>,
}

/// `[[tokens]]`: a static bearer token mapped to a principal (for the demo; hosts plug in their
/// own verifier).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct TokenEntry {
    /// The token (compared in constant time).
    pub token: String,
    /// Tenant.
    pub tenant: String,
    /// Subject.
    pub subject: String,
    /// Roles.
    #[serde(default)]
    pub roles: Vec<String>,
}

/// `[approvals]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ApprovalsSection {
    /// Roles that may approve (default `approver`).
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    /// Seconds an approval request stays open (default 900).
    #[serde(default)]
    pub ttl_secs: Option<u64>,
}

/// A session rate: at most `calls` per `window_secs`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RateDecl {
    /// Calls allowed in the window.
    pub calls: u32,
    /// Window in seconds.
    pub window_secs: u64,
}

/// A cumulative amount limit per session.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LimitDecl {
    /// Total of amounts allowed in the window.
    pub amount: u64,
    /// Window in seconds.
    pub window_secs: u64,
    /// `deny` (default) or `approval`.
    #[serde(default)]
    pub on_exceed: Exceed,
}

/// What exceeding a limit does.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exceed {
    /// `policy_denied`.
    #[default]
    Deny,
    /// The call waits for approval.
    Approval,
}

/// `[tools.NAME]` (and `[default_tool]`): the declaration plus who may call and limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ToolEntry {
    /// See [`Declaration::description`].
    #[serde(default)]
    pub description: Option<String>,
    /// See [`Declaration::risk`].
    pub risk: Risk,
    /// See [`Declaration::read_only`].
    pub read_only: bool,
    /// See [`Declaration::idempotent`].
    #[serde(default)]
    pub idempotent: bool,
    /// See [`Declaration::idempotency_key`].
    #[serde(default)]
    pub idempotency_key: KeySource,
    /// See [`Declaration::key_reuse`].
    #[serde(default)]
    pub key_reuse: KeyReuse,
    /// See [`Declaration::approval`].
    #[serde(default)]
    pub approval: bool,
    /// See [`Declaration::approval_over`].
    #[serde(default)]
    pub approval_over: Option<u64>,
    /// See [`Declaration::approvals`].
    #[serde(default)]
    pub approvals: Option<u8>,
    /// See [`Declaration::amount`].
    #[serde(default)]
    pub amount: Option<String>,
    /// See [`Declaration::timeout_ms`].
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// See [`Declaration::fields`].
    #[serde(default)]
    pub fields: BTreeMap<String, FieldDecl>,
    /// Tenants whose principals may call (default: any).
    #[serde(default)]
    pub tenants: Option<Vec<String>>,
    /// Roles of which the caller needs one (default: any authenticated principal).
    #[serde(default)]
    pub roles: Option<Vec<String>>,
    /// Roles that may approve this tool's calls (default `[approvals] roles`).
    #[serde(default)]
    pub approver_roles: Option<Vec<String>>,
    /// Calls per session and window.
    #[serde(default)]
    pub session_rate: Option<RateDecl>,
    /// Cumulative amount per session and window (needs `amount`).
    #[serde(default)]
    pub session_limit: Option<LimitDecl>,
    /// Largest amount of one call (needs `amount`).
    #[serde(default)]
    pub max_per_call: Option<u64>,
    /// See [`Declaration::output`].
    #[serde(default)]
    pub output: Option<toolguard_pipeline::declare::OutputTrust>,
    /// See [`Declaration::untrusted_fields`]: the places of a forwarded result that hold
    /// content from outside the caller's trust (JSON pointers into the result the proxy
    /// forwards, `*` for any item: `["/content/*/text"]`, `["/structuredContent/messages/*/body"]`).
    #[serde(default)]
    pub untrusted_fields: Vec<String>,
    /// See [`Declaration::egress`].
    #[serde(default)]
    pub egress: toolguard_pipeline::spec::Egress,
    /// What a call of this tool does in a session that has read untrusted content:
    /// `"allow"`, `"approval"` or `"deny"` (default: the flow policy's rules by risk and egress;
    /// see [`toolguard_pipeline::provenance`]).
    #[serde(default)]
    pub flow: Option<FlowDecl>,
    /// In the precise mode (`[flow] mode = "per_argument"`): what a call of this tool does when a
    /// field of a role carries a value from untrusted content.
    #[serde(default)]
    pub flow_roles: RoleFlows,
    /// In the precise mode: what a call of this tool does when the field (a pointer, `"/to"`)
    /// carries a value from untrusted content, whatever its role.
    #[serde(default)]
    pub flow_fields: BTreeMap<String, FlowDecl>,
}

/// The flow rule per field role (`destination = "deny"`), each optional.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleFlows {
    /// A destination (recipient, account, address, URL) from untrusted content.
    #[serde(default)]
    pub destination: Option<FlowDecl>,
    /// An amount from untrusted content.
    #[serde(default)]
    pub amount: Option<FlowDecl>,
    /// Content carrying untrusted values, leaving to a destination that is not trusted.
    #[serde(default)]
    pub content: Option<FlowDecl>,
    /// A selector (id, name, path) from untrusted content.
    #[serde(default)]
    pub selector: Option<FlowDecl>,
}

impl RoleFlows {
    /// The roles given, with their actions.
    pub fn given(&self) -> impl Iterator<Item = (toolguard_pipeline::spec::Role, FlowAction)> {
        use toolguard_pipeline::spec::Role;
        [
            (Role::Destination, self.destination),
            (Role::Amount, self.amount),
            (Role::Content, self.content),
            (Role::Selector, self.selector),
        ]
        .into_iter()
        .filter_map(|(role, decl)| decl.map(|d| (role, d.action())))
    }
}

/// `[flow]`: the flow policy of provenance (see [`toolguard_pipeline::provenance`]).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSection {
    /// `"session"` (the default: any untrusted source in context holds state changes of high
    /// risk and egress) or `"per_argument"` (each argument judged by its origin and role).
    #[serde(default)]
    pub mode: Option<FlowModeDecl>,
    /// A destination from untrusted content, at every risk level.
    #[serde(default)]
    pub destination: Option<FlowDecl>,
    /// An amount from untrusted content, at every risk level.
    #[serde(default)]
    pub amount: Option<FlowDecl>,
    /// Content carrying untrusted values to a destination that is not trusted, at every risk
    /// level.
    #[serde(default)]
    pub content: Option<FlowDecl>,
    /// A selector from untrusted content, at every risk level.
    #[serde(default)]
    pub selector: Option<FlowDecl>,
    /// The rule per role for one risk level (`risk.high = { amount = "deny" }`).
    #[serde(default)]
    pub risk: BTreeMap<Risk, RoleFlows>,
    /// Whether a destination of an egress call or of a high- or critical-risk change must be
    /// one the user named (true in `per_argument` mode; see
    /// [`FlowPolicy::user_destinations`]).
    #[serde(default)]
    pub user_destinations: Option<bool>,
    /// Whether content of any state change that copies a whole value or carries an address from
    /// untrusted content is judged by the `content` rule (true in `per_argument` mode; see
    /// [`FlowPolicy::copied_content`]).
    #[serde(default)]
    pub copied_content: Option<bool>,
}

/// `[flow] mode = "..."`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowModeDecl {
    /// [`FlowMode::Session`].
    Session,
    /// [`FlowMode::PerArgument`].
    PerArgument,
}

impl FlowSection {
    /// The flow policy it describes (before the tools' own rules).
    pub fn policy(&self) -> FlowPolicy {
        // The per-argument mode starts from its own defaults, as `FlowPolicy::per_argument()`.
        let mut flow = match self.mode {
            Some(FlowModeDecl::PerArgument) => FlowPolicy::per_argument(),
            _ => FlowPolicy::default().mode(FlowMode::Session),
        };
        if let Some(on) = self.user_destinations {
            flow = flow.user_destinations(on);
        }
        if let Some(on) = self.copied_content {
            flow = flow.copied_content(on);
        }
        let every = RoleFlows {
            destination: self.destination,
            amount: self.amount,
            content: self.content,
            selector: self.selector,
        };
        for (role, action) in every.given() {
            flow = flow.every_risk_role(role, action);
        }
        for (risk, roles) in &self.risk {
            for (role, action) in roles.given() {
                flow = flow.role(*risk, role, action);
            }
        }
        flow
    }
}

/// `flow = "..."` of a tool in the policy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowDecl {
    /// [`FlowAction::Allow`].
    Allow,
    /// [`FlowAction::RequireApproval`].
    Approval,
    /// [`FlowAction::Deny`].
    Deny,
}

impl FlowDecl {
    /// The flow action it names.
    pub fn action(self) -> toolguard_pipeline::FlowAction {
        match self {
            FlowDecl::Allow => toolguard_pipeline::FlowAction::Allow,
            FlowDecl::Approval => toolguard_pipeline::FlowAction::RequireApproval,
            FlowDecl::Deny => toolguard_pipeline::FlowAction::Deny,
        }
    }
}

impl ToolEntry {
    /// The declaration part.
    pub fn declaration(&self) -> Declaration {
        Declaration {
            description: self.description.clone(),
            risk: self.risk,
            read_only: self.read_only,
            idempotent: self.idempotent,
            idempotency_key: self.idempotency_key.clone(),
            key_reuse: self.key_reuse,
            approval: self.approval,
            approval_over: self.approval_over,
            approvals: self.approvals,
            amount: self.amount.clone(),
            timeout_ms: self.timeout_ms,
            fields: self.fields.clone(),
            output: self.output,
            untrusted_fields: self.untrusted_fields.clone(),
            egress: self.egress,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    proxy: ProxySection,
    #[serde(default)]
    principal: Option<PrincipalSection>,
    #[serde(default)]
    tokens: Vec<TokenEntry>,
    #[serde(default)]
    approvals: ApprovalsSection,
    #[serde(default)]
    keys: KeysSection,
    #[serde(default)]
    tools: BTreeMap<Spanned<String>, Spanned<ToolEntry>>,
    #[serde(default)]
    default_tool: Option<Spanned<ToolEntry>>,
    #[serde(default)]
    flow: FlowSection,
    #[serde(default)]
    resources: ExposeSection,
    #[serde(default)]
    prompts: ExposeSection,
    #[serde(default)]
    sampling: UpstreamRequestSection,
    #[serde(default)]
    elicitation: UpstreamRequestSection,
}

/// A loaded, checked policy file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Policy {
    file: PathBuf,
    source: String,
    revision: u32,
    /// `[proxy]`.
    pub proxy: ProxySection,
    /// `[principal]`.
    pub principal: Option<PrincipalSection>,
    /// `[[tokens]]`.
    pub tokens: Vec<TokenEntry>,
    /// `[approvals]`.
    pub approvals: ApprovalsSection,
    /// `[keys]`.
    pub keys: KeysSection,
    /// `[flow]`.
    pub flow: FlowSection,
    tools: BTreeMap<String, (usize, ToolEntry)>,
    default_tool: Option<(usize, ToolEntry)>,
    /// `[resources]`: the upstream's resources exposed (by URI pattern), none by default.
    pub resources: ExposeSection,
    /// `[prompts]`: the upstream's prompts exposed (by name pattern), none by default.
    pub prompts: ExposeSection,
    /// `[sampling]`: the upstream's `sampling/createMessage` requests (denied by default).
    pub sampling: UpstreamRequestSection,
    /// `[elicitation]`: the upstream's `elicitation/create` requests (denied by default).
    pub elicitation: UpstreamRequestSection,
}

/// One tool an upstream server offers: name, description and input schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Offered {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// JSON Schema of the arguments.
    pub input_schema: Value,
}

/// The text of the policy file at `file`, or the error naming it.
fn read_source(file: &Path) -> Result<(PathBuf, String), PolicyError> {
    let source = std::fs::read_to_string(file).map_err(|e| PolicyError {
        file: file.to_path_buf(),
        line: None,
        message: format!("cannot read the policy file: {e}"),
    })?;
    Ok((file.to_path_buf(), source))
}

impl Policy {
    /// Reads and checks the policy file at `file`.
    pub fn load(file: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let (file, source) = read_source(file.as_ref())?;
        Self::parse(file, source)
    }

    /// Checks `source` as the policy file `file` (used for error messages and relative paths).
    pub fn parse(file: impl Into<PathBuf>, source: String) -> Result<Policy, PolicyError> {
        let policy = Self::parse_sections(file.into(), source)?;
        policy.check_tools()?;
        Ok(policy)
    }

    /// Reads the policy file at `file` like [`load`](Policy::load), except that the tools'
    /// declarations are not checked: [`review_offered`](Policy::review_offered) then judges each
    /// against the upstream's schema and lists every rule each breaks, where `load` stops at
    /// the first. Never serve with a policy read this way.
    pub fn load_for_review(file: impl AsRef<Path>) -> Result<Policy, PolicyError> {
        let (file, source) = read_source(file.as_ref())?;
        Self::parse_sections(file, source)
    }

    /// The file read and every check but the tools' declarations.
    fn parse_sections(file: PathBuf, source: String) -> Result<Policy, PolicyError> {
        let raw: Raw = toml::from_str(&source).map_err(|e| PolicyError {
            line: e.span().map(|s| line_of(&source, s.start)),
            file: file.clone(),
            message: e.message().trim().to_owned(),
        })?;
        let line = |at: usize| line_of(&source, at);
        let tools = raw
            .tools
            .into_iter()
            .map(|(k, v)| {
                let at = line(k.span().start);
                (k.into_inner(), (at, v.into_inner()))
            })
            .collect();
        let default_tool = raw
            .default_tool
            .map(|d| (line(d.span().start), d.into_inner()));
        let digest = Sha256::digest(source.as_bytes());
        let policy = Policy {
            revision: u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]).max(1),
            file,
            source,
            proxy: raw.proxy,
            principal: raw.principal,
            tokens: raw.tokens,
            approvals: raw.approvals,
            keys: raw.keys,
            flow: raw.flow,
            tools,
            default_tool,
            resources: raw.resources,
            prompts: raw.prompts,
            sampling: raw.sampling,
            elicitation: raw.elicitation,
        };
        policy.check()?;
        Ok(policy)
    }

    fn error(&self, line: Option<usize>, message: impl Into<String>) -> PolicyError {
        PolicyError {
            file: self.file.clone(),
            line,
            message: message.into(),
        }
    }

    /// The checks of the tools' entries that need no upstream schema.
    fn check_tools(&self) -> Result<(), PolicyError> {
        let entries = self
            .tools
            .iter()
            .map(|(n, (l, e))| (n.as_str(), *l, e))
            .chain(
                self.default_tool
                    .iter()
                    .map(|(l, e)| ("default_tool", *l, e)),
            );
        for (name, line, entry) in entries {
            check_entry(name, entry).map_err(|m| self.error(Some(line), m))?;
        }
        Ok(())
    }

    /// The checks of everything but the tools' entries that need no upstream schema.
    fn check(&self) -> Result<(), PolicyError> {
        if let Some(listen) = &self.proxy.reviewer_listen {
            let loopback = listen
                .parse::<std::net::SocketAddr>()
                .is_ok_and(|a| a.ip().is_loopback());
            if !loopback {
                let at = self.key_line("reviewer_listen");
                return Err(self.error(at, format!("`reviewer_listen = \"{listen}\"` must be a loopback address with a port, e.g. `127.0.0.1:7411`")));
            }
        }
        self.check_upstream_keys()?;
        for (section, s) in [("resources", &self.resources), ("prompts", &self.prompts)] {
            s.check(section)
                .map_err(|m| self.error(self.key_line(&format!("[{section}]")), m))?;
        }
        for (i, t) in self.tokens.iter().enumerate() {
            if t.token.len() < 16 {
                let at = self
                    .source
                    .match_indices("[[tokens]]")
                    .nth(i)
                    .map(|(p, _)| line_of(&self.source, p));
                return Err(self.error(at, "a token needs at least 16 characters: generate one with `openssl rand -hex 32`"));
            }
        }
        Ok(())
    }

    /// `upstream_token_env` and `[keys] env` are variable names (not a secret pasted in their
    /// place), `[keys]` names one source, and `upstream_timeout_secs` is not 0.
    fn check_upstream_keys(&self) -> Result<(), PolicyError> {
        if let Some(var) = &self.keys.env
            && !is_env_name(var)
        {
            return Err(self.error(
                self.key_line("env"),
                "`[keys] env` names the environment variable that holds the host keys (capitals, digits, `_`, e.g. `TOOLGUARD_HOST_KEYS`), never the keys themselves",
            ));
        }
        if self.keys.file.is_some() && self.keys.env.is_some() {
            return Err(self.error(
                self.key_line("[keys]"),
                "`[keys]` names both `file` and `env`: keep one, so every replica reads the same keys",
            ));
        }
        if let Some(var) = &self.proxy.upstream_token_env
            && !is_env_name(var)
        {
            return Err(self.error(
                self.key_line("upstream_token_env"),
                "`upstream_token_env` names the environment variable that holds the upstream's bearer token (capitals, digits, `_`, e.g. `UPSTREAM_MCP_TOKEN`), never the token itself",
            ));
        }
        if self.proxy.upstream_timeout_secs == Some(0) {
            return Err(self.error(
                self.key_line("upstream_timeout_secs"),
                "`upstream_timeout_secs = 0` would fail every upstream request: give seconds, e.g. 30",
            ));
        }
        Ok(())
    }

    /// The line of the first occurrence of `key` in the file, for messages about a `[proxy]`
    /// setting.
    pub fn key_line(&self, key: &str) -> Option<usize> {
        self.source.find(key).map(|i| line_of(&self.source, i))
    }

    /// The file.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The policy revision: derived from the file's contents, so every change gives a new one
    /// (approvals bound to another revision no longer execute), also across restarts.
    pub fn revision(&self) -> u32 {
        self.revision
    }

    /// Names of the tools the file declares.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// The entry of `tool` (the default entry for tools the file does not name, if any).
    pub fn entry(&self, tool: &str) -> Option<&ToolEntry> {
        self.tools
            .get(tool)
            .or(self.default_tool.as_ref())
            .map(|(_, e)| e)
    }

    /// The host keys `[keys]` names: from the key file (relative to the policy file) or the
    /// environment variable; `Ok(None)` when the section names neither.
    pub fn host_keys(&self) -> Result<Option<toolguard_pipeline::HostKeys>, PolicyError> {
        use toolguard_pipeline::HostKeys;
        let loaded = match (&self.keys.file, &self.keys.env) {
            (Some(file), _) => HostKeys::from_file(self.relative(file)),
            (None, Some(var)) => HostKeys::from_env(var),
            (None, None) => return Ok(None),
        };
        loaded
            .map(Some)
            .map_err(|e| self.error(self.key_line("[keys]"), e.to_string()))
    }

    /// The file audit checkpoints are appended to (`[keys] checkpoints`, default the store's
    /// path with `.checkpoints` appended).
    pub fn checkpoints_path(&self) -> PathBuf {
        match &self.keys.checkpoints {
            Some(file) => self.relative(file),
            None => {
                let mut path = self.store_path().into_os_string();
                path.push(".checkpoints");
                path.into()
            }
        }
    }

    fn relative(&self, path: &str) -> PathBuf {
        self.file.parent().unwrap_or(Path::new(".")).join(path)
    }

    /// The SQLite file of stores and audit trail (relative paths are taken from the policy
    /// file's directory).
    pub fn store_path(&self) -> PathBuf {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        dir.join(self.proxy.store.as_deref().unwrap_or("toolguard.sqlite"))
    }

    /// The declared specs of the `offered` tools the policy exposes; a tool the file names that
    /// is not offered is an error, as is a declaration the tool's schema breaks a rule of.
    pub fn declare_offered(&self, offered: &[Offered]) -> Result<Vec<ToolSpec>, PolicyError> {
        for (name, (line, _)) in &self.tools {
            if !offered.iter().any(|o| &o.name == name) {
                let names: Vec<&str> = offered.iter().map(|o| o.name.as_str()).collect();
                return Err(self.error(
                    Some(*line),
                    format!(
                        "tool `{name}` is not offered by the upstream server; it offers: {}",
                        names.join(", ")
                    ),
                ));
            }
        }
        let mut specs = Vec::new();
        for o in offered {
            let (line, entry) = match (self.tools.get(&o.name), &self.default_tool) {
                (Some(found), _) => found,
                (None, Some(default)) => default,
                (None, None) => continue,
            };
            let spec = declare(
                &o.name,
                &o.description,
                &o.input_schema,
                &entry.declaration(),
            )
            .map_err(|e| self.error(Some(*line), e.to_string()))?;
            specs.push(spec);
        }
        Ok(specs)
    }

    /// The authorizer: tools the file does not cover are refused; covered tools need one of the
    /// listed tenants and roles.
    pub fn authorizer(&self) -> PolicyAuthorizer {
        PolicyAuthorizer {
            policy: Arc::new(self.clone()),
        }
    }

    /// The risk policy of the `specs` the policy exposes: limits, rates, approver roles and flow
    /// of each tool's entry (`[default_tool]`'s for tools the file does not name), approval TTL,
    /// `approval = true` tools and this file's revision.
    pub fn risk_policy(&self, specs: &[ToolSpec]) -> RiskPolicy {
        let mut p = RiskPolicy::new()
            .revision(self.revision)
            .flow(self.flow.policy());
        if let Some(roles) = &self.approvals.roles {
            p = p.approver_roles(roles.clone());
        }
        if let Some(ttl) = self.approvals.ttl_secs {
            p = p.approval_ttl(Duration::from_secs(ttl));
        }
        for spec in specs {
            if let Some(e) = self.entry(&spec.name) {
                p = entry_limits(p, &spec.name, e);
            }
        }
        let always = self.clone();
        p.require_approval_when(move |spec, _, _| {
            always.entry(&spec.name).is_some_and(|e| e.approval)
        })
    }

    /// The sanitizer with each field's allowlists (path roots travel in the specs).
    pub fn sanitizer(&self, specs: &[ToolSpec]) -> Sanitizer {
        let mut s = Sanitizer::new();
        for spec in specs {
            let Some(entry) = self.entry(&spec.name) else {
                continue;
            };
            for (pointer, f) in &entry.fields {
                let Some(field) = toolguard_pipeline::declare::pointer_property(pointer) else {
                    continue;
                };
                let n = spec.name.as_str();
                if !f.allow_domains.is_empty() {
                    s = s.allow_email_domains(n, &field, f.allow_domains.clone());
                }
                if !f.allow_hosts.is_empty() {
                    s = s.allow_url_hosts(n, &field, f.allow_hosts.clone());
                }
                if !f.allow_schemes.is_empty() {
                    s = s.allow_url_schemes(n, &field, f.allow_schemes.clone());
                }
            }
        }
        s
    }

    /// Every role that may approve some tool (`[approvals] roles`, default `approver`, and each
    /// tool's `approver_roles`).
    pub fn approver_roles(&self) -> Vec<String> {
        let mut roles = self
            .approvals
            .roles
            .clone()
            .unwrap_or_else(|| vec!["approver".to_owned()]);
        let entries = self.tools.values().chain(self.default_tool.iter());
        for (_, e) in entries {
            roles.extend(e.approver_roles.iter().flatten().cloned());
        }
        roles
    }

    /// The principal of a local stdio proxy (`[principal]`).
    pub fn local_principal(&self, default_session: &str) -> Option<Principal> {
        let p = self.principal.as_ref()?;
        let mut principal = Principal::new(
            &p.tenant,
            &p.subject,
            p.session.as_deref().unwrap_or(default_session),
        );
        principal.roles = p.roles.as_slice().into();
        Some(principal)
    }

    /// The principal a bearer token maps to (constant-time comparison).
    pub fn token_principal(&self, token: &str, session: &str) -> Option<Principal> {
        let t = self
            .tokens
            .iter()
            .find(|t| constant_time_eq(t.token.as_bytes(), token.as_bytes()))?;
        let mut p = Principal::new(&t.tenant, &t.subject, session);
        p.roles = t.roles.as_slice().into();
        Some(p)
    }
}

fn entry_limits(mut p: RiskPolicy, name: &str, e: &ToolEntry) -> RiskPolicy {
    if let Some(r) = e.session_rate {
        p = p.session_rate(name, r.calls, Duration::from_secs(r.window_secs));
    }
    if let Some(l) = e.session_limit {
        let on = match l.on_exceed {
            Exceed::Deny => OnExceed::Deny,
            Exceed::Approval => OnExceed::RequireApproval,
        };
        p = p.session_limit(name, l.amount, Duration::from_secs(l.window_secs), on);
    }
    if let Some(max) = e.max_per_call {
        p = p.max_per_call(name, max);
    }
    if let Some(roles) = &e.approver_roles {
        p = p.tool_approver_roles(name, roles.clone());
    }
    let mut rules = p.current_flow().clone();
    if let Some(flow) = e.flow {
        rules = rules.tool(name, flow.action());
    }
    for (role, action) in e.flow_roles.given() {
        rules = rules.tool_role(name, role, action);
    }
    for (pointer, flow) in &e.flow_fields {
        // A pointer that names no top-level property was refused by `check_entry`.
        if let Some(field) = toolguard_pipeline::declare::pointer_property(pointer) {
            rules = rules.field(name, &field, flow.action());
        }
    }
    p.flow(rules)
}

/// The declaration rules that need no schema (the same rules and messages as `#[tool]`, from
/// `toolguard-rules`; the rest apply when the upstream's schema is known, in
/// [`Policy::declare_offered`]), and the entry's own consistency.
fn check_entry(name: &str, e: &ToolEntry) -> Result<(), String> {
    rules::check_declaration(name, &e.declaration()).map_err(|e| e.to_string())?;
    check_consistency(name, e)
}

/// The entry's own consistency, beside the declaration rules: flow pointers, limits that need
/// an amount, non-empty `roles`/`tenants`.
fn check_consistency(name: &str, e: &ToolEntry) -> Result<(), String> {
    if let Some(pointer) = e
        .flow_fields
        .keys()
        .find(|p| toolguard_pipeline::declare::pointer_property(p).is_none())
    {
        return Err(format!(
            "tool `{name}`: `flow_fields` key `{pointer}` must name a top-level argument as a pointer, e.g. `\"/to\"`"
        ));
    }
    let needs_amount = e.session_limit.is_some() || e.max_per_call.is_some();
    if needs_amount && e.amount.is_none() {
        return Err(format!(
            "tool `{name}`: `session_limit` and `max_per_call` measure the amount field: add `amount = \"/<field>\"`"
        ));
    }
    if e.roles.as_ref().is_some_and(Vec::is_empty) || e.tenants.as_ref().is_some_and(Vec::is_empty)
    {
        return Err(format!(
            "tool `{name}`: an empty `roles`/`tenants` list lets nobody call the tool: remove the tool or list who may call it"
        ));
    }
    Ok(())
}

/// Decides per tool from the policy file: tools it does not cover are refused
/// (`tool_not_granted`), a foreign tenant gets `tenant_not_granted`, a missing role `missing_role`.
#[derive(Debug, Clone)]
pub struct PolicyAuthorizer {
    policy: Arc<Policy>,
}

impl PolicyAuthorizer {
    /// The policy's answer for `principal` and `spec`: `Err(reason code)` when refused.
    fn decide(&self, principal: &Principal, spec: &ToolSpec) -> Result<(), String> {
        let Some(entry) = self.policy.entry(&spec.name) else {
            return Err("tool_not_granted".to_owned());
        };
        if let Some(tenants) = &entry.tenants
            && !tenants.iter().any(|t| *t == principal.tenant)
        {
            return Err("tenant_not_granted".to_owned());
        }
        match &entry.roles {
            Some(roles) if !roles.iter().any(|r| principal.has_role(r)) => {
                Err("missing_role".to_owned())
            }
            _ => Ok(()),
        }
    }
}

impl Authorizer for PolicyAuthorizer {
    fn authorize<'a>(
        &'a self,
        principal: &'a Principal,
        spec: &'a ToolSpec,
    ) -> toolguard_pipeline::tool::BoxFuture<
        'a,
        Result<(), toolguard_pipeline::access::AuthorizeError>,
    > {
        let decided = self
            .decide(principal, spec)
            .map_err(toolguard_pipeline::access::AuthorizeError::refused);
        Box::pin(async move { decided })
    }
}

impl Policy {
    /// Every key the policy file format accepts, dotted from its section (`proxy.store`,
    /// `default_tool.session_rate.calls`, `tools.*.fields.*.max_len`, ...), read from the
    /// parser's own field lists, so a key added to the format appears here without anyone
    /// listing it. `tools.*` and `default_tool` take the same keys.
    pub fn format_keys() -> Vec<String> {
        use probe::fields;
        let mut keys = Vec::new();
        let mut section = |prefix: &str, names: &[&str]| {
            keys.extend(names.iter().map(|n| format!("{prefix}.{n}")));
        };
        section("proxy", fields::<ProxySection>());
        section("principal", fields::<PrincipalSection>());
        section("tokens", fields::<TokenEntry>());
        section("approvals", fields::<ApprovalsSection>());
        section("keys", fields::<KeysSection>());
        section("default_tool", fields::<ToolEntry>());
        section("default_tool.session_rate", fields::<RateDecl>());
        section("default_tool.session_limit", fields::<LimitDecl>());
        section("default_tool.fields.*", fields::<FieldDecl>());
        section("flow", fields::<FlowSection>());
        section("resources", fields::<surface::ExposeSection>());
        section("prompts", fields::<surface::ExposeSection>());
        section("sampling", fields::<surface::UpstreamRequestSection>());
        section("elicitation", fields::<surface::UpstreamRequestSection>());
        // A section of the file this list does not expand yet shows as `section.?`.
        for s in fields::<Raw>() {
            let covered = *s == "tools" || keys.iter().any(|k| k.starts_with(&format!("{s}.")));
            if !covered {
                keys.push(format!("{s}.?"));
            }
        }
        keys
    }
}

/// Reads the field names serde's derive gives a struct's deserializer.
mod probe {
    use serde::de::{self, Deserializer, Visitor};

    /// The field names of `T` (empty for a type that is not a struct).
    pub(crate) fn fields<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
        let mut probe = Probe(None);
        // The probe answers every request with an error: only the field list is wanted.
        let _ = T::deserialize(&mut probe);
        probe.0.unwrap_or(&[])
    }

    struct Probe(Option<&'static [&'static str]>);

    #[derive(Debug)]
    struct Stop;

    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("field probe")
        }
    }

    impl std::error::Error for Stop {}

    impl de::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Stop
        }
    }

    impl<'de> Deserializer<'de> for &mut Probe {
        type Error = Stop;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0 = Some(fields);
            Err(Stop)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
}

/// Whether `var` looks like an environment variable name (capitals, digits, `_`).
fn is_env_name(var: &str) -> bool {
    let mut chars = var.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// 1-based line of byte offset `at`.
pub fn line_of(source: &str, at: usize) -> usize {
    source.as_bytes()[..at.min(source.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let da = Sha256::digest(a);
    let db = Sha256::digest(b);
    da.iter()
        .zip(db.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}
