//! What the dispatcher answers: a [`ToolOutcome`] with a stable [`Status`].

use std::borrow::Cow;

use arcstr::ArcStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ToolError;

/// The stable status of a call. The snake_case codes are public API and never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
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
pub struct ArgumentError {
    /// JSON pointer of the offending value (`""` for the whole object).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

/// A tool's result: data for the model, never instructions.
///
/// The envelope exists so that an agent loop cannot mistake a tool result for trusted text: the
/// result was produced by a downstream system that may be wrong or compromised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
pub struct ApprovalTicket {
    /// The approval request id.
    pub approval_id: String,
    /// The exact action a human is asked to approve.
    pub preview: String,
    /// Milliseconds since the Unix epoch after which the request is void.
    pub expires_at_ms: u64,
}

/// The dispatcher's answer to one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutcome {
    /// The call id it answers.
    pub call_id: String,
    /// The tool name as requested.
    pub tool: String,
    /// Stable status.
    pub status: Status,
    /// Stable reason code (e.g. `duplicate_key`, `bidi_control`), when the status has one.
    pub reason: Option<String>,
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
        }
    }

    /// The result data, for `ok`.
    pub fn data(&self) -> Option<&Value> {
        self.output.as_ref().map(|o| &o.data)
    }
}

/// Why the pipeline stopped a call: the status, and what to tell and record.
#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    /// Terminal status.
    pub status: Status,
    /// Stable reason code.
    pub reason: Option<String>,
    /// Message safe to show outside.
    pub message: Option<String>,
    /// Argument errors (for `invalid_arguments`).
    pub errors: Vec<ArgumentError>,
}

impl Stop {
    /// A stop with `status`, a reason code and an external message.
    pub fn new(status: Status, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Stop {
            status,
            reason: Some(reason.into()),
            message: Some(message.into()),
            errors: Vec::new(),
        }
    }

    /// Maps a hook's or handler's error to its status. A `not_found` keeps the real class as the
    /// reason (for the audit) and an external message that does not reveal it.
    pub fn from_tool_error(err: ToolError) -> Self {
        match err {
            ToolError::NotFound(class) => {
                Stop::new(Status::NotFound, class.as_str(), "resource not found")
            }
            ToolError::Forbidden(msg) => Stop::new(Status::Forbidden, "resource_forbidden", msg),
            ToolError::Precondition(msg) => {
                Stop::new(Status::PreconditionFailed, "precondition", msg)
            }
            ToolError::Failed(msg) => Stop::new(Status::Failed, "handler_error", msg),
        }
    }
}
