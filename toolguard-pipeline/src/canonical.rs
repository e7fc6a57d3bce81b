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

/// A string, in NFC, quoted and escaped. A long non-ASCII string is normalized once per call
/// inside [`with_nfc_memo`], however many documents of the call encode it.
pub(crate) fn string<S: Sink + ?Sized>(s: &str, out: &mut S) {
    // Printable ASCII without a quote or a backslash is its own NFC form and needs no escape:
    // written as is, byte for byte what `serde_json` writes for it.
    if crate::sanitize::chars::is_plain_json_text(s.as_bytes()) {
        out.put(b"\"");
        out.put(s.as_bytes());
        out.put(b"\"");
        return;
    }
    if s.len() < NfcMemo::MIN_LEN || s.is_ascii() {
        return json(nfc(s).as_ref(), out);
    }
    let memoized = NFC_MEMO.try_with(|memo| {
        let mut memo = memo.borrow_mut();
        match memo.get(s) {
            Some(normalized) => json(normalized, out),
            None => {
                let normalized = NFC.normalize(s);
                json(normalized.as_ref(), out);
                memo.insert(s, normalized);
            }
        }
    });
    if memoized.is_err() {
        json(nfc(s).as_ref(), out);
    }
}

tokio::task_local! {
    /// The NFC forms worked out so far in the current call ([`with_nfc_memo`]).
    static NFC_MEMO: std::cell::RefCell<NfcMemo>;
}

/// Runs `f` (one call through the pipeline) with a memo of the NFC forms of its long strings:
/// the request digest, its re-checks and the audit entry all encode the call's arguments, and a
/// 1 MiB argument of combining marks costs milliseconds to normalize. The memo lives as long as
/// `f` and holds at most [`NfcMemo::MAX_BYTES`].
pub(crate) fn with_nfc_memo<F: std::future::Future>(
    f: F,
) -> impl std::future::Future<Output = F::Output> {
    NFC_MEMO.scope(std::cell::RefCell::new(NfcMemo::default()), f)
}

/// Strings of one call and their NFC forms, keyed by the exact text.
#[derive(Default)]
struct NfcMemo {
    /// Each string, and its NFC form when that differs.
    entries: std::collections::HashMap<Box<str>, Option<Box<str>>>,
    /// Bytes held, inputs and forms together.
    bytes: usize,
}

impl NfcMemo {
    /// Shorter strings are normalized each time (cheaper than a lookup).
    const MIN_LEN: usize = 256;
    /// What one call's memo holds at most: twice the default argument size limit.
    const MAX_BYTES: usize = 2 << 20;

    /// The NFC form of `s` if it was worked out before.
    fn get<'a>(&'a self, s: &'a str) -> Option<&'a str> {
        self.entries
            .get(s)
            .map(|normalized| normalized.as_deref().unwrap_or(s))
    }

    /// Keeps the NFC form of `s`, while there is room.
    fn insert(&mut self, s: &str, normalized: Cow<'_, str>) {
        let form = match normalized {
            Cow::Borrowed(_) => None,
            Cow::Owned(form) => Some(form.into_boxed_str()),
        };
        let size = s.len() + form.as_ref().map_or(0, |f| f.len());
        if self.bytes + size <= Self::MAX_BYTES {
            self.bytes += size;
            self.entries.insert(s.into(), form);
        }
    }
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
/// which need no escape and are already NFC. Inlined, so that the name's length is known where
/// it is written and the bytes are copied without a call.
#[inline(always)]
pub(crate) fn key<S: Sink + ?Sized>(name: &'static str, first: bool, out: &mut S) {
    debug_assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    if !first {
        out.put(b",");
    }
    out.put(b"\"");
    out.put(name.as_bytes());
    out.put(b"\":");
}

/// `"name"` for a fixed name of a typed document (an enum's serde name): lower-case ASCII
/// letters and `_`, as in [`key`]. Inlined for the same reason.
#[inline(always)]
pub(crate) fn name<S: Sink + ?Sized>(name: &'static str, out: &mut S) {
    debug_assert!(name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'));
    out.put(b"\"");
    out.put(name.as_bytes());
    out.put(b"\"");
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

    /// Every string shape the plain-ASCII shortcut could see is written as `serde_json` writes
    /// it: each ASCII byte alone, beside letters, and in the shortcut's longest-run position.
    #[test]
    fn ascii_strings_are_written_as_serde_json_writes_them() {
        let mut samples = vec![String::new(), "acct_1029384756".to_owned()];
        for b in 0u8..0x80 {
            let c = char::from(b);
            samples.push(c.to_string());
            samples.push(format!("ab{c}cd"));
            samples.push(format!("{}{c}", "x".repeat(300)));
        }
        samples.push("caf\u{e9}".to_owned());
        samples.push("\u{2028}".to_owned());
        for s in samples {
            let mut out = Vec::new();
            string(&s, &mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&s).unwrap(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn keys_are_sorted_after_nfc() {
        // Decomposed, "Cafe\u{301}" sorts before "Cafz"; composed, "Café" sorts after it.
        let v = json!({"Cafe\u{301}": 1, "Cafz": 2, "a": 3});
        assert_eq!(encoded(&v), "{\"Cafz\":2,\"Caf\u{e9}\":1,\"a\":3}");
    }

    /// Inside a call's memo, long strings encode exactly as outside it, the first time and when
    /// the memo answers; what the memo holds stays within its bound.
    #[tokio::test]
    async fn memoized_encoding_is_the_plain_encoding() {
        let long_marks = "e\u{0301}\u{0302} ".repeat(200);
        let long_nfc = "caf\u{e9} ".repeat(100);
        let v = json!({
            "a": long_marks,
            "b": [long_nfc, long_marks, "short e\u{0301}"],
            "a\u{0301}": "x".repeat(300),
        });
        let plain = encoded(&v);
        assert!(plain.contains("\u{e9}\u{302}"), "NFC composes e + acute");
        assert!(
            plain.contains("short \u{e9}\""),
            "short strings are in NFC too"
        );
        assert!(plain.contains("\"\u{e1}\""), "and keys");
        let (first, second, held) = with_nfc_memo(async {
            let first = encoded(&v);
            let second = encoded(&v);
            let held = NFC_MEMO.with(|memo| memo.borrow().entries.len());
            (first, second, held)
        })
        .await;
        assert_eq!(first, plain);
        assert_eq!(second, plain);
        // The two distinct long non-ASCII strings; short and ASCII ones are not kept.
        assert_eq!(held, 2);
        let mut memo = NfcMemo::default();
        let big = "e\u{0301}".repeat(NfcMemo::MAX_BYTES / 3);
        memo.insert(&big, NFC.normalize(&big));
        memo.insert("other string", Cow::Borrowed("other string"));
        assert!(memo.bytes <= NfcMemo::MAX_BYTES);
        assert!(memo.get(&big).is_none(), "over the bound: not kept");
        assert_eq!(memo.get("other string"), Some("other string"));
    }

    #[test]
    fn skipped_member_is_left_out() {
        let v = json!({"a": 1, "key": "k", "z": [1, {"key": 2}]});
        let mut out = Vec::new();
        value_without(&v, Some("key"), &mut out);
        assert_eq!(out, br#"{"a":1,"z":[1,{"key":2}]}"#);
    }
}
