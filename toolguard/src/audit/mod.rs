//! The audit trail: one terminal [`AuditEntry`] for every call, chained so that a changed,
//! inserted, reordered or removed entry is detected.
//!
//! Threat model. With an [`AuditAnchor`] (host keys), every entry is sealed with HMAC-SHA256
//! under a key the store does not hold: someone with write access to the store cannot edit an
//! entry, insert one, reorder them, or rewrite the chain after an edit without verification
//! naming the first broken entry. Removing the newest entries leaves a valid shorter chain; the
//! sink's signed [`Checkpoint`]s, written to a host-provided [`CheckpointSink`] outside the store
//! every N entries or T seconds, let [`AuditQuery::verify_against`] detect it. Without keys a
//! sink writes the plain SHA-256 chain, which only detects accidental damage and naive edits.

mod anchor;
mod chain;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod columns;
mod encode;
mod entry;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod query;
#[cfg(feature = "sqlite")]
mod sqlite;

pub use anchor::{AuditAnchor, Checkpoint, CheckpointPolicy, CheckpointSink, MemoryCheckpoints};
pub use chain::{ChainBreak, GENESIS_HASH, seal, verify_chain};
pub use entry::{AuditEntry, AuditEvent, AuditRecord, REDACTED};
pub use memory::MemoryAuditSink;
#[cfg(feature = "postgres")]
pub use postgres::PgAuditSink;
pub use query::{AuditQuery, ChainVerifier, VerifyError, VerifyReport};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteAuditSink;

use crate::tool::BoxFuture;

/// Why an audit sink could not append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit sink unavailable: {0}")]
pub struct AuditError(pub String);

/// Where audit entries go. The sink assigns the sequence number and seals the entry into the
/// chain (with its host keys, see [`seal`]), so that the chain is consistent with what it
/// stores. `append` is the pipeline's only way in.
pub trait AuditSink: Send + Sync + 'static {
    /// Appends `record`, sealed into the chain, and returns its sequence number.
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>>;
}

impl<T: AuditSink> AuditSink for std::sync::Arc<T> {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        (**self).append(record)
    }
}
