//! Canonical JSON encoding and digests: the request digest that binds idempotency records and
//! approvals to one exact action, and the approval binding.
//!
//! The keyed digests ([`keyed_request_digest`], [`keyed_approval_binding`]) are HMAC-SHA256 tags
//! under the host's [`HostKeys`], written `<key id>:<hex>`. Unlike a plain SHA-256 over the
//! arguments, a keyed digest does not let anyone who reads a store, a log or an audit entry
//! recover a `sensitive` argument by trying candidates (a 4-digit PIN would fall to 10,000
//! guesses), nor compute the digest of an action of their choosing. After a key rotation, a
//! stored digest still matches ([`request_digest_matches`]) as long as its key is accepted.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::call::Principal;
use crate::canonical::{self, Sink};
use crate::keys::HostKeys;
use crate::spec::ToolSpec;
use crate::store::ApprovalRequest;

/// Domain of [`keyed_request_digest`].
const REQUEST_DOMAIN: &str = "toolguard/request-digest/v1";
/// Domain of [`keyed_approval_binding`].
const BINDING_DOMAIN: &str = "toolguard/approval-binding/v1";

/// Encodes `value` canonically: object keys sorted by code point, no insignificant whitespace,
/// strings in Unicode NFC. Two values that mean the same encode to the same bytes.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    canonical::value(value, &mut out);
    // Only serde_json's UTF-8 output and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

/// Lower-case hex of `bytes`, appended to `out` (a table lookup per byte, no char iterator).
pub(crate) fn push_hex(bytes: &[u8; 32], out: &mut String) {
    let mut buf = [0u8; 64];
    // The buffer is exactly twice the input; hex digits are ASCII.
    if hex::encode_to_slice(bytes, &mut buf).is_ok()
        && let Ok(digits) = std::str::from_utf8(&buf)
    {
        out.push_str(digits);
    }
}

/// `prefix` followed by the lower-case hex of `digest`, as a shared string made in one
/// allocation (audit chain links: `<key id>:<hex>`, or the bare hex).
pub(crate) fn prefixed_hex(prefix: &[&str], digest: &[u8; 32]) -> arcstr::ArcStr {
    let start: usize = prefix.iter().map(|p| p.len()).sum();
    let made = arcstr::ArcStr::init_with(start + 64, |buf| {
        let mut at = 0;
        for part in prefix {
            buf[at..at + part.len()].copy_from_slice(part.as_bytes());
            at += part.len();
        }
        // The rest of the buffer is exactly twice the digest.
        let _ = hex::encode_to_slice(digest, &mut buf[start..]);
    });
    // The bytes are the prefix's (a `str`) and ASCII hex digits: always UTF-8.
    made.unwrap_or_default()
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex_of(Sha256::digest(bytes).into())
}

/// Lower-case hex of a 32-byte digest.
pub(crate) fn hex_of(digest: [u8; 32]) -> String {
    let mut out = String::with_capacity(64);
    push_hex(&digest, &mut out);
    out
}

/// The request digest of DESIGN.md without a key: SHA-256 over the canonical encoding of tool name,
/// input-schema revision, sanitized arguments, tenant and subject.
pub fn request_digest(
    tool: &str,
    revision: u32,
    args: &Value,
    tenant: &str,
    subject: &str,
) -> String {
    RequestDocument::new(tool, revision, args, tenant, subject).plain_digest()
}

/// What a request digest covers: tool, input-schema revision, the arguments (without the
/// idempotency-key member, when it names one), tenant and subject. Streamed canonically into the
/// hasher: `{"arguments":..,"revision":..,"subject":..,"tenant":..,"tool":..}`.
pub(crate) struct RequestDocument<'a> {
    pub(crate) tool: &'a str,
    pub(crate) revision: u32,
    pub(crate) arguments: &'a Value,
    /// The member of `arguments` left out (the idempotency key field).
    pub(crate) without: Option<&'a str>,
    pub(crate) tenant: &'a str,
    pub(crate) subject: &'a str,
}

impl<'a> RequestDocument<'a> {
    /// The document of `args`, all of it.
    pub(crate) fn new(
        tool: &'a str,
        revision: u32,
        arguments: &'a Value,
        tenant: &'a str,
        subject: &'a str,
    ) -> Self {
        RequestDocument {
            tool,
            revision,
            arguments,
            without: None,
            tenant,
            subject,
        }
    }

    /// Writes the canonical document into `out`.
    pub(crate) fn write<S: Sink + ?Sized>(&self, out: &mut S) {
        out.put(b"{");
        canonical::key("arguments", true, out);
        canonical::value_without(self.arguments, self.without, out);
        canonical::key("revision", false, out);
        canonical::uint(u64::from(self.revision), out);
        canonical::key("subject", false, out);
        canonical::string(self.subject, out);
        canonical::key("tenant", false, out);
        canonical::string(self.tenant, out);
        canonical::key("tool", false, out);
        canonical::string(self.tool, out);
        out.put(b"}");
    }

    /// The plain SHA-256 digest, lower-case hex.
    pub(crate) fn plain_digest(&self) -> String {
        let mut hasher = Sha256::new();
        self.write(&mut hasher);
        hex_of(hasher.finalize().into())
    }

