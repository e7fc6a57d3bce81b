use super::entry::{AuditEntry, AuditRecord};
use crate::digest::{canonical_json, sha256_hex};

/// The `prev_hash` of the first entry.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where a chain stopped verifying.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
}

impl ChainBreak {
    /// Sequence number of the first broken entry.
    pub fn seq(&self) -> u64 {
        match self {
            ChainBreak::Altered { seq } | ChainBreak::Unlinked { seq } => *seq,
        }
    }
}

/// SHA-256 over `prev_hash`, a newline, and the canonical JSON encoding of `[seq, record]`
/// ([`canonical_json`]: object keys sorted, strings NFC, no insignificant whitespace). The
/// encoding does not depend on field order or on serde_json's features (`preserve_order`), so an
/// entry read back from any store, by any build, hashes the same.
fn entry_hash(seq: u64, record: &AuditRecord, prev_hash: &str) -> String {
    let Ok(value) = serde_json::to_value((seq, record)) else {
        // A record always serializes; should it not, no valid hash can match it.
        return String::new();
    };
    let encoded = canonical_json(&value);
    let mut material = Vec::with_capacity(prev_hash.len() + 1 + encoded.len());
    material.extend_from_slice(prev_hash.as_bytes());
    material.push(b'\n');
    material.extend_from_slice(encoded.as_bytes());
    sha256_hex(&material)
}

/// Seals `record` as entry `seq` after the entry whose hash is `prev_hash`.
pub fn seal(seq: u64, record: AuditRecord, prev_hash: &str) -> AuditEntry {
    let hash = entry_hash(seq, &record, prev_hash);
    AuditEntry {
        seq,
        record,
        prev_hash: prev_hash.to_owned(),
        hash,
    }
}

/// Verifies a chain given in sequence order, starting at its first entry (`prev_hash` of the first
/// entry is taken as given, so a suffix of a longer chain verifies too). Names the first broken
/// entry.
pub fn verify_chain(entries: &[AuditEntry]) -> Result<(), ChainBreak> {
    let mut prev: Option<&AuditEntry> = None;
    for entry in entries {
        if let Some(p) = prev
            && (entry.prev_hash != p.hash || entry.seq != p.seq + 1)
        {
            return Err(ChainBreak::Unlinked { seq: entry.seq });
        }
        if entry_hash(entry.seq, &entry.record, &entry.prev_hash) != entry.hash {
            return Err(ChainBreak::Altered { seq: entry.seq });
        }
        prev = Some(entry);
    }
    Ok(())
}
