use std::sync::{Arc, Mutex};

use arcstr::ArcStr;

use super::anchor::AuditAnchor;
use super::chain::{ChainBreak, GENESIS_HASH, Sealer, with_encoded};
use super::entry::{AuditEntry, AuditRecord};
use super::query::ChainVerifier;
use super::{Appending, AuditError, AuditSink};
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

/// The sequence number and previous hash an entry appended after `entries` gets.
fn next_link(entries: &[AuditEntry]) -> (u64, ArcStr) {
    match entries.last() {
        Some(last) => (last.seq + 1, last.hash.clone()),
        None => (1, ArcStr::from(GENESIS_HASH)),
    }
}

impl MemoryAuditSink {
    /// Seals `record` (encoded as `body`) as the next entry and pushes it; returns its sequence
    /// number and, when a checkpoint may need it, its hash.
    ///
    /// The record is encoded before the lock is taken; under it the entry is sealed after the
    /// head and pushed, so appends take turns and the lock is taken once. The MAC under the lock
    /// (about 0.4 µs for a typical entry with SHA-NI) bounds this sink at a few million appends a
    /// second. Sealing outside the lock against the head as read, then checking the head again
    /// under a second lock, measured worse on two cores: the second lock and the re-read head
    /// cost more moves of shared cache lines between the cores than the shorter hold saved.
    fn link(&self, record: AuditRecord, body: &[u8]) -> (u64, Option<String>) {
        let mut entries = self.lock();
        let (seq, prev) = next_link(&entries);
        let entry = self.sealer.seal_encoded(seq, record, body, &prev);
        // The head is copied only when a checkpoint may need it.
        let head = self
            .anchor
            .has_checkpoints()
            .then(|| entry.hash.to_string());
        entries.push(entry);
        (seq, head)
    }
}

impl AuditSink for MemoryAuditSink {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        self.append_inline(record).boxed()
    }

    /// Ready at once unless the anchor may write a checkpoint for this entry.
    fn append_inline(&self, record: AuditRecord) -> Appending<'_> {
        match with_encoded(record, |record, body| self.link(record, body)) {
            (seq, None) => Appending::ready(Ok(seq)),
            (seq, Some(head)) => Appending::waiting(Box::pin(async move {
                self.anchor.appended(seq, &head).await;
                Ok(seq)
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: usize) -> AuditRecord {
        AuditRecord {
            call_id: format!("call-{n}").into(),
            tool: "t".into(),
            ..AuditRecord::default()
        }
    }

    /// Appends racing on every worker thread: each entry links to the one before it, sequence
    /// numbers run without gap or repeat, and the chain verifies.
    #[test]
    fn racing_appends_build_one_unbroken_chain() {
        const TASKS: usize = 16;
        const EACH: usize = 300;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .build()
            .unwrap();
        let sink = Arc::new(MemoryAuditSink::new());
        rt.block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|t| {
                    let sink = sink.clone();
                    tokio::spawn(async move {
                        for i in 0..EACH {
                            sink.append(record(t * EACH + i)).await.unwrap();
                            if i % 7 == 0 {
                                tokio::task::yield_now().await;
                            }
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        });
        let entries = sink.entries();
        assert_eq!(entries.len(), TASKS * EACH);
        for (i, pair) in entries.windows(2).enumerate() {
            assert_eq!(pair[0].seq, i as u64 + 1);
            assert_eq!(
                pair[1].prev_hash, pair[0].hash,
                "entry {} links",
                pair[1].seq
            );
        }
        assert_eq!(entries[0].prev_hash, GENESIS_HASH);
        let mut calls: Vec<_> = entries.iter().map(|e| e.record.call_id.clone()).collect();
        calls.sort();
        calls.dedup();
        assert_eq!(
            calls.len(),
            TASKS * EACH,
            "every record appended exactly once"
        );
        sink.verify().expect("the chain verifies");
    }

    /// Without checkpoints an append finishes before `append_inline` returns (no box); with
    /// them it waits for the checkpoint. Both ways number and chain entries as `append` does.
    #[test]
    fn inline_appends_are_ready_unless_a_checkpoint_is_due() {
        use super::super::{CheckpointPolicy, MemoryCheckpoints};
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let plain = MemoryAuditSink::new();
        let first = plain.append_inline(record(0));
        assert!(
            format!("{first:?}").starts_with("Appending::Ready"),
            "{first:?}"
        );
        assert_eq!(rt.block_on(first), Ok(1));
        assert_eq!(rt.block_on(plain.append(record(1))), Ok(2));
        assert_eq!(rt.block_on(plain.append_inline(record(2))), Ok(3));
        plain.verify().expect("the chain verifies");

        let checkpoints = Arc::new(MemoryCheckpoints::new());
        let policy = CheckpointPolicy {
            every_entries: 1,
            every: std::time::Duration::from_secs(3600),
        };
        let anchor = AuditAnchor::new(Arc::new(HostKeys::ephemeral()))
            .checkpoints(checkpoints.clone(), policy);
        let anchored = MemoryAuditSink::with_anchor(anchor);
        let waiting = anchored.append_inline(record(0));
        assert_eq!(format!("{waiting:?}"), "Appending::Waiting(..)");
        assert_eq!(rt.block_on(waiting), Ok(1));
        assert_eq!(rt.block_on(anchored.append_inline(record(1))), Ok(2));
        assert_eq!(
            checkpoints.all().iter().map(|c| c.seq).collect::<Vec<_>>(),
            [1, 2]
        );
        anchored.verify().expect("the chain verifies");
    }
}
