use std::sync::Arc;

use arcstr::ArcStr;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::Status;
use crate::sanitize::Modification;

/// What an entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditEvent {
    /// The terminal entry of a dispatched call.
    #[default]
    Call,
    /// A human decision on an approval request (approve, reject) and what followed.
    Decision,
    /// A query or reconciliation of an operation's status.
    OperationStatus,
    /// An approval notification that could not be delivered (see [`crate::notify`]).
    Notification,
    /// A detection rule fired (see [`crate::detect`]); the reason is the rule.
    Alert,
    /// A detection response was put in force or lifted (see [`crate::detect`]).
    Response,
}

impl AuditEvent {
    /// The name an audit entry records (the serde name).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AuditEvent::Call => "call",
            AuditEvent::Decision => "decision",
            AuditEvent::OperationStatus => "operation_status",
            AuditEvent::Notification => "notification",
            AuditEvent::Alert => "alert",
            AuditEvent::Response => "response",
        }
    }
}

/// The placeholder written instead of a `sensitive` field's value.
pub const REDACTED: &str = "[redacted]";

/// An audit entry before the sink sealed it (no sequence number, no hashes yet).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct AuditRecord {
    /// What the entry records.
    pub event: AuditEvent,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// Caller's tenant (shared with the call's [`Principal`](crate::Principal)).
    pub tenant: ArcStr,
    /// Caller.
    pub subject: ArcStr,
    /// Caller's session.
    pub session: ArcStr,
    /// Tool name (as requested, for unknown tools); a registered tool's name is shared with the
    /// registry.
    pub tool: ArcStr,
    /// Provider call id (at most [`MAX_LABEL_CHARS`](crate::dispatcher::MAX_LABEL_CHARS)
    /// characters), shared with the handler's context.
    pub call_id: ArcStr,
    /// Operation id of a state-changing call.
    pub operation_id: Option<ArcStr>,
    /// Idempotency key.
    pub idempotency_key: Option<ArcStr>,
    /// The last pipeline stage the call reached.
    pub stage: Stage,
    /// Terminal status.
    pub status: Option<Status>,
    /// Reason code (for `not_found`, the real class: `missing`, `foreign_tenant`, ...).
    pub reason: Option<crate::outcome::Reason>,
    /// Request digest (once the arguments were sanitized).
    pub request_digest: Option<String>,
    /// Sanitized arguments with `sensitive` fields redacted; absent before sanitization passed,
    /// so that no raw payload of a refused call is ever stored. Shared with the call's own copy
    /// when no field is `sensitive` (nothing to redact), so recording it copies nothing.
    pub arguments: Option<Arc<Value>>,
    /// What the sanitizer removed.
    pub modifications: Vec<Modification>,
    /// Approval request id.
    pub approval_id: Option<String>,
    /// Who decided on the approval.
    pub approver: Option<String>,
    /// The outcome was replayed from the idempotency store.
    pub replayed: bool,
    /// Time spent in the dispatcher, in microseconds.
    pub duration_us: u64,
    /// Ids of the provenance sources in the model's context when the call was proposed (see
    /// [`crate::provenance`]); [`AuditQuery::by_source`](super::AuditQuery::by_source) joins on
    /// them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<String>,
    /// The origin of each argument of a call judged in a session with sources (see
    /// [`crate::provenance::Origin`]): with `sources`, source → value → call → decision joins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<crate::provenance::ArgumentOrigin>,
}

/// A sealed audit entry: the record plus its place in the hash chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Position in the chain, from 1.
    pub seq: u64,
    /// The recorded facts.
    #[serde(flatten)]
    pub record: AuditRecord,
    /// Hash of the previous entry ([`super::GENESIS_HASH`] for the first); a sink shares it
    /// with that entry's `hash`.
    pub prev_hash: ArcStr,
    /// SHA-256 over `prev_hash` and the canonical encoding of `seq` and `record`.
    pub hash: ArcStr,
}

/// A pipeline stage, as recorded in audit entries.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Stage {
    /// Arguments parsed as one JSON object with unique keys.
    #[default]
    Parse,
    /// Tool looked up in the registry.
    Registry,
    /// Arguments validated against the input schema.
    Validate,
    /// Arguments sanitized per field.
    Sanitize,
    /// Trusted principal checked for freshness.
    Principal,
    /// Tool-level permission (the `Authorizer`).
    Permit,
    /// Business preflight (the tool's own hook).
    Preflight,
    /// Resource authorization (the tool's own hook).
    Authorize,
    /// Risk policy limits.
    Policy,
    /// Idempotency reservation.
    Idempotency,
    /// Human approval.
    Approval,
    /// Authorization and state rechecked right before execution.
    Recheck,
    /// Handler executed under its deadline.
    Execute,
    /// Result validated and enveloped.
    Envelope,
}

impl Stage {
    /// The name an audit entry records (the serde name).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Stage::Parse => "parse",
            Stage::Registry => "registry",
            Stage::Validate => "validate",
            Stage::Sanitize => "sanitize",
            Stage::Principal => "principal",
            Stage::Permit => "permit",
            Stage::Preflight => "preflight",
            Stage::Authorize => "authorize",
            Stage::Policy => "policy",
            Stage::Idempotency => "idempotency",
            Stage::Approval => "approval",
            Stage::Recheck => "recheck",
            Stage::Execute => "execute",
            Stage::Envelope => "envelope",
        }
    }
}
