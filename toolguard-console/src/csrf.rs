//! CSRF tokens bound to the reviewer's session: `HMAC-SHA256(key, tenant \0 subject \0 session)`,
//! hex. A token from another session, user or console key does not verify.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use toolguard_pipeline::Principal;

/// The key CSRF tokens are derived with; random per console unless the host sets one (replicas
/// behind a load balancer share it).
#[derive(Clone)]
pub(crate) struct CsrfKey([u8; 32]);

impl CsrfKey {
    /// A fresh random key.
    pub(crate) fn random() -> Self {
        // Two v4 UUIDs from a CSPRNG seeded by the OS: 244 random bits.
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        CsrfKey(key)
    }

    /// The key given by the host.
    pub(crate) fn from_bytes(key: [u8; 32]) -> Self {
        CsrfKey(key)
    }

    fn mac(&self, reviewer: &Principal) -> Option<Hmac<Sha256>> {
        if self.0 == [0u8; 32] {
            return None;
        }
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).ok()?;
        for part in [&reviewer.tenant, &reviewer.subject, &reviewer.session_id] {
            mac.update(part.as_bytes());
            mac.update(&[0]);
        }
        Some(mac)
    }

    /// The token of `reviewer`'s session (empty when the key is unusable).
    pub(crate) fn token(&self, reviewer: &Principal) -> String {
        self.mac(reviewer)
            .map(|m| hex::encode(m.finalize().into_bytes()))
            .unwrap_or_default()
    }

    /// Whether `token` is `reviewer`'s, compared in constant time.
    pub(crate) fn verify(&self, reviewer: &Principal, token: &str) -> bool {
        let (Some(mac), Ok(bytes)) = (self.mac(reviewer), hex::decode(token.trim())) else {
            return false;
        };
        mac.verify_slice(&bytes).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_verifies_only_for_its_own_session() {
        let key = CsrfKey::from_bytes([7; 32]);
        let tina = Principal::new("acme", "tina", "login-1");
        let token = key.token(&tina);
        assert!(key.verify(&tina, &token));
        assert!(!key.verify(&Principal::new("acme", "tina", "login-2"), &token));
        assert!(!key.verify(&Principal::new("acme", "omar", "login-1"), &token));
        assert!(!key.verify(&Principal::new("globex", "tina", "login-1"), &token));
        assert!(!CsrfKey::from_bytes([8; 32]).verify(&tina, &token));
        assert!(!key.verify(&tina, ""));
        assert!(!key.verify(&tina, "zz"));
    }

    #[test]
    fn an_unusable_key_issues_no_token_and_accepts_none() {
        let key = CsrfKey::from_bytes([0; 32]);
        let tina = Principal::new("acme", "tina", "login-1");
        assert_eq!(key.token(&tina), "");
        assert!(!key.verify(&tina, ""));
    }
}
