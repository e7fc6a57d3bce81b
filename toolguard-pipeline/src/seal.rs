//! Sealing approval records with the host key, so that write access to the approval store is
//! not enough to forge, stretch or revive an approval.
//!
//! [`seal_approval`] computes an HMAC-SHA256 tag (under the active [`HostKeys`] key) over the
//! canonical encoding of **every** field of an [`ApprovalRequest`] except `version` (the
//! store's compare-and-set counter) and `seal` itself: arguments, amount, tool, requester (tenant,
//! subject, roles, session, authentication time), eligible roles, approvers required, decisions,
//! state, expiry, creation, policy and tool revisions, provider path, preview, request and binding
//! digests, idempotency scope, cause. The holder of the key re-seals the record on every write
//! ([`ApprovalRequest::sealed`]); [`verify_approval_seal`] refuses a record whose stored fields
//! were changed by anyone else — lowering the approvers of a dual-control request, widening its
//! eligible roles, lowering its amount, extending its expiry, adding a forged decision, moving a
//! rejected request back to pending.
//!
//! What the seal does not stop: an attacker with write access can delete a record (the request is
//! then unknown and nothing executes) or put back an *earlier* sealed version of the same record
//! (a rollback). A rollback cannot make an action execute twice when the approval's amount is
//! held by a ledger reservation (a committed reservation cannot be committed again) and its
//! outcome is stored under its idempotency key: a second run answers `reservation_missing`.

use serde_json::Value;

use crate::digest::canonical_json;
use crate::keys::HostKeys;
use crate::store::ApprovalRequest;

/// Domain of the approval seal.
const SEAL_DOMAIN: &str = "toolguard/approval-seal/v1";

/// Why a stored approval record was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// The record carries no seal (written without a key, or the seal was removed).
    #[error("approval `{id}` carries no seal; it was written without the host key or altered")]
    Missing {
        /// Approval id.
        id: String,
    },
    /// The seal does not match the record, or names a key that is not accepted.
    #[error(
        "approval `{id}` does not match its seal: a stored field was changed outside toolguard"
    )]
    Mismatch {
        /// Approval id.
        id: String,
    },
}

impl SealError {
    /// The audit reason code: `binding_mismatch`.
    pub fn reason(&self) -> &'static str {
        "binding_mismatch"
    }
}

/// The canonical document the seal covers: the record without `version` and `seal`.
fn sealed_document(request: &ApprovalRequest) -> String {
    let mut value = serde_json::to_value(request).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.remove("version");
        map.remove("seal");
    }
    canonical_json(&value)
}

/// The seal of `request` under the active key: `<key id>:<hex>`.
pub fn seal_approval(keys: &HostKeys, request: &ApprovalRequest) -> String {
    keys.tag(SEAL_DOMAIN, sealed_document(request).as_bytes())
}

/// Verifies the seal stored with `request` (under any accepted key).
pub fn verify_approval_seal(keys: &HostKeys, request: &ApprovalRequest) -> Result<(), SealError> {
    let Some(seal) = request.seal.as_deref() else {
        return Err(SealError::Missing {
            id: request.id.clone(),
        });
    };
    if keys.verify(SEAL_DOMAIN, sealed_document(request).as_bytes(), seal) {
        Ok(())
    } else {
        Err(SealError::Mismatch {
            id: request.id.clone(),
        })
    }
}

impl ApprovalRequest {
    /// This record with its seal set to [`seal_approval`] of its current fields. Call it after
    /// the last change and before every `create` or `update`.
    #[must_use]
    pub fn sealed(mut self, keys: &HostKeys) -> Self {
        self.seal = Some(seal_approval(keys, &self));
        self
    }
}
