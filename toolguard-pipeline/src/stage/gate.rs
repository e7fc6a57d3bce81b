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
//! ```
//! use toolguard::stage::gate::{self, Limits};
//! use toolguard::RawArguments;
//! let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
//! let stop = gate::check(&RawArguments::Json(format!("{{\"a\":{deep}}}")), &Limits::default())
//!     .unwrap_err();
//! assert_eq!(stop.reason.as_deref(), Some("too_deep"));
//! ```

use serde_json::Value;
use smallvec::SmallVec;

use super::Stop;
use crate::call::RawArguments;
use crate::outcome::Status;

/// The argument limits of the gate. `Limits::default()` holds the defaults named in the module
/// documentation; each setter replaces one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Limits {
    /// Most bytes of the arguments (the text as sent, or the compact serialization of a value).
    pub max_bytes: usize,
    /// Most nested arrays and objects (the arguments object itself is depth 1).
    pub max_depth: usize,
    /// Most keys in one object.
    pub max_object_keys: usize,
    /// Most keys in the whole document.
    pub max_total_keys: usize,
    /// Most array elements and object members in the whole document.
    pub max_items: usize,
    /// Most bytes in one string or key (as decoded, UTF-8).
    pub max_string_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: super::parse::MAX_ARGUMENT_BYTES,
            max_depth: 32,
            max_object_keys: 512,
            max_total_keys: 8192,
            max_items: 16_384,
            max_string_bytes: 256 << 10,
        }
    }
}

impl Limits {
    /// Sets [`Limits::max_bytes`].
    pub fn max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = n;
        self
    }

    /// Sets [`Limits::max_depth`].
    pub fn max_depth(mut self, n: usize) -> Self {
        self.max_depth = n;
        self
    }

    /// Sets [`Limits::max_object_keys`].
    pub fn max_object_keys(mut self, n: usize) -> Self {
        self.max_object_keys = n;
        self
    }

    /// Sets [`Limits::max_total_keys`].
    pub fn max_total_keys(mut self, n: usize) -> Self {
        self.max_total_keys = n;
        self
    }

    /// Sets [`Limits::max_items`].
    pub fn max_items(mut self, n: usize) -> Self {
        self.max_items = n;
        self
    }

    /// Sets [`Limits::max_string_bytes`].
    pub fn max_string_bytes(mut self, n: usize) -> Self {
        self.max_string_bytes = n;
        self
    }
}

/// Which limit was crossed; when several are, the first in this order is reported, so text and
/// parsed values name the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Over {
    Bytes,
    Depth,
    ObjectKeys,
    TotalKeys,
    Items,
    String,
}

impl Over {
    fn stop(self, limits: &Limits) -> Stop {
        let (code, message) = match self {
            Over::Bytes => (
                "too_large",
                format!(
                    "arguments exceed {} bytes; send less data",
                    limits.max_bytes
                ),
            ),
            Over::Depth => (
                "too_deep",
                format!(
                    "arguments nest deeper than {} levels; flatten them",
                    limits.max_depth
                ),
            ),
            Over::ObjectKeys => (
                "too_many_keys",
                format!(
                    "an object of the arguments has more than {} keys",
                    limits.max_object_keys
                ),
            ),
            Over::TotalKeys => (
                "too_many_keys_total",
                format!(
                    "the arguments have more than {} keys in all",
                    limits.max_total_keys
                ),
            ),
            Over::Items => (
                "too_many_items",
                format!(
                    "the arguments have more than {} array elements and object members in all",
                    limits.max_items
                ),
            ),
            Over::String => (
                "string_too_long",
                format!(
                    "a string of the arguments is longer than {} bytes",
                    limits.max_string_bytes
                ),
            ),
        };
        Stop::new(Status::Malformed, code, message)
    }
}

/// Checks `raw` against `limits`: `Err` with status `malformed` and a reason code of the module
/// documentation when a limit is crossed. Invalid JSON text is left to the parse stage.
pub fn check(raw: &RawArguments, limits: &Limits) -> Result<(), Stop> {
    let result = match raw {
        RawArguments::Json(text) => scan_text(text.as_bytes(), limits),
        RawArguments::Value(value) => walk_value(value, limits),
    };
    result.map_err(|over| over.stop(limits))
}

/// Per-object state of the text scan: is it an object, how many keys so far.
struct Frame {
    object: bool,
    keys: usize,
}

