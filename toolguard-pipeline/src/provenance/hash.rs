//! Keyed hashes of canonical values: what a source keeps of the values in its content, so that
//! no plaintext of untrusted content is stored and nobody without the key can test a guess.
//!
//! SipHash-2-4 with a 128-bit output (the `siphasher` crate), keyed with 16 bytes derived from the active host key
//! ([`HostKeys`]) as `HMAC-SHA256(host key, "toolguard/provenance-value" || 0x00)`: a keyed
//! pseudo-random function (nobody without the key can test a guess), fast enough to hash every
//! argument of every judged call (an HMAC per value cost several microseconds per call). With
//! host keys every replica computes the same hashes; without host keys each dispatcher draws a random
//! key, and values recorded by one process never match arguments judged by another (the precise
//! mode across replicas needs host keys). After a key rotation, values recorded under the old
//! key no longer match: rotate between conversations, or expect calls to be judged as if the
//! values were made up by the model (`model`), never as trusted.

use std::hash::{BuildHasherDefault, Hasher};

use base64::Engine as _;
use hmac::Mac;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::keys::HostKeys;

/// The MAC domain of value hashes.
const DOMAIN: &str = "toolguard/provenance-value";

/// Most values kept per source; a source with more is marked
/// [`values_truncated`](super::Source::values_truncated) and the flow policy treats every value
/// it cannot place as possibly coming from it (fail closed).
pub const MAX_VALUES_PER_SOURCE: usize = 512;

/// Most values a session holds: [`MAX_VALUES_PER_SOURCE`] for each of its
/// [`MAX_SOURCES_PER_SESSION`](super::MAX_SOURCES_PER_SESSION) untrusted sources, and as many
/// trusted.
pub const MAX_VALUES_PER_SESSION: usize = MAX_VALUES_PER_SOURCE * super::MAX_SOURCES_PER_SESSION;

/// The keyed hash of one canonical value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ValueHash([u8; 16]);

impl std::fmt::Debug for ValueHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ValueHash({})", hex::encode(self.0))
    }
}

impl std::hash::Hash for ValueHash {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // The bytes are a MAC: uniformly distributed, so eight of them are a hash already.
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(head));
    }
}

/// A hasher that passes a [`ValueHash`]'s own bytes through.
#[derive(Default)]
pub(crate) struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Hash-map state for [`ValueHash`] keys.
pub(crate) type PassThroughState = BuildHasherDefault<PassThrough>;

/// The value hashes of one source, stored as one base64 string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueSet(Vec<ValueHash>);

impl ValueSet {
    /// No values.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many values.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The hashes.
    pub fn iter(&self) -> impl Iterator<Item = &ValueHash> {
        self.0.iter()
    }

    /// Whether `hash` is among them.
    pub fn contains(&self, hash: &ValueHash) -> bool {
        self.0.contains(hash)
    }
}

impl Serialize for ValueSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.iter().flat_map(|h| h.0).collect();
        s.serialize_str(&base64::engine::general_purpose::STANDARD_NO_PAD.encode(bytes))
    }
}

impl<'de> Deserialize<'de> for ValueSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)?;
        if bytes.len() % 16 != 0 {
            return Err(serde::de::Error::custom(
                "provenance values: length is not a multiple of 16 bytes",
            ));
        }
        Ok(ValueSet(
            bytes
                .chunks_exact(16)
                .map(|c| {
                    let mut h = [0u8; 16];
                    h.copy_from_slice(c);
                    ValueHash(h)
                })
                .collect(),
        ))
    }
}

/// The key value hashes are made with.
#[derive(Clone)]
pub struct ValueKey {
    k0: u64,
    k1: u64,
}

impl std::fmt::Debug for ValueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueKey").finish_non_exhaustive()
    }
}

