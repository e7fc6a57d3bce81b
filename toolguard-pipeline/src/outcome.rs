//! What the dispatcher answers: a [`ToolOutcome`] with a stable [`Status`].

use std::borrow::Cow;

use arcstr::ArcStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ToolError, ToolErrorKind};

/// The stable status of a call. The snake_case codes are public API and never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Status {
    /// Executed; the output is in the outcome.
    Ok,
    /// Arguments were not one JSON object, or had duplicate keys.
    Malformed,
    /// No tool of that name is registered.
    UnknownTool,
    /// Arguments did not match the schema.
    InvalidArguments,
    /// The sanitizer refused a field.
    Blocked,
    /// A business invariant does not hold.
    PreconditionFailed,
    /// The resource does not exist or is not the caller's (indistinguishable outside).
    NotFound,
    /// The principal may not use the tool.
    Forbidden,
    /// A risk-policy limit refused the call.
    PolicyDenied,
    /// The idempotency key was used with different arguments.
    IdempotencyConflict,
    /// A call with the same idempotency key is still executing.
    InProgress,
    /// A human must approve; the outcome carries the approval id and preview.
    PendingApproval,
    /// The approver rejected the action.
    ApprovalRejected,
    /// The approval expired before a decision.
    ApprovalExpired,
    /// A store the tool depends on is unavailable; nothing executed.
    Unavailable,
    /// The handler returned an error.
    Failed,
    /// The deadline passed after a side effect may have begun; resolve via operation status.
    OutcomeUnknown,
}

impl Status {
    /// Every status, in pipeline order.
    pub const ALL: [Status; 17] = [
        Status::Malformed,
        Status::UnknownTool,
        Status::InvalidArguments,
        Status::Blocked,
        Status::PreconditionFailed,
        Status::NotFound,
        Status::Forbidden,
        Status::PolicyDenied,
        Status::IdempotencyConflict,
        Status::InProgress,
        Status::PendingApproval,
        Status::ApprovalRejected,
        Status::ApprovalExpired,
        Status::Unavailable,
        Status::Failed,
        Status::OutcomeUnknown,
        Status::Ok,
    ];

    /// The stable snake_case code.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Malformed => "malformed",
            Status::UnknownTool => "unknown_tool",
            Status::InvalidArguments => "invalid_arguments",
            Status::Blocked => "blocked",
            Status::PreconditionFailed => "precondition_failed",
            Status::NotFound => "not_found",
            Status::Forbidden => "forbidden",
            Status::PolicyDenied => "policy_denied",
            Status::IdempotencyConflict => "idempotency_conflict",
            Status::InProgress => "in_progress",
            Status::PendingApproval => "pending_approval",
            Status::ApprovalRejected => "approval_rejected",
            Status::ApprovalExpired => "approval_expired",
            Status::Unavailable => "unavailable",
            Status::Failed => "failed",
            Status::OutcomeUnknown => "outcome_unknown",
        }
    }

    /// Whether the call executed successfully.
    pub fn is_ok(self) -> bool {
        self == Status::Ok
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One schema-validation error: where (JSON pointer into the arguments) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ArgumentError {
    /// JSON pointer of the offending value (`""` for the whole object).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

impl ArgumentError {
    /// The error `message` about the value at JSON pointer `pointer`.
    pub fn new(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        ArgumentError {
            pointer: pointer.into(),
            message: message.into(),
        }
    }
}

/// A tool's result: data for the model, never instructions.
///
/// The envelope exists so that an agent loop cannot mistake a tool result for trusted text: the
/// result was produced by a downstream system that may be wrong or compromised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct UntrustedOutput {
    /// Always `"untrusted"`.
    pub trust: Cow<'static, str>,
    /// The tool's result, validated against its output schema.
    pub data: Value,
}

impl UntrustedOutput {
    /// Wraps a validated result.
    pub fn new(data: Value) -> Self {
        UntrustedOutput {
            trust: Cow::Borrowed("untrusted"),
            data,
        }
    }
}

/// Details of an approval the call is waiting for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ApprovalTicket {
    /// The approval request id.
    pub approval_id: String,
    /// The exact action a human is asked to approve.
    pub preview: String,
    /// Milliseconds since the Unix epoch after which the request is void.
    pub expires_at_ms: u64,
}