    /// The keyed digest under the active host key.
    pub(crate) fn keyed_digest(&self, keys: &HostKeys) -> String {
        keys.tag_with(REQUEST_DOMAIN, |mac| self.write(mac))
    }

    /// Whether `stored` is this document's keyed digest under an accepted key.
    pub(crate) fn keyed_matches(&self, keys: &HostKeys, stored: &str) -> bool {
        keys.verify_with(REQUEST_DOMAIN, |mac| self.write(mac), stored)
    }
}

/// The keyed request digest: HMAC-SHA256 under the active host key over the same canonical
/// document as [`request_digest`] (tool, input-schema revision, sanitized arguments, tenant,
/// subject), written `<key id>:<hex>`.
pub fn keyed_request_digest(
    keys: &HostKeys,
    tool: &str,
    revision: u32,
    args: &Value,
    tenant: &str,
    subject: &str,
) -> String {
    RequestDocument::new(tool, revision, args, tenant, subject).keyed_digest(keys)
}

/// Whether `stored` (a [`keyed_request_digest`], possibly made with an older accepted key) is the
/// digest of this request. A digest naming a key that is no longer accepted never matches.
pub fn request_digest_matches(
    keys: &HostKeys,
    stored: &str,
    tool: &str,
    revision: u32,
    args: &Value,
    tenant: &str,
    subject: &str,
) -> bool {
    RequestDocument::new(tool, revision, args, tenant, subject).keyed_matches(keys, stored)
}

/// The fields of an approval request that decide whether and how the approved action executes,
/// as one canonical document (the approver's identity is added per decision).
fn binding_document(request: &ApprovalRequest, approver: Option<&str>) -> String {
    let provider = request.provider.clone().unwrap_or_default();
    let mut roles = request.eligible_roles.clone();
    roles.sort();
    roles.dedup();
    let mut document = serde_json::json!({
        "approval_id": request.id,
        "tool": request.tool,
        "tenant": request.requester.tenant,
        "requester": request.requester.subject,
        "session": request.requester.session_id,
        "provider": provider.provider,
        "api_family": provider.api_family,
        "adapter_revision": provider.adapter_revision,
        "response_id": provider.response_id,
        "operation_id": request.operation_id,
        "call_id": request.call_id,
        "idempotency": request.idempotency,
        "request_digest": request.request_digest,
        "tool_revision": request.tool_revision,
        "policy_revision": request.policy_revision,
        "amount": request.amount,
        "eligible_roles": roles,
        "approvals_required": request.approvals_required,
        "created_at_ms": request.created_at_ms,
        "expires_at_ms": request.expires_at_ms,
        "cause": request.cause,
        "approver": approver,
        "provenance": crate::provenance::source_ids(&request.provenance),
    });
    // Bound when present; absent, the document is the one requests made before origins had.
    if !request.origins.is_empty()
        && let Some(map) = document.as_object_mut()
    {
        map.insert(
            "origins".to_owned(),
            serde_json::to_value(&request.origins).unwrap_or_default(),
        );
    }
    canonical_json(&document)
}

/// The keyed approval binding: HMAC-SHA256 under the active host key over every field that
/// decides whether and how an approved action executes — approval id, tool, tenant, requester
/// and session, provider path, operation and call ids, idempotency scope, request digest (which
/// covers the normalized arguments), tool and policy revisions, amount, eligible roles (as a
/// set), approvers required, creation and expiry, cause — and the approver (`None` for the
/// request itself). A change to any of them in the store makes [`approval_binding_matches`]
/// false.
pub fn keyed_approval_binding(
    keys: &HostKeys,
    request: &ApprovalRequest,
    approver: Option<&str>,
) -> String {
    keys.tag(
        BINDING_DOMAIN,
        binding_document(request, approver).as_bytes(),
    )
}

/// Whether `stored` is the keyed binding of `request` (for `approver`) under an accepted key.
pub fn approval_binding_matches(
    keys: &HostKeys,
    stored: &str,
    request: &ApprovalRequest,
    approver: Option<&str>,
) -> bool {
    keys.verify(
        BINDING_DOMAIN,
        binding_document(request, approver).as_bytes(),
        stored,
    )
}

/// The binding of `request` (for `approver`) as a dispatcher computes it: the
/// [`keyed_approval_binding`] with host keys; without keys a plain SHA-256 over the same
/// document, which anyone with write access to the approval store can recompute (the documented
/// downgrade of a dispatcher without keys).
pub fn approval_binding(
    keys: Option<&HostKeys>,
    request: &ApprovalRequest,
    approver: Option<&str>,
) -> String {
    match keys {
        Some(keys) => keyed_approval_binding(keys, request, approver),
        None => sha256_hex(binding_document(request, approver).as_bytes()),
    }
}

/// Whether `stored` is the [`approval_binding`] of `request` (for `approver`): with keys under
/// any accepted key, without keys the plain digest.
pub fn approval_binding_is(
    keys: Option<&HostKeys>,
    stored: &str,
    request: &ApprovalRequest,
    approver: Option<&str>,
) -> bool {
    match keys {
        Some(keys) => approval_binding_matches(keys, stored, request, approver),
        None => stored == approval_binding(None, request, approver),
    }
}

