//! Streaming canonical JSON: object keys sorted by code point, no insignificant whitespace,
//! strings in Unicode NFC, numbers and string escapes exactly as `serde_json` writes them.
//!
//! The writer puts its bytes straight into a [`Sink`] (a hasher, a MAC, a byte buffer), so a digest or an audit seal is computed without building an
//! intermediate `serde_json::Value` or string. [`crate::digest::canonical_json`] is this writer
//! into a `Vec<u8>`.

use std::borrow::Cow;

use icu_normalizer::ComposingNormalizerBorrowed;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Where canonical bytes go.
pub(crate) trait Sink {
    /// Appends `bytes`.
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl Sink for Sha256 {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

impl Sink for hmac::Hmac<Sha256> {
    fn put(&mut self, bytes: &[u8]) {
        hmac::Mac::update(self, bytes);
    }
}

/// `std::io::Write` over a sink, for `serde_json`'s string and number formatting.
struct Adapter<'a, S: Sink + ?Sized>(&'a mut S);

impl<S: Sink + ?Sized> std::io::Write for Adapter<'_, S> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.put(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `serde_json`'s encoding of `v` (a string, number, or unit enum variant): deterministic, and
/// writing into a sink cannot fail.
pub(crate) fn json<T: serde::Serialize + ?Sized, S: Sink + ?Sized>(v: &T, out: &mut S) {
    let _ = serde_json::to_writer(Adapter(out), v);
}

/// The NFC normalizer (ICU4X, compiled data).
const NFC: ComposingNormalizerBorrowed<'static> = ComposingNormalizerBorrowed::new_nfc();

/// `s` in NFC, borrowed when it already is (always for ASCII).
pub(crate) fn nfc(s: &str) -> Cow<'_, str> {
    if s.is_ascii() {
        Cow::Borrowed(s)
    } else {
        NFC.normalize(s)
    }
}

/// A string, in NFC, quoted and escaped.
pub(crate) fn string<S: Sink + ?Sized>(s: &str, out: &mut S) {
    json(nfc(s).as_ref(), out);
}

/// An unsigned integer.
pub(crate) fn uint<S: Sink + ?Sized>(n: u64, out: &mut S) {
    json(&n, out);
}

/// A boolean.
pub(crate) fn boolean<S: Sink + ?Sized>(b: bool, out: &mut S) {
    out.put(if b { b"true" } else { b"false" });
}

/// An optional string (`null` when absent).
pub(crate) fn opt_string<S: Sink + ?Sized>(s: Option<&str>, out: &mut S) {
    match s {
        Some(s) => string(s, out),
        None => out.put(b"null"),
    }
}

/// `"key":` for a fixed member name of a typed document: lower-case ASCII letters and `_`,
/// which need no escape and are already NFC.
pub(crate) fn key<S: Sink + ?Sized>(name: &'static str, first: bool, out: &mut S) {
    debug_assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    if !first {
        out.put(b",");
    }
    out.put(b"\"");
    out.put(name.as_bytes());
    out.put(b"\":");
}

/// Any JSON value.
pub(crate) fn value<S: Sink + ?Sized>(value: &Value, out: &mut S) {
    match value {
        Value::Null => out.put(b"null"),
        Value::Bool(b) => boolean(*b, out),
        Value::Number(n) => json(n, out),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.put(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.put(b",");
                }
                self::value(item, out);
            }
            out.put(b"]");
        }
        Value::Object(map) => object(map, None, out),
    }
}

/// An object, leaving out member `skip` (the idempotency key of a request document).
pub(crate) fn object<S: Sink + ?Sized>(map: &Map<String, Value>, skip: Option<&str>, out: &mut S) {
    let keep = |k: &str| skip != Some(k);
    out.put(b"{");
    // serde_json's map is ordered by key bytes, which is code-point order: when every key is
    // already NFC, that is the canonical order and nothing needs sorting.
    if map.keys().all(|k| matches!(nfc(k), Cow::Borrowed(_))) {
        let mut first = true;
        for (k, v) in map.iter().filter(|(k, _)| keep(k)) {
            if !first {
                out.put(b",");
            }
            first = false;
            json(k.as_str(), out);
            out.put(b":");
            value(v, out);
        }
    } else {
        let mut entries: Vec<(Cow<'_, str>, &Value)> = map
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (nfc(k), v))
            .collect();
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                out.put(b",");
            }
            json(k.as_ref(), out);
            out.put(b":");
            value(v, out);
        }
    }
    out.put(b"}");
}

/// A value, leaving out member `skip` when it is an object.
pub(crate) fn value_without<S: Sink + ?Sized>(v: &Value, skip: Option<&str>, out: &mut S) {
    match v {
        Value::Object(map) => object(map, skip, out),
        other => value(other, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn encoded(v: &Value) -> String {
        let mut out = Vec::new();
        value(v, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn keys_are_sorted_after_nfc() {
        // Decomposed, "Cafe\u{301}" sorts before "Cafz"; composed, "Café" sorts after it.
        let v = json!({"Cafe\u{301}": 1, "Cafz": 2, "a": 3});
        assert_eq!(encoded(&v), "{\"Cafz\":2,\"Caf\u{e9}\":1,\"a\":3}");
    }

    #[test]
    fn skipped_member_is_left_out() {
        let v = json!({"a": 1, "key": "k", "z": [1, {"key": 2}]});
        let mut out = Vec::new();
        value_without(&v, Some("key"), &mut out);
        assert_eq!(out, br#"{"a":1,"z":[1,{"key":2}]}"#);
    }
}