impl ApprovalTicket {
    /// The ticket of approval request `approval_id`, asking a human to approve `preview` before
    /// `expires_at_ms`.
    pub fn new(
        approval_id: impl Into<String>,
        preview: impl Into<String>,
        expires_at_ms: u64,
    ) -> Self {
        ApprovalTicket {
            approval_id: approval_id.into(),
            preview: preview.into(),
            expires_at_ms,
        }
    }
}

/// The dispatcher's answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolOutcome {
    /// The call id it answers.
    pub call_id: String,
    /// The tool name as requested.
    pub tool: String,
    /// Stable status.
    pub status: Status,
    /// Stable reason code (e.g. `duplicate_key`, `bidi_control`), when the status has one.
    pub reason: Option<Reason>,
    /// Message safe to show outside (never a blocked payload, never "exists but not yours").
    pub message: Option<String>,
    /// Schema-validation errors, for `invalid_arguments`.
    pub errors: Vec<ArgumentError>,
    /// The result, for `ok`.
    pub output: Option<UntrustedOutput>,
    /// The approval the call waits for, for `pending_approval`.
    pub approval: Option<ApprovalTicket>,
    /// Operation id of a state-changing call (query it after `outcome_unknown`).
    pub operation_id: Option<ArcStr>,
    /// The outcome was stored earlier and is returned again; nothing executed.
    pub replayed: bool,
    /// Sequence number of the terminal audit entry.
    pub audit_seq: Option<u64>,
    /// For a refusal that clears with time (`rate_limited`): milliseconds after which the same
    /// call is admitted again, at the latest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
}

impl ToolOutcome {
    /// An outcome with `status` and nothing else.
    pub fn new(call_id: impl Into<String>, tool: impl Into<String>, status: Status) -> Self {
        ToolOutcome {
            call_id: call_id.into(),
            tool: tool.into(),
            status,
            reason: None,
            message: None,
            errors: Vec::new(),
            output: None,
            approval: None,
            operation_id: None,
            replayed: false,
            audit_seq: None,
            retry_after_ms: None,
        }
    }

    /// The result data, for `ok`.
    pub fn data(&self) -> Option<&Value> {
        self.output.as_ref().map(|o| &o.data)
    }
}

/// Why the pipeline stopped a call: the status, and what to tell and record.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stop {
    /// Terminal status.
    pub status: Status,
    /// Stable reason code.
    pub reason: Option<Reason>,
    /// Message safe to show outside.
    pub message: Option<String>,
    /// Argument errors (for `invalid_arguments`).
    pub errors: Vec<ArgumentError>,
    /// When the same call is admitted again, at the latest (a rate limit).
    pub retry_after: Option<std::time::Duration>,
}

impl Stop {
    /// A stop with `status`, a reason code and an external message.
    pub fn new(status: Status, reason: impl Into<Reason>, message: impl Into<String>) -> Self {
        Stop {
            status,
            reason: Some(reason.into()),
            message: Some(message.into()),
            errors: Vec::new(),
            retry_after: None,
        }
    }

