//! Reading the audit trail back: queries by actor, tool and time, and verification of the whole
//! stored chain.

use std::sync::Arc;

use super::anchor::Checkpoint;
use super::chain::{ChainBreak, GENESIS_HASH, Sealer, check_run};
use super::entry::AuditEntry;
use super::{AuditError, MemoryAuditSink};
use crate::keys::HostKeys;
use crate::tool::BoxFuture;

/// Why [`AuditQuery::verify`] did not confirm the stored chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
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

    /// Entries of the calls that followed provenance source `source_id` (those whose
    /// [`sources`](super::AuditRecord::sources) name it), with their status and reason, oldest
    /// first. The default reads the trail by time; the SQL sinks select the rows in the database.
    fn by_source<'a>(
        &'a self,
        source_id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        Box::pin(async move {
            let all = self.by_time(0, u64::MAX, usize::MAX).await?;
            Ok(all
                .into_iter()
                .filter(|e| e.record.sources.iter().any(|s| s == source_id))
                .take(limit)
                .collect())
        })
    }

    /// Verifies the whole stored chain from its first entry (which must be entry 1, linked to
    /// [`GENESIS_HASH`]) and names the first altered, removed or inserted entry. A keyed sink
    /// checks every seal with its host keys.
    fn verify(&self) -> BoxFuture<'_, Result<(), VerifyError>> {
        Box::pin(async move { self.verify_against(&[]).await.map(|_| ()) })
    }

    /// Verifies the whole stored chain as [`verify`](Self::verify) does, and also against
    /// `checkpoints` kept outside the store: every checkpoint must verify under the host keys
    /// (keyed sinks), the stored entry at its sequence number must have its hash, and the trail
    /// must reach the highest one (removing the newest entries is detected). Returns the number
    /// of entries and the head.
    fn verify_against<'a>(
        &'a self,
        checkpoints: &'a [Checkpoint],
    ) -> BoxFuture<'a, Result<VerifyReport, VerifyError>>;
}

/// What a verified trail holds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VerifyReport {
    /// Number of entries (the last sequence number).
    pub entries: u64,
    /// Hash of the last entry ([`GENESIS_HASH`] for an empty trail).
    pub head: String,
    /// Whether every entry was checked as sealed under the host keys (`false`: a plain SHA-256
    /// chain, which someone who rewrites an entry can re-seal).
    pub sealed: bool,
    /// How many checkpoints kept outside the store the trail was checked against (0: removing
    /// the newest entries would not be detected).
    pub checkpoints: usize,
}

impl VerifyReport {
    /// Whether the trail is anchored: sealed under host keys and checked against at least one
    /// checkpoint, so that rewriting, re-sealing and truncation are all detected.
    pub fn anchored(&self) -> bool {
        self.sealed && self.checkpoints > 0
    }
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
    fn by_source<'a>(
        &'a self,
        source_id: &'a str,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<AuditEntry>, AuditError>> {
        (**self).by_source(source_id, limit)
    }
    fn verify(&self) -> BoxFuture<'_, Result<(), VerifyError>> {
        (**self).verify()
    }
    fn verify_against<'a>(
        &'a self,
        checkpoints: &'a [Checkpoint],
    ) -> BoxFuture<'a, Result<VerifyReport, VerifyError>> {
        (**self).verify_against(checkpoints)
    }
}

/// Verifies a stored chain read in chunks, in sequence order, optionally against checkpoints.
#[derive(Debug)]
pub struct ChainVerifier {
    sealer: Sealer,
    last: Option<AuditEntry>,
    /// Checkpoints by ascending sequence number.
    anchors: Vec<Checkpoint>,
    next_anchor: usize,
}

impl Default for ChainVerifier {
    fn default() -> Self {
        Self::with_sealer(Sealer::Plain)
    }
}

impl ChainVerifier {
    /// A verifier of a plain (keyless) chain, expecting entry 1 first.
    pub fn new() -> Self {
        Self::default()
    }

    /// A verifier of a chain sealed with `keys`: every entry must carry a seal under an accepted
    /// key.
    pub fn keyed(keys: Arc<HostKeys>) -> Self {
        Self::with_sealer(Sealer::Keyed(keys))
    }

    /// A verifier with the sealer of a sink (for sinks in backend crates).
    #[doc(hidden)]
    pub fn with_sealer(sealer: Sealer) -> Self {
        ChainVerifier {
            sealer,
            last: None,
            anchors: Vec::new(),
            next_anchor: 0,
        }
    }

    /// Also checks the chain against `checkpoints`. A keyed verifier refuses a checkpoint whose
    /// tag does not verify; a plain verifier takes them as given by the host.
    pub fn expect(&mut self, checkpoints: &[Checkpoint]) -> Result<(), ChainBreak> {
        if let Sealer::Keyed(keys) = &self.sealer
            && let Some(bad) = checkpoints.iter().find(|c| !c.verify(keys))
        {
            return Err(ChainBreak::ForgedCheckpoint { seq: bad.seq });
        }
        self.anchors.extend_from_slice(checkpoints);
        self.anchors.sort_by_key(|c| c.seq);
        Ok(())
    }

    /// Verifies the next chunk of entries.
    pub fn feed(&mut self, chunk: &[AuditEntry]) -> Result<(), ChainBreak> {
        let Some(first) = chunk.first() else {
            return Ok(());
        };
        if self.last.is_none() && (first.seq != 1 || first.prev_hash != GENESIS_HASH) {
            return Err(ChainBreak::Unlinked { seq: first.seq });
        }
        check_run(&self.sealer, self.last.as_ref(), chunk)?;
        for entry in chunk {
            while let Some(a) = self.anchors.get(self.next_anchor) {
                if a.seq > entry.seq {
                    break;
                }
                if a.seq == entry.seq && a.head != entry.hash {
                    return Err(ChainBreak::AnchorMismatch { seq: a.seq });
                }
                self.next_anchor += 1;
            }
        }
        self.last = chunk.last().cloned();
        Ok(())
    }

    /// The last verified entry.
    pub fn last(&self) -> Option<&AuditEntry> {
        self.last.as_ref()
    }

    /// Ends verification: the trail must reach every checkpoint.
    pub fn finish(self) -> Result<VerifyReport, ChainBreak> {
        let last = self.last.as_ref().map(|e| e.seq).unwrap_or(0);
        if let Some(highest) = self.anchors.last()
            && highest.seq > last
        {
            return Err(ChainBreak::Truncated {
                expected: highest.seq,
                last,
            });
        }
        Ok(VerifyReport {
            sealed: matches!(self.sealer, Sealer::Keyed(_)),
            checkpoints: self.anchors.len(),
            entries: last,
            head: self
                .last
                .map_or_else(|| GENESIS_HASH.to_owned(), |e| e.hash.to_string()),
        })
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

    fn verify_against<'a>(
        &'a self,
        checkpoints: &'a [Checkpoint],
    ) -> BoxFuture<'a, Result<VerifyReport, VerifyError>> {
        let mut verifier = ChainVerifier::with_sealer(self.sealer());
        let result = verifier
            .expect(checkpoints)
            .and_then(|()| self.with_storage(|e| verifier.feed(e)))
            .and_then(|()| verifier.finish());
        Box::pin(std::future::ready(result.map_err(VerifyError::from)))
    }
}
