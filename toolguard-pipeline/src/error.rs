//! Errors a tool's hooks and handler return: [`ToolError`]. Each maps to one stable status.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Why a resource answered `not_found`. Kept in the audit trail only; outside, both look the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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

/// What went wrong in a [`ToolError`]: each kind maps to one stable status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolErrorKind {
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

/// The underlying error a [`ToolError`] keeps as its [`source`](std::error::Error::source).
pub type ErrorSource = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// An error from a tool's preflight, resource check or handler: its [`ToolErrorKind`] (which
/// decides the status) and, optionally, the error that caused it
/// ([`with_source`](Self::with_source)), returned by [`std::error::Error::source`] and logged,
/// never shown to the model.
///
/// ```
/// use toolguard_pipeline::{ToolError, error::ToolErrorKind};
/// let io = std::io::Error::other("disk full");
/// let err = ToolError::failed("could not save the receipt").with_source(io);
/// assert!(matches!(err.kind(), ToolErrorKind::Failed(_)));
/// assert_eq!(std::error::Error::source(&err).unwrap().to_string(), "disk full");
/// ```
#[derive(Clone)]
pub struct ToolError {
    kind: ToolErrorKind,
    source: Option<ErrorSource>,
}

impl ToolError {
    /// No such resource.
    pub fn not_found() -> Self {
        ToolErrorKind::NotFound(NotFoundClass::Missing).into()
    }

    /// The resource is not the caller's (or missing), with the real `class` for the audit.
    pub fn not_found_as(class: NotFoundClass) -> Self {
        ToolErrorKind::NotFound(class).into()
    }

    /// A business invariant does not hold.
    pub fn precondition(msg: impl Into<String>) -> Self {
        ToolErrorKind::Precondition(msg.into()).into()
    }

    /// The caller may not do this.
    pub fn forbidden(msg: impl Into<String>) -> Self {
        ToolErrorKind::Forbidden(msg.into()).into()
    }

    /// The handler failed with `err` (its text is the message; use
    /// [`with_source`](Self::with_source) to keep the error itself).
    pub fn failed(err: impl std::fmt::Display) -> Self {
        ToolErrorKind::Failed(err.to_string()).into()
    }

    /// Keeps `source` as the cause of this error.
    #[must_use]
    pub fn with_source(
        mut self,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> Self {
        self.source = Some(Arc::from(source.into()));
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &ToolErrorKind {
        &self.kind
    }

    /// What went wrong, by value (the source is dropped).
    pub fn into_kind(self) -> ToolErrorKind {
        self.kind
    }
}

impl std::fmt::Debug for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("ToolError");
        d.field("kind", &self.kind);
        if let Some(source) = &self.source {
            d.field("source", source);
        }
        d.finish()
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.kind, f)
    }
}

impl std::error::Error for ToolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Two errors are equal when their kinds are (the sources are not compared).
impl PartialEq for ToolError {
    fn eq(&self, other: &ToolError) -> bool {
        self.kind == other.kind
    }
}

impl From<ToolErrorKind> for ToolError {
    fn from(kind: ToolErrorKind) -> Self {
        ToolError { kind, source: None }
    }
}

impl From<String> for ToolError {
    fn from(s: String) -> Self {
        ToolErrorKind::Failed(s).into()
    }
}

impl From<&str> for ToolError {
    fn from(s: &str) -> Self {
        ToolErrorKind::Failed(s.to_owned()).into()
    }
}

impl From<std::convert::Infallible> for ToolError {
    fn from(e: std::convert::Infallible) -> Self {
        match e {}
    }
}

/// The I/O error becomes the message and the source.
impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> Self {
        ToolError::failed(&e).with_source(e)
    }
}
