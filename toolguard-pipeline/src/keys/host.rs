//! HMAC-SHA256 keys the host configures once for all replicas.
//!
//! One key is *active*: every new tag (request digest, approval binding, approval seal, audit
//! chain link, checkpoint) is made with it and names it (`<key id>:<hex>`). Older keys stay
//! *accepted*: a tag naming one of them still verifies, so records made before a rotation keep
//! working until they expire. Rotation: add the new key as active and keep the old one with
//! [`HostKeys::accept`] for as long as the longest-lived record it tagged (idempotency TTL,
//! approval expiry, the audit trail's retention); then drop it. A tag naming an unknown key id
//! never verifies (fail closed).
//!
//! Every tag is `HMAC-SHA256(secret, domain || 0x00 || message)`; the domain string separates the
//! uses, so a tag made for one purpose is never valid for another.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Fewest secret bytes a key may have (256 bits).
pub const MIN_SECRET_LEN: usize = 32;

/// Longest key id.
const MAX_ID_LEN: usize = 32;

/// Why a key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The secret is shorter than [`MIN_SECRET_LEN`] bytes.
    #[error(
        "host key `{id}`: the secret has {len} bytes; use at least {MIN_SECRET_LEN} random bytes"
    )]
    ShortSecret {
        /// Key id.
        id: String,
        /// Bytes given.
        len: usize,
    },
    /// The key id is empty, too long, or has characters other than ASCII letters, digits, `-`
    /// and `_`.
    #[error(
        "host key id `{0}` is invalid: use 1 to 32 ASCII letters, digits, `-` or `_` (it is \
         written before every tag, separated by `:`)"
    )]
    BadId(String),
    /// Two keys have the same id.
    #[error("host key id `{0}` is given twice; every key needs its own id")]
    DuplicateId(String),
}

#[derive(Clone)]
struct Key {
    id: String,
    /// HMAC-SHA256 keyed with the secret (its inner and outer pads already hashed), cloned for
    /// each tag; the secret itself is not kept.
    keyed: HmacSha256,
}

impl Key {
    fn new(id: String, secret: &[u8]) -> Self {
        // HMAC takes keys of any length.
        let keyed = match HmacSha256::new_from_slice(secret) {
            Ok(m) => m,
            Err(_) => unreachable_hmac(),
        };
        Key { id, keyed }
    }
}

/// The host's MAC keys: one active key and older keys accepted for verification.
///
/// The secrets never appear in `Debug` output, errors or logs. What they protect: without a
/// secret, write access to a store is not enough to forge a request digest, an approval seal or
/// an audit chain link; and a `sensitive` argument cannot be recovered from a stored digest by
/// trying candidates.
#[derive(Clone)]
pub struct HostKeys {
    keys: Vec<Key>,
}

impl std::fmt::Debug for HostKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|k| k.id.as_str()).collect();
        f.debug_struct("HostKeys")
            .field("active", &ids.first())
            .field("ids", &ids)
            .finish_non_exhaustive()
    }
}

fn check(id: &str, secret: &[u8]) -> Result<(), KeyError> {
    let id_ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !id_ok {
        return Err(KeyError::BadId(id.to_owned()));
    }
    if secret.len() < MIN_SECRET_LEN {
        return Err(KeyError::ShortSecret {
            id: id.to_owned(),
            len: secret.len(),
        });
    }
    Ok(())
}

impl HostKeys {
    /// Keys with `secret` (at least [`MIN_SECRET_LEN`] random bytes) active under `id`.
    pub fn new(id: impl Into<String>, secret: impl Into<Vec<u8>>) -> Result<Self, KeyError> {
        let (id, secret) = (id.into(), secret.into());
        check(&id, &secret)?;
        Ok(HostKeys {
            keys: vec![Key::new(id, &secret)],
        })
    }

    /// Also accepts tags made with an older key (for verification only; new tags use the active
    /// key).
    pub fn accept(
        mut self,
        id: impl Into<String>,
        secret: impl Into<Vec<u8>>,
    ) -> Result<Self, KeyError> {
        let (id, secret) = (id.into(), secret.into());
        check(&id, &secret)?;
        if self.keys.iter().any(|k| k.id == id) {
            return Err(KeyError::DuplicateId(id));
        }
        self.keys.push(Key::new(id, &secret));
        Ok(self)
    }

    /// Keys with a fresh random secret, for tests and single-process use: nothing tagged with
    /// them verifies after a restart.
    pub fn ephemeral() -> Self {
        let secret: Vec<u8> = (0..2)
            .flat_map(|_| *uuid::Uuid::new_v4().as_bytes())
            .collect();
        HostKeys {
            keys: vec![Key::new("ephemeral".to_owned(), &secret)],
        }
    }

    /// Id of the active key.
    pub fn active_id(&self) -> &str {
        // `new` and `ephemeral` create the active key; nothing removes it.
        self.keys.first().map(|k| k.id.as_str()).unwrap_or_default()
    }

