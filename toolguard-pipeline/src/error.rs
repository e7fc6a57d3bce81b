//! Errors a tool's hooks and handler return: [`ToolError`]. Each maps to one stable status.

use serde::{Deserialize, Serialize};

/// Why a resource answered `not_found`. Kept in the audit trail only; outside, both look the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NotFoundClass {
    /// No such resource.
    Missing,
    /// The resource belongs to another tenant.
    ForeignTenant,
    /// The resource belongs to another subject of the same tenant.
    ForeignSubject,
}

impl NotFoundClass {
    /// The reason code recorded in the audit entry.
    pub fn as_str(self) -> &'static str {
        match self {
            NotFoundClass::Missing => "missing",
            NotFoundClass::ForeignTenant => "foreign_tenant",
            NotFoundClass::ForeignSubject => "foreign_subject",
        }
    }
}

/// An error from a tool's preflight, resource check or handler.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The resource is missing or not the caller's (`not_found`).
    #[error("not found")]
    NotFound(NotFoundClass),
    /// The caller may not do this (`forbidden`).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// A business invariant does not hold (`precondition_failed`).
    #[error("precondition failed: {0}")]
    Precondition(String),
    /// The handler failed (`failed`). A retry executes again.
    #[error("{0}")]
    Failed(String),
}

impl ToolError {
    /// No such resource.
    pub fn not_found() -> Self {
        ToolError::NotFound(NotFoundClass::Missing)
    }

    /// A business invariant does not hold.
    pub fn precondition(msg: impl Into<String>) -> Self {
        ToolError::Precondition(msg.into())
    }

    /// The caller may not do this.
    pub fn forbidden(msg: impl Into<String>) -> Self {
        ToolError::Forbidden(msg.into())
    }

    /// The handler failed with `err`.
    pub fn failed(err: impl std::fmt::Display) -> Self {
        ToolError::Failed(err.to_string())
    }
}

impl From<String> for ToolError {
    fn from(s: String) -> Self {
        ToolError::Failed(s)
    }
}

impl From<&str> for ToolError {
    fn from(s: &str) -> Self {
        ToolError::Failed(s.to_owned())
    }
}

impl From<std::convert::Infallible> for ToolError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> Self {
        ToolError::Failed(e.to_string())
    }
}