    /// The same stop, telling the caller the call is admitted again after `after` at the latest.
    #[must_use]
    pub fn retry_after(mut self, after: std::time::Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// Maps a hook's or handler's error to its status. A `not_found` keeps the real class as the
    /// reason (for the audit) and an external message that does not reveal it.
    pub fn from_tool_error(err: ToolError) -> Self {
        if let Some(source) = std::error::Error::source(&err) {
            tracing::debug!(error = %err, source = %source, "tool error");
        }
        match err.into_kind() {
            ToolErrorKind::NotFound(class) => {
                Stop::new(Status::NotFound, class.as_str(), "resource not found")
            }
            ToolErrorKind::Forbidden(msg) => {
                Stop::new(Status::Forbidden, Reason::ResourceForbidden, msg)
            }
            ToolErrorKind::Precondition(msg) => {
                Stop::new(Status::PreconditionFailed, Reason::Precondition, msg)
            }
            ToolErrorKind::Failed(msg) => Stop::new(Status::Failed, Reason::HandlerError, msg),
        }
    }
}

/// A stable reason code: why the pipeline stopped (or answered) a call, as recorded in a
/// [`Stop`], a [`ToolOutcome`], an audit record and a stored outcome. Serialized as its
/// snake_case code (`duplicate_key`, `session_limit`, ...), exactly as [`as_str`](Self::as_str)
/// spells it.
///
/// The variants are the codes the pipeline itself emits; [`Reason::Other`] carries codes of the
/// host (custom stages, [`Authorizer`](crate::Authorizer) refusals) and of the sanitizer (a
/// blocked field's reason, e.g. `bidi_control`). Parsing (`From<&str>`, [`FromStr`](std::str::FromStr))
/// gives the variant of a known code and `Other` for the rest; equality, ordering and hashing
/// compare the code, so `Reason::Other("schema".into()) == Reason::Schema`. A `Reason` compares
/// equal to `&str` and derefs to `str` (`outcome.reason.as_deref() == Some("session_limit")`).
///
/// A variant never takes the name of a public type users write (`Reconciled`, `String`): rustc
/// would then print that type with its full path in every diagnostic of the users' crates.
#[derive(Clone)]
#[non_exhaustive]
pub enum Reason {
    /// `empty`
    Empty,
    /// `invalid_json`
    InvalidJson,
    /// `duplicate_key`
    DuplicateKey,
    /// `trailing_data`
    TrailingData,
    /// `not_an_object`
    NotAnObject,
    /// `too_large`
    TooLarge,
    /// `too_deep`
    TooDeep,
    /// `too_many_keys`
    TooManyKeys,
    /// `too_many_keys_total`
    TooManyKeysTotal,
    /// `too_many_items`
    TooManyItems,
    /// `string_too_long`
    StringTooLong,
    /// `unknown_tool`
    UnknownTool,
    /// `schema`
    Schema,
    /// `schema_after_sanitize`
    SchemaAfterSanitize,
    /// `decode`
    Decode,
    /// `invalid_output`
    InvalidOutput,
    /// `missing_idempotency_key`
    MissingIdempotencyKey,
    /// `invalid_idempotency_key`
    InvalidIdempotencyKey,
    /// `idempotency_key_empty`
    IdempotencyKeyEmpty,
    /// `idempotency_key_too_long`
    IdempotencyKeyTooLong,
    /// `idempotency_key_non_ascii`
    IdempotencyKeyNonAscii,
    /// `idempotency_key_control_char`
    IdempotencyKeyControlChar,
    /// `idempotency_key_whitespace`
    IdempotencyKeyWhitespace,
    /// `idempotency_key_disallowed_char`
    IdempotencyKeyDisallowedChar,
    /// `idempotency_key_punctuation_only`
    IdempotencyKeyPunctuationOnly,
    /// `unauthenticated`
    Unauthenticated,
    /// `stale_principal`
    StalePrincipal,
    /// `requester_revoked`
    RequesterRevoked,
    /// `requester_changed`
    RequesterChanged,
    /// `requester_stale`
    RequesterStale,
    /// `refresher_unavailable`
    RefresherUnavailable,
    /// `authorizer_unavailable`
    AuthorizerUnavailable,
    /// `not_permitted`
    NotPermitted,
    /// `tool_not_granted`
    ToolNotGranted,
    /// `missing_role`
    MissingRole,
    /// `resource_forbidden`
    ResourceForbidden,
    /// `missing`
    Missing,
    /// `foreign_tenant`
    ForeignTenant,
    /// `foreign_subject`
    ForeignSubject,
    /// `precondition`
    Precondition,
    /// `amount_unreadable`
    AmountUnreadable,
    /// `over_call_limit`
    OverCallLimit,
    /// `session_limit`
    SessionLimit,
    /// `subject_limit`
    SubjectLimit,
    /// `rate_limited`
    RateLimited,
    /// `session_blocked`
    SessionBlocked,
    /// `session_held`
    SessionHeld,
    /// `provenance`
    Provenance,
    /// `idempotency_conflict`
    IdempotencyConflict,
    /// `in_progress`
    InProgress,
    /// `approval_needs_idempotency_key`
    ApprovalNeedsIdempotencyKey,
    /// `not_eligible`
    NotEligible,
    /// `self_approval`
    SelfApproval,
    /// `duplicate_approver`
    DuplicateApprover,
    /// `concurrent_decision`
    ConcurrentDecision,
    /// `binding_mismatch`
    BindingMismatch,
    /// `reservation_missing`
    ReservationMissing,
    /// `handler_error`
    HandlerError,
    /// `panicked`
    Panicked,
    /// `lease_expired`
    LeaseExpired,
    /// `not_executed`
    NotExecuted,
    /// `reconciled`
    ReconciledOutcome,
    /// `response_lifted`
    ResponseLifted,
    /// `approval_store_unavailable`
    ApprovalStoreUnavailable,
    /// `idempotency_store_unavailable`
    IdempotencyStoreUnavailable,
    /// `operation_store_unavailable`
    OperationStoreUnavailable,
    /// `ledger_unavailable`
    LedgerUnavailable,
    /// `provenance_unavailable`
    ProvenanceUnavailable,
    /// `audit_unavailable`
    AuditUnavailable,
    /// A code the pipeline does not define: a host's (custom stage, authorizer) or the
    /// sanitizer's.
    Other(ArcStr),
}

impl Reason {
    /// Every code the pipeline defines (not [`Reason::Other`]).
    pub const KNOWN: &'static [Reason] = &[
        Reason::Empty,
        Reason::InvalidJson,
        Reason::DuplicateKey,
        Reason::TrailingData,
        Reason::NotAnObject,
        Reason::TooLarge,
        Reason::TooDeep,
        Reason::TooManyKeys,
        Reason::TooManyKeysTotal,
        Reason::TooManyItems,
        Reason::StringTooLong,
        Reason::UnknownTool,
        Reason::Schema,
        Reason::SchemaAfterSanitize,
        Reason::Decode,
        Reason::InvalidOutput,
        Reason::MissingIdempotencyKey,
        Reason::InvalidIdempotencyKey,
        Reason::IdempotencyKeyEmpty,
        Reason::IdempotencyKeyTooLong,
        Reason::IdempotencyKeyNonAscii,
        Reason::IdempotencyKeyControlChar,
        Reason::IdempotencyKeyWhitespace,
        Reason::IdempotencyKeyDisallowedChar,
        Reason::IdempotencyKeyPunctuationOnly,
        Reason::Unauthenticated,
        Reason::StalePrincipal,
        Reason::RequesterRevoked,
        Reason::RequesterChanged,
        Reason::RequesterStale,
        Reason::RefresherUnavailable,
        Reason::AuthorizerUnavailable,
        Reason::NotPermitted,
        Reason::ToolNotGranted,
        Reason::MissingRole,
        Reason::ResourceForbidden,
        Reason::Missing,
        Reason::ForeignTenant,
        Reason::ForeignSubject,
        Reason::Precondition,
        Reason::AmountUnreadable,
        Reason::OverCallLimit,
        Reason::SessionLimit,
        Reason::SubjectLimit,
        Reason::RateLimited,
        Reason::SessionBlocked,
        Reason::SessionHeld,
        Reason::Provenance,
        Reason::IdempotencyConflict,
        Reason::InProgress,
        Reason::ApprovalNeedsIdempotencyKey,
        Reason::NotEligible,
        Reason::SelfApproval,
        Reason::DuplicateApprover,
        Reason::ConcurrentDecision,
        Reason::BindingMismatch,
        Reason::ReservationMissing,
        Reason::HandlerError,
        Reason::Panicked,
        Reason::LeaseExpired,
        Reason::NotExecuted,
        Reason::ReconciledOutcome,
        Reason::ResponseLifted,
        Reason::ApprovalStoreUnavailable,
        Reason::IdempotencyStoreUnavailable,
        Reason::OperationStoreUnavailable,
        Reason::LedgerUnavailable,
        Reason::ProvenanceUnavailable,
        Reason::AuditUnavailable,
    ];