    /// Ids of every accepted key, the active one first.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|k| k.id.as_str())
    }

    /// The MAC of `domain` under `key`, ready for the message.
    fn mac(key: &Key, domain: &str) -> HmacSha256 {
        let mut mac = key.keyed.clone();
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        mac
    }

    /// The MAC of `domain` under the active key, ready for a message (keyed hashes that name no
    /// key, such as the provenance value hashes).
    pub(crate) fn active_mac(&self, domain: &str) -> Option<HmacSha256> {
        self.keys.first().map(|key| Self::mac(key, domain))
    }

    /// The tag of `message` in `domain` under the active key: `<key id>:<64 hex digits>`.
    pub(crate) fn tag(&self, domain: &str, message: &[u8]) -> String {
        self.tag_with(domain, |mac| mac.update(message))
    }

    /// [`tag_with`](Self::tag_with) as a shared string, made in one allocation (audit chain
    /// links).
    pub(crate) fn shared_tag_with(
        &self,
        domain: &str,
        write: impl FnOnce(&mut HmacSha256),
    ) -> arcstr::ArcStr {
        let Some(key) = self.keys.first() else {
            return arcstr::ArcStr::new();
        };
        let mut mac = Self::mac(key, domain);
        write(&mut mac);
        let out: [u8; 32] = mac.finalize().into_bytes().into();
        crate::digest::prefixed_hex(&[&key.id, ":"], &out)
    }

    /// The tag of the message `write` streams into the MAC, in `domain`, under the active key.
    pub(crate) fn tag_with(&self, domain: &str, write: impl FnOnce(&mut HmacSha256)) -> String {
        let Some(key) = self.keys.first() else {
            return String::new();
        };
        let mut mac = Self::mac(key, domain);
        write(&mut mac);
        let out: [u8; 32] = mac.finalize().into_bytes().into();
        let mut tag = String::with_capacity(key.id.len() + 1 + 64);
        tag.push_str(&key.id);
        tag.push(':');
        crate::digest::push_hex(&out, &mut tag);
        tag
    }

    /// Whether `tag` is the tag of `message` in `domain` under an accepted key (compared in
    /// constant time).
    pub(crate) fn verify(&self, domain: &str, message: &[u8], tag: &str) -> bool {
        self.verify_with(domain, |mac| mac.update(message), tag)
    }

    /// Whether `tag` is the tag, under an accepted key, of the message `write` streams.
    pub(crate) fn verify_with(
        &self,
        domain: &str,
        write: impl FnOnce(&mut HmacSha256),
        tag: &str,
    ) -> bool {
        let Some((id, hex_mac)) = tag.split_once(':') else {
            return false;
        };
        let Some(key) = self.keys.iter().find(|k| k.id == id) else {
            return false;
        };
        let mut bytes = [0u8; 32];
        if hex::decode_to_slice(hex_mac, &mut bytes).is_err() {
            return false;
        }
        let mut mac = Self::mac(key, domain);
        write(&mut mac);
        mac.verify_slice(&bytes).is_ok()
    }
}

/// `Hmac::new_from_slice` fails only for MACs with a fixed key size, which HMAC is not.
#[cold]
fn unreachable_hmac() -> HmacSha256 {
    // Falls back to an all-zero key rather than panicking; never reached for HMAC-SHA256.
    <HmacSha256 as hmac::digest::KeyInit>::new(&Default::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> HostKeys {
        HostKeys::new("k1", [7u8; 32]).unwrap()
    }

    #[test]
    fn refuses_short_secrets_and_bad_ids() {
        assert!(matches!(
            HostKeys::new("k1", [0u8; 31]),
            Err(KeyError::ShortSecret { len: 31, .. })
        ));
        assert!(matches!(
            HostKeys::new("", [0u8; 32]),
            Err(KeyError::BadId(_))
        ));
        assert!(matches!(
            HostKeys::new("a:b", [0u8; 32]),
            Err(KeyError::BadId(_))
        ));
        assert!(matches!(
            keys().accept("k1", [1u8; 32]),
            Err(KeyError::DuplicateId(_))
        ));
    }

    #[test]
    fn tags_verify_under_accepted_keys_only() {
        let old = keys();
        let tag = old.tag("d", b"m");
        assert!(tag.starts_with("k1:"));
        assert!(old.verify("d", b"m", &tag));
        assert!(!old.verify("e", b"m", &tag), "domains separate uses");
        assert!(!old.verify("d", b"n", &tag));
        let rotated = HostKeys::new("k2", [9u8; 32])
            .unwrap()
            .accept("k1", [7u8; 32])
            .unwrap();
        assert!(
            rotated.verify("d", b"m", &tag),
            "an older key still verifies"
        );
        assert!(rotated.tag("d", b"m").starts_with("k2:"));
        let other = HostKeys::new("k1", [8u8; 32]).unwrap();
        assert!(!other.verify("d", b"m", &tag), "same id, other secret");
        assert!(!rotated.verify("d", b"m", "k3:00"));
        assert!(!rotated.verify("d", b"m", "garbage"));
    }

    #[test]
    fn debug_shows_no_secret() {
        let text = format!("{:?}", keys());
        assert!(text.contains("k1"));
        assert!(!text.contains("7, 7"));
    }
}
