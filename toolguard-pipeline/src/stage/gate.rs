//! Gate: the argument limits every call meets before any other stage spends time on it, whether
//! the arguments arrive as text (OpenAI's JSON string) or already parsed (MCP `tools/call`,
//! Anthropic `tool_use.input`, Gemini `functionCall.args`, [`RawArguments::Value`]).
//!
//! The limits ([`Limits`]) are the size in bytes of the compact JSON serialization (for text: of
//! the text as sent), the nesting depth, the keys of one object, the keys of the whole document,
//! the array elements and object members of the whole document (every one of them costs the
//! later stages a check) and the length in bytes of one string (keys included). Text is measured by one pass over its
//! bytes before it is parsed, so an oversized or too deeply nested document is never built; a
//! parsed value is walked without recursion.
//!
//! Over a limit the call stops `malformed` with one of these reason codes (when several limits
//! are crossed, the first of this table is named, for text and parsed values alike):
//!
//! | code | limit |
//! | --- | --- |
//! | `too_large` | [`Limits::max_bytes`] (default 1 MiB) |
//! | `too_deep` | [`Limits::max_depth`] (default 32 nested arrays/objects) |
//! | `too_many_keys` | [`Limits::max_object_keys`] (default 512 keys in one object) |
//! | `too_many_keys_total` | [`Limits::max_total_keys`] (default 8 192 keys in the document) |
//! | `too_many_items` | [`Limits::max_items`] (default 16 384 array elements and object members in the document) |
//! | `string_too_long` | [`Limits::max_string_bytes`] (default 256 KiB in one string or key) |
//!
//! Hosts reach this check as [`RawArguments::check_limits`](crate::RawArguments::check_limits).

pub(crate) use toolguard_sanitize::limits::Limits;

use super::Stop;
use crate::call::RawArguments;

/// Checks `raw` against `limits`: `Err` with status `malformed` and a reason code of the module
/// documentation when a limit is crossed. Invalid JSON text is left to the parse stage.
pub(crate) fn check(raw: &RawArguments, limits: &Limits) -> Result<(), Stop> {
    raw.check_limits(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn reason(raw: RawArguments, limits: &Limits) -> Option<String> {
        reason_of(&raw, limits)
    }

    fn reason_of(raw: &RawArguments, limits: &Limits) -> Option<String> {
        check(raw, limits)
            .err()
            .and_then(|s| s.reason.map(String::from))
    }

    fn both(value: Value, limits: &Limits) -> (Option<String>, Option<String>) {
        let text = serde_json::to_string(&value).unwrap();
        (
            reason(RawArguments::Json(text), limits),
            reason(RawArguments::Value(value), limits),
        )
    }

    #[test]
    fn text_and_value_meet_the_same_limits() {
        let l = Limits::default()
            .max_items(7)
            .max_depth(3)
            .max_object_keys(2)
            .max_total_keys(4)
            .max_string_bytes(5);
        let cases = [
            (json!({"a": {"b": [1]}}), None),
            (json!({"a": {"b": [[1]]}}), Some("too_deep")),
            (json!({"a": 1, "b": 2, "c": 3}), Some("too_many_keys")),
            (
                json!({"a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 2}}),
                Some("too_many_keys_total"),
            ),
            (json!({"a": "123456"}), Some("string_too_long")),
            (json!({"123456": 1}), Some("string_too_long")),
            (json!({"a": "12345"}), None),
            (json!({"a": [1, 2, [3, 4]], "b": []}), None),
            (
                json!({"a": [1, 2, [3, 4, 5]], "b": []}),
                Some("too_many_items"),
            ),
            // Several limits crossed: the highest-ranked is named, wherever it comes (the text
            // scan goes on past a lower-ranked one to find it).
            (
                json!({"a": "1234567", "b": 1, "c": {"d": [[1]]}}),
                Some("too_deep"),
            ),
            (
                json!({"a": "1234567", "b": 1, "c": 2}),
                Some("too_many_keys"),
            ),
            (
                json!({"a": {"x": "1234567"}, "b": {"x": 1, "y": 2}, "c": 1}),
                Some("too_many_keys"),
            ),
        ];
        for (value, want) in cases {
            let (t, v) = both(value.clone(), &l);
            assert_eq!(t.as_deref(), want, "text {value}");
            assert_eq!(v.as_deref(), want, "value {value}");
        }
    }

    #[test]
    fn size_counts_the_compact_serialization() {
        let value = json!({"note": "a\"b\u{1}", "n": [1.5, -20, null, true, false, {}]});
        let exact = serde_json::to_string(&value).unwrap().len();
        let at = Limits::default().max_bytes(exact);
        assert_eq!(both(value.clone(), &at), (None, None));
        let under = Limits::default().max_bytes(exact - 1);
        let (t, v) = both(value, &under);
        assert_eq!(t.as_deref(), Some("too_large"));
        assert_eq!(v.as_deref(), Some("too_large"));
    }

    #[test]
    fn text_scan_ignores_brackets_and_colons_inside_strings() {
        let l = Limits::default().max_depth(2).max_object_keys(1);
        let text = r#"{"a": "[[[[:::{{{\"]]]"}"#;
        assert_eq!(reason(RawArguments::Json(text.into()), &l), None);
        // Unterminated and garbage text is the parser's to refuse.
        assert_eq!(reason(RawArguments::Json("{\"a\": \"x".into()), &l), None);
        assert_eq!(reason(RawArguments::Json("]]]}}}".into()), &l), None);
    }

    #[test]
    fn very_deep_values_stop_without_recursion() {
        let mut v = json!(1);
        for _ in 0..50_000 {
            v = Value::Array(vec![v]);
        }
        let raw = RawArguments::Value(v);
        assert_eq!(
            reason_of(&raw, &Limits::default()).as_deref(),
            Some("too_deep")
        );
        // Dropping a value this deep recurses inside serde_json; the test leaks it instead.
        std::mem::forget(raw);
        let text = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(
            reason(RawArguments::Json(text), &Limits::default()).as_deref(),
            Some("too_deep")
        );
    }
}
