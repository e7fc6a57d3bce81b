use std::sync::Mutex;

use super::chain::{ChainBreak, GENESIS_HASH, seal};
use super::entry::{AuditEntry, AuditRecord};
use super::query::ChainVerifier;
use super::{AuditError, AuditSink};
use crate::tool::BoxFuture;

/// An audit sink that keeps entries in memory; for tests, demos and short-lived processes.
#[derive(Debug, Default)]
pub struct MemoryAuditSink {
    entries: Mutex<Vec<AuditEntry>>,
}

impl MemoryAuditSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<AuditEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of every entry, in sequence order.
    pub fn entries(&self) -> Vec<AuditEntry> {
        self.lock().clone()
    }

    /// The entry with sequence number `seq`.
    pub fn get(&self, seq: u64) -> Option<AuditEntry> {
        self.lock().iter().find(|e| e.seq == seq).cloned()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the sink holds no entry.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Verifies the stored chain from its start: the first entry must be entry 1, linked to
    /// [`GENESIS_HASH`], so that removing the oldest entries is detected too.
    pub fn verify(&self) -> Result<(), ChainBreak> {
        ChainVerifier::new().feed(&self.lock())
    }

    /// Gives mutable access to the stored entries, as an attacker with write access to the
    /// storage would have; [`verify`](Self::verify) then names the altered entry.
    pub fn with_storage<R>(&self, f: impl FnOnce(&mut Vec<AuditEntry>) -> R) -> R {
        f(&mut self.lock())
    }
}

impl AuditSink for MemoryAuditSink {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        let mut entries = self.lock();
        let (seq, prev) = match entries.last() {
            Some(last) => (last.seq + 1, last.hash.clone()),
            None => (1, GENESIS_HASH.to_owned()),
        };
        entries.push(seal(seq, record, &prev));
        Box::pin(std::future::ready(Ok(seq)))
    }
}