impl ValueKey {
    /// The key of `keys`' active host key (the same on every replica that shares the keys).
    pub fn from_host_keys(keys: &HostKeys) -> Self {
        let Some(mac) = keys.active_mac(DOMAIN) else {
            return ValueKey::random();
        };
        let derived = mac.finalize().into_bytes();
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&derived[at..at + 8]);
            u64::from_le_bytes(w)
        };
        ValueKey {
            k0: word(0),
            k1: word(8),
        }
    }

    /// A random key of this process.
    pub fn random() -> Self {
        Self::from_host_keys(&HostKeys::ephemeral())
    }

    /// The hash of one canonical value.
    pub fn hash(&self, canonical: &str) -> ValueHash {
        ValueHash(siphash_2_4_128(self.k0, self.k1, canonical.as_bytes()))
    }

    /// The hashes of `values` (canonical forms), de-duplicated, at most
    /// [`MAX_VALUES_PER_SOURCE`]; `true` when some were left out.
    pub fn hash_all(&self, values: &[String]) -> (ValueSet, bool) {
        let mut seen = std::collections::HashSet::with_capacity_and_hasher(
            values.len().min(MAX_VALUES_PER_SOURCE),
            PassThroughState::default(),
        );
        let mut out = Vec::new();
        for v in values {
            let h = self.hash(v);
            if seen.insert(h) {
                if out.len() == MAX_VALUES_PER_SOURCE {
                    return (ValueSet(out), true);
                }
                out.push(h);
            }
        }
        (ValueSet(out), false)
    }
}

/// SipHash-2-4 with 128-bit output (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
/// the 128-bit variant of its reference implementation), from the `siphasher` crate: the two
/// 64-bit halves, little-endian.
fn siphash_2_4_128(k0: u64, k1: u64, data: &[u8]) -> [u8; 16] {
    siphasher::sip128::SipHasher24::new_with_keys(k0, k1)
        .hash(data)
        .as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_128_matches_the_reference_vectors() {
        // Key 00 01 .. 0f; messages 00 01 .. (n-1); the reference implementation's vectors_128.
        let k0 = u64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7]);
        let k1 = u64::from_le_bytes([8, 9, 10, 11, 12, 13, 14, 15]);
        let msg: Vec<u8> = (0u8..16).collect();
        assert_eq!(
            hex::encode(siphash_2_4_128(k0, k1, &msg[..0])),
            "a3817f04ba25a8e66df67214c7550293"
        );
        assert_eq!(
            hex::encode(siphash_2_4_128(k0, k1, &msg[..1])),
            "da87c1d86b99af44347659119b22fc45"
        );
        assert_eq!(
            hex::encode(siphash_2_4_128(k0, k1, &msg[..15])),
            "5493e99933b0a8117e08ec0f97cfc3d9"
        );
    }

    #[test]
    fn hashes_are_keyed_deduplicated_bounded_and_round_trip() {
        let a = ValueKey::random();
        let b = ValueKey::random();
        assert_ne!(a.hash("x"), b.hash("x"));
        assert_eq!(a.hash("x"), a.hash("x"));
        let (set, cut) = a.hash_all(&["x".into(), "y".into(), "x".into()]);
        assert_eq!((set.len(), cut), (2, false));
        let json = serde_json::to_string(&set).unwrap();
        // One base64 string of the two 16-byte hashes, nothing of the values.
        assert_eq!(json.len(), 2 + 43, "{json}");
        let back: ValueSet = serde_json::from_str(&json).unwrap();
        assert_eq!(back, set);
        let many: Vec<String> = (0..MAX_VALUES_PER_SOURCE + 3)
            .map(|i| i.to_string())
            .collect();
        let (set, cut) = a.hash_all(&many);
        assert_eq!((set.len(), cut), (MAX_VALUES_PER_SOURCE, true));
        let keys = HostKeys::new("k1", [3u8; 32]).unwrap();
        assert_eq!(
            ValueKey::from_host_keys(&keys).hash("v"),
            ValueKey::from_host_keys(&HostKeys::new("k1", [3u8; 32]).unwrap()).hash("v")
        );
    }
}
