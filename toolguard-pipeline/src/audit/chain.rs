//! Sealing entries into the chain and checking one entry's seal and link.
//!
//! A sink with the host's [`HostKeys`] (every sink built with an [`super::AuditAnchor`], and every
//! [`super::MemoryAuditSink`]) seals each entry with HMAC-SHA256 under the active key over
//! `prev_hash`, a newline and the canonical encoding of `[seq, record]`; the hash is written
//! `<key id>:<hex>`. Without the key, nobody can recompute a valid hash: an edited, inserted or
//! reordered entry, and every entry rechained after it, fails verification. A sink without keys
//! writes the plain SHA-256 chain (64 hex digits), which detects accidental damage and naive
//! edits but not an attacker who recomputes every later hash; a keyed verifier refuses plain
//! entries ([`ChainBreak::Unsealed`]).

use arcstr::ArcStr;
use sha2::{Digest, Sha256};

use super::encode::encode_record;
use super::entry::{AuditEntry, AuditRecord};
use crate::canonical::{self, Sink};
use crate::digest::prefixed_hex;
use crate::keys::HostKeys;

/// The `prev_hash` of the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Domain of the keyed chain links.
const CHAIN_DOMAIN: &str = "toolguard/audit-chain/v1";

/// Where a chain stopped verifying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChainBreak {
    /// The entry's content no longer matches its hash.
    #[error("audit entry {seq} was altered: its hash does not match its content")]
    Altered {
        /// Sequence number of the entry.
        seq: u64,
    },
    /// The entry does not link to the one before it (an entry was removed, inserted or reordered).
    #[error("audit entry {seq} does not link to its predecessor")]
    Unlinked {
        /// Sequence number of the entry.
        seq: u64,
    },
    /// The entry is not sealed with an accepted host key (a plain hash, or an unknown key id),
    /// where the verifier expects keyed seals.
    #[error(
        "audit entry {seq} is not sealed with an accepted host key: it was rewritten without \
         the key, or the key was retired too early"
    )]
    Unsealed {
        /// Sequence number of the entry.
        seq: u64,
    },
    /// The trail ends before an anchored entry: the newest entries were removed.
    #[error(
        "the audit trail ends at entry {last} but entry {expected} was anchored: the newest \
         entries were removed"
    )]
    Truncated {
        /// The highest anchored sequence number.
        expected: u64,
        /// The last stored sequence number (0 for an empty trail).
        last: u64,
    },
    /// The stored entry at an anchored sequence number has another hash than the anchor.
    #[error("audit entry {seq} differs from its anchored checkpoint: the trail was rewritten")]
    AnchorMismatch {
        /// Sequence number of the entry.
        seq: u64,
    },
    /// A checkpoint's tag does not verify under the host keys.
    #[error("the checkpoint of entry {seq} is not signed with an accepted host key")]
    ForgedCheckpoint {
        /// Sequence number the checkpoint names.
        seq: u64,
    },
}

impl ChainBreak {
    /// Sequence number of the first broken entry (for [`ChainBreak::Truncated`], the anchored
    /// entry that is missing).
    pub fn seq(&self) -> u64 {
        match self {
            ChainBreak::Altered { seq }
            | ChainBreak::Unlinked { seq }
            | ChainBreak::Unsealed { seq }
            | ChainBreak::AnchorMismatch { seq }
            | ChainBreak::ForgedCheckpoint { seq } => *seq,
            ChainBreak::Truncated { expected, .. } => *expected,
        }
    }
}

/// Streams the sealed material into `out`: `prev_hash`, a newline, and the canonical JSON
/// encoding of `[seq, record]` (object keys sorted, strings NFC, no insignificant whitespace),
/// so that an entry read back from any store, by any build, hashes the same. `record` is the
/// record's canonical encoding ([`encode_record`]).
fn material<S: Sink + ?Sized>(seq: u64, record: &[u8], prev_hash: &str, out: &mut S) {
    out.put(prev_hash.as_bytes());
    out.put(b"\n[");
    canonical::uint(seq, out);
    out.put(b",");
    out.put(record);
    out.put(b"]");
}

/// The canonical encoding of `record`, the part of an entry's material that needs no lock.
pub(crate) fn encoded(record: &AuditRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    encode_record(record, &mut out);
    out
}

/// Largest encoding buffer a thread keeps between entries (a larger one, made for an entry
/// with long arguments, is freed after use).
const KEPT_BUFFER_BYTES: usize = 64 * 1024;