/// The request document of `args` (normalized) for `principal`: the arguments without the
/// idempotency-key field, streamed into the hasher (no copy of the arguments).
fn document<'a>(
    spec: &'a ToolSpec,
    args: &'a Value,
    principal: &'a Principal,
) -> RequestDocument<'a> {
    RequestDocument {
        without: spec.idempotency_key_field.as_deref(),
        ..RequestDocument::new(
            &spec.name,
            spec.revision,
            args,
            &principal.tenant,
            &principal.subject,
        )
    }
}

/// The request digest of `args` (normalized) for `principal`: keyed (HMAC-SHA256 under the
/// active host key) when the dispatcher has [`HostKeys`], the plain SHA-256 digest otherwise
/// (only dispatchers without `sensitive` fields may run without keys).
pub(crate) fn digest(
    keys: Option<&HostKeys>,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
) -> String {
    let document = document(spec, args, principal);
    match keys {
        Some(keys) => document.keyed_digest(keys),
        None => document.plain_digest(),
    }
}

/// Whether `stored` is the request digest of `args` (normalized) for `principal`. With keys, a
/// digest made under any still accepted key matches (key rotation keeps idempotency records and
/// approvals valid); a plain digest never matches a keyed dispatcher.
pub(crate) fn digest_matches(
    keys: Option<&HostKeys>,
    stored: &str,
    spec: &ToolSpec,
    args: &Value,
    principal: &Principal,
) -> bool {
    let document = document(spec, args, principal);
    match keys {
        Some(keys) => document.keyed_matches(keys, stored),
        None => stored == document.plain_digest(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": [1, 2, {"y": true, "x": null}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[1,2,{"x":null,"y":true}],"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":[1,2,{"x":null,"y":true}],"b":1}"#
        );
    }

    #[test]
    fn strings_are_nfc() {
        let composed = json!({"name": "Zo\u{00eb}"});
        let decomposed = json!({"name": "Zoe\u{0308}"});
        assert_eq!(canonical_json(&composed), canonical_json(&decomposed));
    }

    #[test]
    fn digest_binds_every_part() {
        let args = json!({"amount": 5});
        let base = request_digest("t", 1, &args, "acme", "alice");
        assert_eq!(base.len(), 64);
        assert_ne!(base, request_digest("u", 1, &args, "acme", "alice"));
        assert_ne!(base, request_digest("t", 2, &args, "acme", "alice"));
        assert_ne!(
            base,
            request_digest("t", 1, &json!({"amount": 6}), "acme", "alice")
        );
        assert_ne!(base, request_digest("t", 1, &args, "other", "alice"));
        assert_ne!(base, request_digest("t", 1, &args, "acme", "bob"));
    }

    fn keys() -> HostKeys {
        HostKeys::new("k1", *b"0123456789abcdef0123456789abcdef").unwrap()
    }

    /// Pins the keyed request digest: a change to the canonical document, the domain string or
    /// the tag format would invalidate every stored idempotency record and approval.
    #[test]
    /// The value was computed independently with Python's `hmac` module over the canonical document
    /// `{"arguments":{"amount":5,"pin":"1234"},"revision":3,"subject":"alice","tenant":"acme","tool":"unlock"}`.
    fn keyed_request_digest_golden() {
        let args = json!({"pin": "1234", "amount": 5});
        let d = keyed_request_digest(&keys(), "unlock", 3, &args, "acme", "alice");
        assert_eq!(
            d,
            "k1:c514e66532c89576f9989244b610a1f61b815192762dda86bf189d5eddc57431"
        );
    }

    #[test]
    fn keyed_digest_hides_sensitive_values_and_survives_rotation() {
        let k = keys();
        let args = json!({"pin": "1234"});
        let d = keyed_request_digest(&k, "unlock", 1, &args, "acme", "alice");
        // The plain digest is what a candidate search would compute; the keyed one differs and
        // depends on the secret.
        assert!(!d.ends_with(&request_digest("unlock", 1, &args, "acme", "alice")));
        let other = HostKeys::new("k1", [1u8; 32]).unwrap();
        assert_ne!(
            d,
            keyed_request_digest(&other, "unlock", 1, &args, "acme", "alice")
        );
        assert!(request_digest_matches(
            &k, &d, "unlock", 1, &args, "acme", "alice"
        ));
        assert!(!request_digest_matches(
            &k,
            &d,
            "unlock",
            1,
            &json!({"pin": "1235"}),
            "acme",
            "alice"
        ));
        let rotated = HostKeys::new("k2", [2u8; 32])
            .unwrap()
            .accept("k1", *b"0123456789abcdef0123456789abcdef")
            .unwrap();
        assert!(request_digest_matches(
            &rotated, &d, "unlock", 1, &args, "acme", "alice"
        ));
        let retired = HostKeys::new("k2", [2u8; 32]).unwrap();
        assert!(!request_digest_matches(
            &retired, &d, "unlock", 1, &args, "acme", "alice"
        ));
    }
}
