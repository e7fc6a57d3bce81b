//! Keyed hashes of canonical values: what a source keeps of the values in its content, so that
//! no plaintext of untrusted content is stored and nobody without the key can test a guess.
//!
//! `HMAC-SHA256(key, "toolguard/provenance-value" || 0x00 || canonical value)`, truncated to 16
//! bytes. The key is the active host key ([`HostKeys`]) when the dispatcher has host keys, so
//! that every replica computes the same hashes; without host keys each dispatcher draws a random
//! key, and values recorded by one process never match arguments judged by another (the precise
//! mode across replicas needs host keys). After a key rotation, values recorded under the old
//! key no longer match: rotate between conversations, or expect calls to be judged as if the
//! values were made up by the model (`model`), never as trusted.

use std::hash::{BuildHasherDefault, Hasher};

use base64::Engine as _;
use hmac::Mac;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::keys::HostKeys;

type HmacSha256 = hmac::Hmac<sha2::Sha256>;

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
    mac: HmacSha256,
}

impl std::fmt::Debug for ValueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueKey").finish_non_exhaustive()
    }
}

impl ValueKey {
    /// The key of `keys`' active host key (the same on every replica that shares the keys).
    pub fn from_host_keys(keys: &HostKeys) -> Self {
        match keys.active_mac(DOMAIN) {
            Some(mac) => ValueKey { mac },
            None => ValueKey::random(),
        }
    }

    /// A random key of this process.
    pub fn random() -> Self {
        Self::from_host_keys(&HostKeys::ephemeral())
    }

    /// The hash of one canonical value.
    pub fn hash(&self, canonical: &str) -> ValueHash {
        let mut mac = self.mac.clone();
        mac.update(canonical.as_bytes());
        let full = mac.finalize().into_bytes();
        let mut h = [0u8; 16];
        h.copy_from_slice(&full[..16]);
        ValueHash(h)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_keyed_deduplicated_bounded_and_round_trip() {
        let a = ValueKey::random();
        let b = ValueKey::random();
        assert_ne!(a.hash("x"), b.hash("x"));
        assert_eq!(a.hash("x"), a.hash("x"));
        let (set, cut) = a.hash_all(&["x".into(), "y".into(), "x".into()]);
        assert_eq!((set.len(), cut), (2, false));
        let json = serde_json::to_string(&set).unwrap();
        assert!(!json.contains('x'), "{json}");
        let back: ValueSet = serde_json::from_str(&json).unwrap();
        assert_eq!(back, set);
        let many: Vec<String> = (0..MAX_VALUES_PER_SOURCE + 3).map(|i| i.to_string()).collect();
        let (set, cut) = a.hash_all(&many);
        assert_eq!((set.len(), cut), (MAX_VALUES_PER_SOURCE, true));
        let keys = HostKeys::new("k1", [3u8; 32]).unwrap();
        assert_eq!(
            ValueKey::from_host_keys(&keys).hash("v"),
            ValueKey::from_host_keys(&HostKeys::new("k1", [3u8; 32]).unwrap()).hash("v")
        );
    }
}
