//! Canonical JSON encoding and SHA-256 digests: the request digest that binds idempotency records
//! and approvals to one exact action.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;

use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// Encodes `value` canonically: object keys sorted by code point, no insignificant whitespace,
/// strings in Unicode NFC. Two values that mean the same encode to the same bytes.
pub fn canonical_json(value: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    write_canonical(value, &mut out);
    // Only serde_json's UTF-8 output and ASCII punctuation were written.
    String::from_utf8(out).unwrap_or_default()
}

fn write_canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => write_json(n, out),
        Value::String(s) => write_json(nfc(s).as_ref(), out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(Cow<'_, str>, &Value)> =
                map.iter().map(|(k, v)| (nfc(k), v)).collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            out.push(b'{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_json(k.as_ref(), out);
                out.push(b':');
                write_canonical(v, out);
            }
            out.push(b'}');
        }
    }
}

/// `s` in NFC, borrowed when it already is.
fn nfc(s: &str) -> Cow<'_, str> {
    if is_nfc_quick(s.chars()) == IsNormalized::Yes {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.nfc().collect())
    }
}

/// serde_json's encoding of a string or number, which is deterministic, appended to `out`.
fn write_json<T: serde::Serialize + ?Sized>(v: &T, out: &mut Vec<u8>) {
    // Writing a string or a number into a Vec cannot fail.
    let _ = serde_json::to_writer(out, v);
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The request digest of DESIGN.md: SHA-256 over the canonical encoding of tool name,
/// input-schema revision, sanitized arguments, tenant and subject.
pub fn request_digest(
    tool: &str,
    revision: u32,
    args: &Value,
    tenant: &str,
    subject: &str,
) -> String {
    let doc = serde_json::json!({
        "tool": tool,
        "revision": revision,
        "arguments": args,
        "tenant": tenant,
        "subject": subject,
    });
    sha256_hex(canonical_json(&doc).as_bytes())
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
}