std::thread_local! {
    /// The thread's encoding buffer, reused from one entry to the next.
    static BODY: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f` with `record` and its canonical encoding ([`encoded`]), written into a buffer the
/// thread reuses, so that encoding an entry allocates nothing once the thread has sealed one.
pub(crate) fn with_encoded<R>(record: AuditRecord, f: impl FnOnce(AuditRecord, &[u8]) -> R) -> R {
    let mut body = BODY.take();
    body.clear();
    encode_record(&record, &mut body);
    let result = f(record, &body);
    if body.capacity() <= KEPT_BUFFER_BYTES {
        BODY.set(body);
    }
    result
}

/// How a sink seals its entries: with the host keys, or with plain SHA-256 (no key).
#[derive(Debug, Clone)]
pub enum Sealer {
    /// Plain SHA-256 links; verification accepts plain links only.
    Plain,
    /// HMAC-SHA256 links under the host keys; verification accepts keyed links only.
    Keyed(std::sync::Arc<HostKeys>),
}

impl Sealer {
    /// Seals `record` as entry `seq` after the entry whose hash is `prev_hash`.
    pub fn seal(&self, seq: u64, record: AuditRecord, prev_hash: &ArcStr) -> AuditEntry {
        let body = encoded(&record);
        self.seal_encoded(seq, record, &body, prev_hash)
    }

    /// Seals `record`, whose canonical encoding is `body`, as entry `seq` after
    /// the entry whose hash is `prev_hash`. The encoding can be made before taking the lock
    /// that orders the chain; only this hash needs it.
    pub fn seal_encoded(
        &self,
        seq: u64,
        record: AuditRecord,
        body: &[u8],
        prev_hash: &ArcStr,
    ) -> AuditEntry {
        AuditEntry {
            seq,
            record,
            hash: self.hash(seq, body, prev_hash),
            prev_hash: prev_hash.clone(),
        }
    }

    /// The hash of entry `seq` whose record's canonical encoding is `body`, after the entry
    /// whose hash is `prev_hash`.
    pub fn hash(&self, seq: u64, body: &[u8], prev_hash: &str) -> ArcStr {
        match self {
            Sealer::Plain => {
                let mut hasher = Sha256::new();
                material(seq, body, prev_hash, &mut hasher);
                prefixed_hex(&[], &hasher.finalize().into())
            }
            Sealer::Keyed(keys) => {
                keys.shared_tag_with(CHAIN_DOMAIN, |mac| material(seq, body, prev_hash, mac))
            }
        }
    }

    /// Whether `entry`'s hash is its seal (its link to the previous entry is checked apart).
    pub(crate) fn check(&self, entry: &AuditEntry) -> Result<(), ChainBreak> {
        let seq = entry.seq;
        let body = encoded(&entry.record);
        match self {
            Sealer::Plain if self.hash(seq, &body, &entry.prev_hash) == entry.hash => Ok(()),
            Sealer::Plain => Err(ChainBreak::Altered { seq }),
            Sealer::Keyed(keys) => {
                let known = entry
                    .hash
                    .split_once(':')
                    .is_some_and(|(id, _)| keys.ids().any(|k| k == id));
                let write =
                    |mac: &mut hmac::Hmac<Sha256>| material(seq, &body, &entry.prev_hash, mac);
                if !known {
                    Err(ChainBreak::Unsealed { seq })
                } else if keys.verify_with(CHAIN_DOMAIN, write, &entry.hash) {
                    Ok(())
                } else {
                    Err(ChainBreak::Altered { seq })
                }
            }
        }
    }
}

/// Seals `record` as entry `seq` after the entry whose hash is `prev_hash`, with the host keys.
/// There is no public way to seal without a key.
pub fn seal(
    keys: &std::sync::Arc<HostKeys>,
    seq: u64,
    record: AuditRecord,
    prev_hash: &str,
) -> AuditEntry {
    Sealer::Keyed(keys.clone()).seal(seq, record, &ArcStr::from(prev_hash))
}

/// Verifies a keyed chain given in sequence order, starting at its first entry (`prev_hash` of
/// the first entry is taken as given, so a suffix of a longer chain verifies too). Names the
/// first broken entry.
pub fn verify_chain(
    keys: &std::sync::Arc<HostKeys>,
    entries: &[AuditEntry],
) -> Result<(), ChainBreak> {
    check_run(&Sealer::Keyed(keys.clone()), None, entries)
}

/// Checks links and seals of `entries`, the first linking to `prev` when given.
pub(crate) fn check_run<'e>(
    sealer: &Sealer,
    mut prev: Option<&'e AuditEntry>,
    entries: &'e [AuditEntry],
) -> Result<(), ChainBreak> {
    for entry in entries {
        if let Some(p) = prev
            && (entry.prev_hash != p.hash || entry.seq != p.seq + 1)
        {
            return Err(ChainBreak::Unlinked { seq: entry.seq });
        }
        sealer.check(entry)?;
        prev = Some(entry);
    }
    Ok(())
}
