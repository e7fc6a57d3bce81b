use std::sync::{Arc, Mutex};

use super::anchor::AuditAnchor;
use super::chain::{ChainBreak, GENESIS_HASH, Sealer, with_encoded};
use super::entry::{AuditEntry, AuditRecord};
use super::query::ChainVerifier;
use super::{AuditError, AuditSink};
use crate::keys::HostKeys;
use crate::tool::BoxFuture;

/// An audit sink that keeps entries in memory; for tests, demos and short-lived processes.
///
/// Entries are sealed with HMAC-SHA256: under a fresh random key by default
/// ([`HostKeys::ephemeral`], nothing outside the process knows it), or under the host keys of an
/// [`AuditAnchor`] ([`with_anchor`](Self::with_anchor)), which may also write checkpoints.
#[derive(Debug)]
pub struct MemoryAuditSink {
    entries: Mutex<Vec<AuditEntry>>,
    anchor: Arc<AuditAnchor>,
    /// The anchor's sealer, made once.
    sealer: Sealer,
}

impl Default for MemoryAuditSink {
    fn default() -> Self {
        Self::with_anchor(AuditAnchor::new(Arc::new(HostKeys::ephemeral())))
    }
}

impl MemoryAuditSink {
    /// An empty sink sealing with a fresh random key.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty sink sealing with the anchor's host keys and writing its checkpoints.
    pub fn with_anchor(anchor: AuditAnchor) -> Self {
        MemoryAuditSink {
            entries: Mutex::new(Vec::new()),
            sealer: anchor.sealer(),
            anchor: Arc::new(anchor),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<AuditEntry>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn sealer(&self) -> Sealer {
        self.sealer.clone()
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
        ChainVerifier::with_sealer(self.sealer()).feed(&self.lock())
    }

    /// Gives mutable access to the stored entries, as an attacker with write access to the
    /// storage would have; [`verify`](Self::verify) then names the altered entry.
    pub fn with_storage<R>(&self, f: impl FnOnce(&mut Vec<AuditEntry>) -> R) -> R {
        f(&mut self.lock())
    }
}

impl AuditSink for MemoryAuditSink {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        // The encoding needs no lock; only the link to the previous hash does.
        // Encoded before the lock is taken; under it only the link to the previous hash.
        let (seq, head) = with_encoded(record, |record, body| {
            let mut entries = self.lock();
            let (seq, prev) = match entries.last() {
                Some(last) => (last.seq + 1, last.hash.as_str()),
                None => (1, GENESIS_HASH),
            };
            let entry = self.sealer.seal_encoded(seq, record, body, prev);
            // The head is copied only when a checkpoint may need it.
            let head = self.anchor.has_checkpoints().then(|| entry.hash.clone());
            entries.push(entry);
            (seq, head)
        });
        Box::pin(async move {
            if let Some(head) = head {
                self.anchor.appended(seq, &head).await;
            }
            Ok(seq)
        })
    }
}