    /// The stable snake_case code.
    pub fn as_str(&self) -> &str {
        match self {
            Reason::Empty => "empty",
            Reason::InvalidJson => "invalid_json",
            Reason::DuplicateKey => "duplicate_key",
            Reason::TrailingData => "trailing_data",
            Reason::NotAnObject => "not_an_object",
            Reason::TooLarge => "too_large",
            Reason::TooDeep => "too_deep",
            Reason::TooManyKeys => "too_many_keys",
            Reason::TooManyKeysTotal => "too_many_keys_total",
            Reason::TooManyItems => "too_many_items",
            Reason::StringTooLong => "string_too_long",
            Reason::UnknownTool => "unknown_tool",
            Reason::Schema => "schema",
            Reason::SchemaAfterSanitize => "schema_after_sanitize",
            Reason::Decode => "decode",
            Reason::InvalidOutput => "invalid_output",
            Reason::MissingIdempotencyKey => "missing_idempotency_key",
            Reason::InvalidIdempotencyKey => "invalid_idempotency_key",
            Reason::IdempotencyKeyEmpty => "idempotency_key_empty",
            Reason::IdempotencyKeyTooLong => "idempotency_key_too_long",
            Reason::IdempotencyKeyNonAscii => "idempotency_key_non_ascii",
            Reason::IdempotencyKeyControlChar => "idempotency_key_control_char",
            Reason::IdempotencyKeyWhitespace => "idempotency_key_whitespace",
            Reason::IdempotencyKeyDisallowedChar => "idempotency_key_disallowed_char",
            Reason::IdempotencyKeyPunctuationOnly => "idempotency_key_punctuation_only",
            Reason::Unauthenticated => "unauthenticated",
            Reason::StalePrincipal => "stale_principal",
            Reason::RequesterRevoked => "requester_revoked",
            Reason::RequesterChanged => "requester_changed",
            Reason::RequesterStale => "requester_stale",
            Reason::RefresherUnavailable => "refresher_unavailable",
            Reason::AuthorizerUnavailable => "authorizer_unavailable",
            Reason::NotPermitted => "not_permitted",
            Reason::ToolNotGranted => "tool_not_granted",
            Reason::MissingRole => "missing_role",
            Reason::ResourceForbidden => "resource_forbidden",
            Reason::Missing => "missing",
            Reason::ForeignTenant => "foreign_tenant",
            Reason::ForeignSubject => "foreign_subject",
            Reason::Precondition => "precondition",
            Reason::AmountUnreadable => "amount_unreadable",
            Reason::OverCallLimit => "over_call_limit",
            Reason::SessionLimit => "session_limit",
            Reason::SubjectLimit => "subject_limit",
            Reason::RateLimited => "rate_limited",
            Reason::SessionBlocked => "session_blocked",
            Reason::SessionHeld => "session_held",
            Reason::Provenance => "provenance",
            Reason::IdempotencyConflict => "idempotency_conflict",
            Reason::InProgress => "in_progress",
            Reason::ApprovalNeedsIdempotencyKey => "approval_needs_idempotency_key",
            Reason::NotEligible => "not_eligible",
            Reason::SelfApproval => "self_approval",
            Reason::DuplicateApprover => "duplicate_approver",
            Reason::ConcurrentDecision => "concurrent_decision",
            Reason::BindingMismatch => "binding_mismatch",
            Reason::ReservationMissing => "reservation_missing",
            Reason::HandlerError => "handler_error",
            Reason::Panicked => "panicked",
            Reason::LeaseExpired => "lease_expired",
            Reason::NotExecuted => "not_executed",
            Reason::ReconciledOutcome => "reconciled",
            Reason::ResponseLifted => "response_lifted",
            Reason::ApprovalStoreUnavailable => "approval_store_unavailable",
            Reason::IdempotencyStoreUnavailable => "idempotency_store_unavailable",
            Reason::OperationStoreUnavailable => "operation_store_unavailable",
            Reason::LedgerUnavailable => "ledger_unavailable",
            Reason::ProvenanceUnavailable => "provenance_unavailable",
            Reason::AuditUnavailable => "audit_unavailable",
            Reason::Other(code) => code,
        }
    }