/// One pass over JSON text: depth, keys and string lengths, without building anything. Strings
/// are measured as written (an escape such as `\u00e9` counts its six bytes), which bounds the
/// decoded length from above within a factor of six; over-long escapes are rare in honest input.
fn scan_text(bytes: &[u8], limits: &Limits) -> Result<(), Over> {
    if bytes.len() > limits.max_bytes {
        return Err(Over::Bytes);
    }
    // Ordinary arguments nest a few levels: their frames stay on the stack (no allocation).
    let mut stack: SmallVec<[Frame; 16]> = SmallVec::new();
    let mut total_keys = 0usize;
    let mut items = 0usize;
    // Set right after an opening bracket or brace: the next token is the container's first item
    // unless it closes it.
    let mut first = false;
    let mut found = Found(None);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if first && !b.is_ascii_whitespace() {
            first = false;
            if b != b']' && b != b'}' {
                items += 1;
            }
        }
        match b {
            b',' => items += 1,
            b'"' => {
                let end = string_end(bytes, i + 1);
                if end - (i + 1) > limits.max_string_bytes {
                    found.add(Over::String);
                }
                i = end;
            }
            b'{' | b'[' => {
                if stack.len() >= limits.max_depth {
                    found.add(Over::Depth);
                }
                stack.push(Frame {
                    object: bytes[i] == b'{',
                    keys: 0,
                });
                first = true;
            }
            b'}' | b']' => {
                stack.pop();
            }
            b':' => {
                if let Some(frame) = stack.last_mut().filter(|f| f.object) {
                    frame.keys += 1;
                    total_keys += 1;
                    if frame.keys > limits.max_object_keys {
                        found.add(Over::ObjectKeys);
                    }
                    if total_keys > limits.max_total_keys {
                        found.add(Over::TotalKeys);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    if items > limits.max_items {
        found.add(Over::Items);
    }
    found.result()
}

/// The most important limit crossed so far.
struct Found(Option<Over>);

impl Found {
    fn add(&mut self, over: Over) {
        self.0 = Some(self.0.map_or(over, |o| o.min(over)));
    }

    fn result(self) -> Result<(), Over> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Index of the closing quote of the string whose content starts at `start` (or the end of the
/// input when it is unterminated: the parser reports that).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut j = start;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return j,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// Walks a parsed value without recursion, adding up its compact serialized size; stops as
/// soon as the size limit is crossed.
fn walk_value(value: &Value, limits: &Limits) -> Result<(), Over> {
    // (value, depth of the container holding it)
    let mut todo: Vec<(&Value, usize)> = vec![(value, 0)];
    let mut bytes = 0usize;
    let mut total_keys = 0usize;
    let mut item_count = 0usize;
    let mut found = Found(None);
    while let Some((v, depth)) = todo.pop() {
        bytes = bytes.saturating_add(scalar_size(v, limits, &mut found));
        match v {
            Value::Array(items) => {
                if depth >= limits.max_depth {
                    found.add(Over::Depth);
                }
                // Brackets and commas.
                bytes = bytes.saturating_add(items.len().max(1) + 1);
                item_count += items.len();
                todo.extend(items.iter().map(|item| (item, depth + 1)));
            }
            Value::Object(map) => {
                if depth >= limits.max_depth {
                    found.add(Over::Depth);
                }
                if map.len() > limits.max_object_keys {
                    found.add(Over::ObjectKeys);
                }
                total_keys += map.len();
                if total_keys > limits.max_total_keys {
                    found.add(Over::TotalKeys);
                }
                bytes = bytes.saturating_add(map.len().max(1) + 1);
                item_count += map.len();
                for (key, item) in map {
                    // The key, its quotes and the colon.
                    bytes = bytes.saturating_add(string_size(key, limits, &mut found) + 1);
                    todo.push((item, depth + 1));
                }
            }
            _ => {}
        }
        if bytes > limits.max_bytes {
            return Err(Over::Bytes);
        }
    }
    if item_count > limits.max_items {
        found.add(Over::Items);
    }
    found.result()
}

/// Serialized size of a scalar (0 for arrays and objects, whose parts are counted apart).
fn scalar_size(v: &Value, limits: &Limits, found: &mut Found) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_size(n),
        Value::String(s) => string_size(s, limits, found),
        Value::Array(_) | Value::Object(_) => 0,
    }
}

/// Serialized size of a string (quotes and escapes included); notes an over-long string.
fn string_size(s: &str, limits: &Limits, found: &mut Found) -> usize {
    if s.len() > limits.max_string_bytes {
        found.add(Over::String);
    }
    let escaped: usize = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() + escaped + 2
}

/// Length of a number as serde_json writes it.
fn number_size(n: &serde_json::Number) -> usize {
    use std::fmt::Write as _;
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing to a counter cannot fail.
    let _ = write!(c, "{n}");
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reason(raw: RawArguments, limits: &Limits) -> Option<String> {
        reason_of(&raw, limits)
    }

    fn reason_of(raw: &RawArguments, limits: &Limits) -> Option<String> {
        check(raw, limits).err().and_then(|s| s.reason)
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
