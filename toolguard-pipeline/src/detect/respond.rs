//! Responses to an alert, off by default and set per rule with
//! [`Detection::respond`](super::Detection::respond): hold the session (its state-changing calls
//! need approval) or block it for a period (its state-changing calls are refused). Each is
//! written to the audit trail when put in force and when a reviewer lifts it
//! ([`Dispatcher::detection`](crate::Dispatcher::detection)).
//!
//! The response check fails closed: a response that cannot be read counts as a hold (the call
//! needs approval, reason `session_hold_unknown`), while the rules themselves fail open.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::store::StoreError;

/// What a firing rule does to the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Response {
    /// Every state-changing call of the session needs approval until a reviewer lifts it.
    Hold,
    /// Every state-changing call of the session is refused for the period (or until lifted).
    Block(Duration),
}

/// What is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseKind {
    /// Approval required.
    Hold,
    /// Refused.
    Block,
}

impl ResponseKind {
    /// `hold` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseKind::Hold => "hold",
            ResponseKind::Block => "block",
        }
    }
}

/// Why a reviewer could not lift a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LiftError {
    /// The dispatcher has no detection configured.
    #[error("detection is not configured")]
    NotConfigured,
    /// The reviewer is not fresh or lacks an approver role.
    #[error("not allowed to lift responses: {0}")]
    Forbidden(String),
    /// The detection store could not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
}
