//! The pipeline's stages. Each one either passes the call on or stops it with a [`Stop`]; the
//! order is written once, in [`crate::dispatcher`].

pub mod approval;
pub mod authorize;
pub mod envelope;
pub mod execute;
pub mod gate;
pub mod idempotency;
pub mod parse;
pub mod policy;
pub mod principal;
pub mod sanitize;
pub mod validate;

use serde::{Deserialize, Serialize};

use crate::error::ToolError;
use crate::outcome::{ArgumentError, Status};

/// A pipeline stage, as recorded in audit entries.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
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
    /// Business preflight.
    Preflight,
    /// Trusted principal checked and injected.
    Principal,
    /// Tool and resource authorization.
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