    /// The reason of `code`: the pipeline's variant when it defines the code, else
    /// [`Reason::Other`].
    pub fn new(code: &str) -> Self {
        match code {
            "empty" => Reason::Empty,
            "invalid_json" => Reason::InvalidJson,
            "duplicate_key" => Reason::DuplicateKey,
            "trailing_data" => Reason::TrailingData,
            "not_an_object" => Reason::NotAnObject,
            "too_large" => Reason::TooLarge,
            "too_deep" => Reason::TooDeep,
            "too_many_keys" => Reason::TooManyKeys,
            "too_many_keys_total" => Reason::TooManyKeysTotal,
            "too_many_items" => Reason::TooManyItems,
            "string_too_long" => Reason::StringTooLong,
            "unknown_tool" => Reason::UnknownTool,
            "schema" => Reason::Schema,
            "schema_after_sanitize" => Reason::SchemaAfterSanitize,
            "decode" => Reason::Decode,
            "invalid_output" => Reason::InvalidOutput,
            "missing_idempotency_key" => Reason::MissingIdempotencyKey,
            "invalid_idempotency_key" => Reason::InvalidIdempotencyKey,
            "idempotency_key_empty" => Reason::IdempotencyKeyEmpty,
            "idempotency_key_too_long" => Reason::IdempotencyKeyTooLong,
            "idempotency_key_non_ascii" => Reason::IdempotencyKeyNonAscii,
            "idempotency_key_control_char" => Reason::IdempotencyKeyControlChar,
            "idempotency_key_whitespace" => Reason::IdempotencyKeyWhitespace,
            "idempotency_key_disallowed_char" => Reason::IdempotencyKeyDisallowedChar,
            "idempotency_key_punctuation_only" => Reason::IdempotencyKeyPunctuationOnly,
            "unauthenticated" => Reason::Unauthenticated,
            "stale_principal" => Reason::StalePrincipal,
            "requester_revoked" => Reason::RequesterRevoked,
            "requester_changed" => Reason::RequesterChanged,
            "requester_stale" => Reason::RequesterStale,
            "refresher_unavailable" => Reason::RefresherUnavailable,
            "authorizer_unavailable" => Reason::AuthorizerUnavailable,
            "not_permitted" => Reason::NotPermitted,
            "tool_not_granted" => Reason::ToolNotGranted,
            "missing_role" => Reason::MissingRole,
            "resource_forbidden" => Reason::ResourceForbidden,
            "missing" => Reason::Missing,
            "foreign_tenant" => Reason::ForeignTenant,
            "foreign_subject" => Reason::ForeignSubject,
            "precondition" => Reason::Precondition,
            "amount_unreadable" => Reason::AmountUnreadable,
            "over_call_limit" => Reason::OverCallLimit,
            "session_limit" => Reason::SessionLimit,
            "subject_limit" => Reason::SubjectLimit,
            "rate_limited" => Reason::RateLimited,
            "session_blocked" => Reason::SessionBlocked,
            "session_held" => Reason::SessionHeld,
            "provenance" => Reason::Provenance,
            "idempotency_conflict" => Reason::IdempotencyConflict,
            "in_progress" => Reason::InProgress,
            "approval_needs_idempotency_key" => Reason::ApprovalNeedsIdempotencyKey,
            "not_eligible" => Reason::NotEligible,
            "self_approval" => Reason::SelfApproval,
            "duplicate_approver" => Reason::DuplicateApprover,
            "concurrent_decision" => Reason::ConcurrentDecision,
            "binding_mismatch" => Reason::BindingMismatch,
            "reservation_missing" => Reason::ReservationMissing,
            "handler_error" => Reason::HandlerError,
            "panicked" => Reason::Panicked,
            "lease_expired" => Reason::LeaseExpired,
            "not_executed" => Reason::NotExecuted,
            "reconciled" => Reason::ReconciledOutcome,
            "response_lifted" => Reason::ResponseLifted,
            "approval_store_unavailable" => Reason::ApprovalStoreUnavailable,
            "idempotency_store_unavailable" => Reason::IdempotencyStoreUnavailable,
            "operation_store_unavailable" => Reason::OperationStoreUnavailable,
            "ledger_unavailable" => Reason::LedgerUnavailable,
            "provenance_unavailable" => Reason::ProvenanceUnavailable,
            "audit_unavailable" => Reason::AuditUnavailable,
            other => Reason::Other(ArcStr::from(other)),
        }
    }
}

