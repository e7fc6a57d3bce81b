//! Reading the audit trail back: queries by actor, tool and time, and verification of the whole
//! stored chain.

use super::chain::{ChainBreak, GENESIS_HASH, verify_chain};
use super::entry::AuditEntry;
use super::{AuditError, MemoryAuditSink};
use crate::tool::BoxFuture;

/// Why [`AuditQuery::verify`] did not confirm the stored chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The chain is broken at the named entry.
    #[error(transparent)]
    Broken(#[from] ChainBreak),
    /// The trail could not be read.
    #[error(transparent)]
    Unavailable(#[from] AuditError),
}

/// Queries over a stored audit trail. Each query returns at most `limit` entries.
pub trait AuditQuery: Send + Sync + 'static {
    /// Entries of one actor (tenant and subject), newest first.
    fn by_actor<'a>(
        &'a self,
        tenant: &'a str,
        subject: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>>;

    /// Entries of one tool, newest first.
    fn by_tool<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>>;

    /// Entries with `from_ms <= time_ms < to_ms`, oldest first.
    fn by_time(
        &self,
        from_ms: u64,
        to_ms: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, AuditError>>;

    /// Verifies the whole stored chain from its first entry (which must be entry 1, linked to
    /// [`GENESIS_HASH`]) and names the first altered, removed or inserted entry.
    fn verify(&self) -> BoxFuture<'_, Result<(), VerifyError>>;
}

impl<T: AuditQuery> AuditQuery for std::sync::Arc<T> {
    fn by_actor<'a>(
        &'a self,
        tenant: &'a str,
        subject: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        (**self).by_actor(tenant, subject, limit)
    }
    fn by_tool<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        (**self).by_tool(tool, limit)
    }
    fn by_time(
        &self,
        from_ms: u64,
        to_ms: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, AuditError>> {
        (**self).by_time(from_ms, to_ms, limit)
    }
    fn verify(&self) -> BoxFuture<'_, Result<(), VerifyError>> {
        (**self).verify()
    }
}

/// Verifies a stored chain read in chunks, in sequence order.
#[derive(Debug, Default)]
pub struct ChainVerifier {
    last: Option<AuditEntry>,
}

impl ChainVerifier {
    /// A verifier expecting entry 1 first.
    pub fn new() -> Self {
        Self::default()
    }

    /// Verifies the next chunk of entries.
    pub fn feed(&mut self, chunk: &[AuditEntry]) -> Result<(), ChainBreak> {
        let Some(first) = chunk.first() else {
            return Ok(());
        };
        match &self.last {
            Some(prev) => {
                if first.prev_hash != prev.hash || first.seq != prev.seq + 1 {
                    return Err(ChainBreak::Unlinked { seq: first.seq });
                }
            }
            None => {
                if first.seq != 1 || first.prev_hash != GENESIS_HASH {
                    return Err(ChainBreak::Unlinked { seq: first.seq });
                }
            }
        }
        verify_chain(chunk)?;
        self.last = chunk.last().cloned();
        Ok(())
    }

    /// The last verified entry.
    pub fn last(&self) -> Option<&AuditEntry> {
        self.last.as_ref()
    }
}

fn newest<'e>(
    entries: impl DoubleEndedIterator<Item = &'e AuditEntry>,
    limit: usize,
) -> Vec<AuditEntry> {
    entries.rev().take(limit).cloned().collect()
}

impl AuditQuery for MemoryAuditSink {
    fn by_actor<'a>(
        &'a self,
        tenant: &'a str,
        subject: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        let out = self.with_storage(|e| {
            newest(
                e.iter()
                    .filter(|e| e.record.tenant == tenant && e.record.subject == subject),
                limit,
            )
        });
        Box::pin(std::future::ready(Ok(out)))
    }

    fn by_tool<'a>(
        &'a self,
        tool: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        let out = self.with_storage(|e| newest(e.iter().filter(|e| e.record.tool == tool), limit));
        Box::pin(std::future::ready(Ok(out)))
    }

    fn by_time(
        &self,
        from_ms: u64,
        to_ms: u64,
        limit: usize,
    ) -> BoxFuture<'_, Result<Vec<AuditEntry>, AuditError>> {
        let out = self.with_storage(|e| {
            e.iter()
                .filter(|e| e.record.time_ms >= from_ms && e.record.time_ms < to_ms)
                .take(limit)
                .cloned()
                .collect()
        });
        Box::pin(std::future::ready(Ok(out)))
    }

    fn verify(&self) -> BoxFuture<'_, Result<(), VerifyError>> {
        let result = self.with_storage(|e| ChainVerifier::new().feed(e));
        Box::pin(std::future::ready(result.map_err(VerifyError::from)))
    }
}
