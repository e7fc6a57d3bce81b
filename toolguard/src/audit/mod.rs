//! The audit trail: one terminal [`AuditEntry`] for every call, chained by SHA-256 so that a
//! changed or removed entry is detected by [`verify_chain`].

mod chain;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod columns;
mod entry;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod query;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use chain::{ChainBreak, GENESIS_HASH, seal, verify_chain};
pub use entry::{AuditEntry, AuditEvent, AuditRecord, REDACTED};
pub use memory::MemoryAuditSink;
#[cfg(feature = "postgres")]
pub use postgres::PgAuditSink;
pub use query::{AuditQuery, ChainVerifier, VerifyError};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteAuditSink;

use crate::tool::BoxFuture;

/// Why an audit sink could not append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit sink unavailable: {0}")]
pub struct AuditError(pub String);

/// Where audit entries go. The sink assigns the sequence number and seals the entry into the
/// hash chain (see [`seal`]), so that the chain is consistent with what it stores.
pub trait AuditSink: Send + Sync + 'static {
    /// Appends `record`, sealed into the chain, and returns its sequence number.
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>>;
}

impl<T: AuditSink> AuditSink for std::sync::Arc<T> {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        (**self).append(record)
    }
}