impl std::fmt::Debug for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Reason {
    type Err = std::convert::Infallible;

    fn from_str(code: &str) -> Result<Self, Self::Err> {
        Ok(Reason::new(code))
    }
}

impl From<&str> for Reason {
    fn from(code: &str) -> Self {
        Reason::new(code)
    }
}

impl From<&String> for Reason {
    fn from(code: &String) -> Self {
        Reason::new(code)
    }
}

impl From<String> for Reason {
    fn from(code: String) -> Self {
        Reason::new(&code)
    }
}

impl From<ArcStr> for Reason {
    fn from(code: ArcStr) -> Self {
        match Reason::new(&code) {
            Reason::Other(_) => Reason::Other(code),
            known => known,
        }
    }
}

impl From<&Reason> for Reason {
    fn from(reason: &Reason) -> Self {
        reason.clone()
    }
}

impl From<Reason> for String {
    fn from(reason: Reason) -> Self {
        reason.as_str().to_owned()
    }
}

impl std::ops::Deref for Reason {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Reason {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Reason {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Reason {
    fn eq(&self, other: &Reason) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Reason {}

impl std::hash::Hash for Reason {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialOrd for Reason {
    fn partial_cmp(&self, other: &Reason) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Reason {
    fn cmp(&self, other: &Reason) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Reason {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Reason> for str {
    fn eq(&self, other: &Reason) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Reason> for &str {
    fn eq(&self, other: &Reason) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Reason> for String {
    fn eq(&self, other: &Reason) -> bool {
        self == other.as_str()
    }
}

impl Serialize for Reason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(Reason::new(&code))
    }
}
