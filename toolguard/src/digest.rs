//! Canonical JSON encoding and SHA-256 digests: the request digest that binds idempotency records
//! and approvals to one exact action.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::borrow::Cow;

use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// Encodes `value` canonically: object keys sorted by code point, no insignificant whitespace,
/// strings in Unicode NFC. Two values that mean the same encode to the same bytes.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => out.push_str(&value.to_string()),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(String, &Value)> = map
                .iter()
                .map(|(k, v)| (k.nfc().collect::<String>(), v))
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    write_json_string(&nfc(s), out);
}

/// `s` in NFC, borrowed when it already is.
fn nfc(s: &str) -> Cow<'_, str> {
    if is_nfc_quick(s.chars()) == IsNormalized::Yes {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.nfc().collect())
    }
}

fn write_json_string(s: &str, out: &mut String) {
    // serde_json's string escaping is deterministic; reuse it.
    let mut buf = Vec::with_capacity(s.len() + 2);
    if serde_json::to_writer(&mut buf, s).is_ok() {
        out.push_str(&String::from_utf8_lossy(&buf));
    }
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
