//! The one strict JSON reader: exactly one document, no object that repeats a key, nesting and
//! size within bounds, and (for JSON-RPC) the request id recovered from text that does not
//! parse. The pipeline's parse stage, the provider adapters and the MCP transports all read
//! text here.
//!
//! `serde_json` keeps the last of two equal keys; a guard must not let `{"amount": 1,
//! "amount": 900}` mean one thing to a logger and another to a handler.
//!
//! [`read`] applies every [`Limits`] bound before anything is built (one pass over the bytes,
//! then the strict parse), so an oversized or too deeply nested document costs a scan, never an
//! allocation; [`parse`] is the message reader of the adapters, the same way within
//! [`MESSAGE_LIMITS`].
//!
//! ```
//! use toolguard_sanitize::json::{JsonError, read};
//! use toolguard_sanitize::limits::{Exceeded, Limits};
//!
//! assert_eq!(read(r#"{"a": [1, 2]}"#, &Limits::default()).unwrap()["a"][1], 2);
//! assert!(matches!(read(r#"{"a": 1, "a": 2}"#, &Limits::default()), Err(JsonError::DuplicateKey(_))));
//! let huge = format!("{{\"a\": \"{}\"}}", "x".repeat(300_000));
//! assert_eq!(read(&huge, &Limits::default()), Err(JsonError::Exceeded(Exceeded::LongString)));
//! ```

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::limits::{Exceeded, Limits, check_text, check_text_quick};

/// Deepest nesting of arrays and objects accepted in a provider response or an MCP message.
pub const MAX_NESTING: usize = 64;

/// Why a JSON text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonError {
    /// Not one valid JSON document (syntax, a lone surrogate escape, a number out of range,
    /// trailing data).
    #[error("not valid JSON: {0}")]
    Syntax(String),
    /// An object repeats a key.
    #[error("an object repeats the key {0:?}; send each key once")]
    DuplicateKey(String),
    /// Arrays and objects nest deeper than [`MAX_NESTING`].
    #[error("JSON nests deeper than {MAX_NESTING} levels")]
    TooDeep,
    /// More than one document: something follows the first value.
    #[error("more than one JSON value")]
    TrailingData,
    /// A bound of [`Limits`] is crossed ([`read`]).
    #[error("JSON exceeds a limit: {0:?}")]
    Exceeded(Exceeded),
}

const DUPLICATE: &str = "\u{0}duplicate key:";
const TOO_DEEP: &str = "\u{0}too deep";

/// The bounds of a message an adapter reads ([`parse`]: a provider response or stream event, an
/// MCP message): 16 MiB, [`MAX_NESTING`] levels, 65 536 keys (in one object or in all), a
/// million items, any string within the size. Generous for a message that carries several
/// calls, they stop what no message needs before it is built: a 50 MB string is refused by its
/// length, a million keys by one scan of the bytes. A call's own arguments then meet the
/// dispatcher's tighter [`Limits`] at its gate.
pub const MESSAGE_LIMITS: Limits = Limits {
    max_bytes: 16 << 20,
    max_depth: MAX_NESTING,
    max_object_keys: 1 << 16,
    max_total_keys: 1 << 16,
    max_items: 1 << 20,
    max_string_bytes: 16 << 20,
};

/// Parses `text` as exactly one JSON document within [`MESSAGE_LIMITS`], checked in one pass
/// over the bytes that stops at the first limit crossed ([`check_text_quick`]), before anything
/// is built ([`JsonError::Exceeded`]; nesting deeper than
/// [`MAX_NESTING`] is [`JsonError::TooDeep`]), refusing repeated keys.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    check_text_quick(text.as_bytes(), &MESSAGE_LIMITS).map_err(|over| match over {
        Exceeded::Depth => JsonError::TooDeep,
        over => JsonError::Exceeded(over),
    })?;
    strict(text, MAX_NESTING)
}

/// Reads `text` as exactly one JSON document within `limits`: the bounds are checked in one pass
/// over the bytes before anything is built, then the document is parsed refusing repeated keys.
/// A crossed bound is [`JsonError::Exceeded`], named as [`check_text`] names it.
pub fn read(text: &str, limits: &Limits) -> Result<Value, JsonError> {
    check_text(text.as_bytes(), limits).map_err(JsonError::Exceeded)?;
    strict(text, limits.max_depth)
}

/// The strict parse alone: one document, no repeated key, at most `max_depth` levels of nesting
/// (and never more than `serde_json`'s own bound of 128), without the other bounds of [`read`]
/// (for text whose bounds were checked already).
pub fn strict(text: &str, max_depth: usize) -> Result<Value, JsonError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = Strict {
        depth: 0,
        max: max_depth,
    };
    let value = seed.deserialize(&mut de).map_err(classify)?;
    de.end().map_err(|_| JsonError::TrailingData)?;
    Ok(value)
}

fn classify(error: serde_json::Error) -> JsonError {
    let text = error.to_string();
    if let Some(rest) = text.strip_prefix(DUPLICATE) {
        let key = rest.split(" at line ").next().unwrap_or_default();
        return JsonError::DuplicateKey(key.chars().take(64).collect());
    }
    if text.starts_with(TOO_DEEP) || text.starts_with("recursion limit exceeded") {
        return JsonError::TooDeep;
    }
    JsonError::Syntax(text)
}

/// Builds a `Value`, refusing repeated keys and nesting deeper than `max`.
struct Strict {
    depth: usize,
    max: usize,
}

impl Strict {
    fn nested<E: de::Error>(&self) -> Result<Strict, E> {
        if self.depth >= self.max {
            return Err(E::custom(TOO_DEEP));
        }
        Ok(Strict {
            depth: self.depth + 1,
            max: self.max,
        })
    }
}

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element_seed(self.nested()?)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // One search of the map per key: the free slot found is where the value goes.
            match out.entry(key) {
                serde_json::map::Entry::Occupied(taken) => {
                    return Err(de::Error::custom(format!("{DUPLICATE}{}", taken.key())));
                }
                serde_json::map::Entry::Vacant(slot) => {
                    slot.insert(map.next_value_seed(self.nested()?)?);
                }
            }
        }
        Ok(Value::Object(out))
    }
}

/// The `id` member of a JSON-RPC message whose text may not parse as a whole: a string or an
/// integer found among the top-level members of the object. `None` when the text is not an
/// object, has no readable `id`, or the `id` is `null` or of another type.
///
/// The scan never recurses: nested values are skipped by counting brackets outside strings.
pub fn jsonrpc_id(text: &str) -> Option<Value> {
    let raw = top_level(text, |key| key == "id")?.1;
    let id: Value = serde_json::from_str(raw.trim()).ok()?;
    (id.is_string() || id.is_i64() || id.is_u64()).then_some(id)
}

/// Whether a JSON-RPC message whose text may not parse as a whole is a request or a
/// notification (`Some(true)`: a top-level `method` member comes first) or a response
/// (`Some(false)`: `result` or `error` comes first); `None` when neither can be read. Scans like
/// [`jsonrpc_id`].
pub fn jsonrpc_has_method(text: &str) -> Option<bool> {
    let (key, _) = top_level(text, |key| matches!(key, "method" | "result" | "error"))?;
    Some(key == "method")
}

/// The first top-level member of the object `text` whose key `wanted` accepts: its key and the
/// raw text of its value. Nested values are skipped by counting brackets outside strings.
fn top_level(text: &str, wanted: impl Fn(&str) -> bool) -> Option<(String, &str)> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: 0,
    };
    scan.space();
    scan.eat(b'{')?;
    loop {
        scan.space();
        let key_start = scan.at;
        scan.string()?;
        let key: String = serde_json::from_str(&text[key_start..scan.at]).ok()?;
        scan.space();
        scan.eat(b':')?;
        scan.space();
        let value_start = scan.at;
        scan.value()?;
        if wanted(&key) {
            return Some((key, text.get(value_start..scan.at)?));
        }
        scan.space();
        scan.eat(b',')?;
    }
}

struct Scan<'t> {
    bytes: &'t [u8],
    at: usize,
}

impl Scan<'_> {
    fn space(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| b.is_ascii_whitespace())
        {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.bytes.get(self.at) == Some(&byte)).then(|| self.at += 1)
    }

    /// A string starting at the cursor, escapes skipped (not checked).
    fn string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            match *self.bytes.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return Some(());
                }
                _ => self.at += 1,
            }
        }
    }

    /// Any value: a string, a bracketed value (skipped by depth counting), or a scalar up to
    /// the next `,` or `}` at this level.
    fn value(&mut self) -> Option<()> {
        match *self.bytes.get(self.at)? {
            b'"' => self.string(),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.bytes.get(self.at)? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.at += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.at += 1;
                }
            }
            _ => {
                while let Some(&b) = self.bytes.get(self.at) {
                    if b == b',' || b == b'}' {
                        break;
                    }
                    self.at += 1;
                }
                Some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_one_document() {
        assert_eq!(
            parse(r#"{"a": [1, {"b": null}]}"#),
            Ok(json!({"a": [1, {"b": null}]}))
        );
        assert_eq!(parse("{} {}"), Err(JsonError::TrailingData));
        assert!(matches!(parse(""), Err(JsonError::Syntax(_))));
    }

    #[test]
    fn refuses_repeated_keys_at_any_depth() {
        assert_eq!(
            parse(r#"{"a": 1, "a": 2}"#),
            Err(JsonError::DuplicateKey("a".into()))
        );
        assert_eq!(
            parse(r#"[{"x": {"k": 1, "k": 1}}]"#),
            Err(JsonError::DuplicateKey("k".into()))
        );
        // The same key in sibling objects is fine.
        assert!(parse(r#"[{"k": 1}, {"k": 2}]"#).is_ok());
    }

    #[test]
    fn refuses_deep_nesting_surrogates_and_huge_numbers() {
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_NESTING + 1),
            "]".repeat(MAX_NESTING + 1)
        );
        assert_eq!(parse(&deep), Err(JsonError::TooDeep));
        let ok = format!("{}{}", "[".repeat(MAX_NESTING), "]".repeat(MAX_NESTING));
        assert!(parse(&ok).is_ok());
        let very_deep = "[".repeat(100_000);
        assert_eq!(parse(&very_deep), Err(JsonError::TooDeep));
        assert!(matches!(
            parse(r#"{"s": "\ud800"}"#),
            Err(JsonError::Syntax(_))
        ));
        assert!(matches!(
            parse(r#"{"n": 1e400}"#),
            Err(JsonError::Syntax(_))
        ));
    }

    #[test]
    fn finds_the_id_of_text_that_does_not_parse() {
        assert_eq!(
            // Cut off inside `params` (its braces written `\u{7b}`: they are left open).
            jsonrpc_id("\u{7b}\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":\u{7b}"),
            Some(json!(7))
        );
        assert_eq!(
            jsonrpc_id(r#"{"params": {"id": 1, "s": "}\"{"}, "id": "r-1", "x": 1e999}"#),
            Some(json!("r-1"))
        );
        assert_eq!(
            jsonrpc_id(r#"{"method": "a", "params": [[[[["\ud800"]]]]], "id": 3}"#),
            Some(json!(3))
        );
        assert_eq!(jsonrpc_id(r#"{"id": null}"#), None);
        assert_eq!(jsonrpc_id(r#"{"id": 1.5}"#), None);
        assert_eq!(jsonrpc_id("not json"), None);
        assert_eq!(jsonrpc_id("\u{7b}\"method\": \"a\""), None);
        let deep = format!(r#"{{"p": {}, "id": 9}}"#, "[".repeat(100_000));
        assert_eq!(jsonrpc_id(&deep), None);
    }

    #[test]
    fn read_refuses_every_bound_before_building() {
        let limits = Limits::default();
        let cases = [
            (
                format!("{{\"a\": \"{}\"}}", "x".repeat(50 << 20)),
                Exceeded::Bytes,
            ),
            (
                format!("{{\"a\": \"{}\"}}", "x".repeat(300 << 10)),
                Exceeded::LongString,
            ),
            (
                format!("{{\"a\": {}1{}}}", "[".repeat(40), "]".repeat(40)),
                Exceeded::Depth,
            ),
            (
                format!(
                    "{{{}}}",
                    (0..1_000)
                        .map(|i| format!("\"k{i}\": 1"))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Exceeded::ObjectKeys,
            ),
        ];
        for (text, bound) in cases {
            assert_eq!(read(&text, &limits), Err(JsonError::Exceeded(bound)));
        }
        // A million keys spread over small objects: the total bound, still without building.
        let many = format!(
            "[{}]",
            (0..200_000)
                .map(|_| r#"{"a":1,"b":2,"c":3,"d":4,"e":5}"#)
                .collect::<Vec<_>>()
                .join(",")
        );
        let wide = Limits::default().max_bytes(usize::MAX);
        assert_eq!(
            read(&many, &wide),
            Err(JsonError::Exceeded(Exceeded::TotalKeys))
        );
        assert_eq!(
            read(r#"{"a": 1, "b": {"a": 2, "a": 3}}"#, &limits),
            Err(JsonError::DuplicateKey("a".into()))
        );
        assert_eq!(read("{} []", &limits), Err(JsonError::TrailingData));
        assert_eq!(read(r#"{"ok": true}"#, &limits), Ok(json!({"ok": true})));
    }

    #[test]
    fn the_message_reader_names_the_first_limit_it_meets() {
        use crate::limits::check_text_quick;
        // Too many keys, then too deep: the argument gate names the higher-ranked limit, the
        // message reader the first it meets (and stops there).
        let keys = (0..70_000)
            .map(|i| format!("\"k{i}\":0"))
            .collect::<Vec<_>>()
            .join(",");
        let text = format!("{{{keys},\"deep\":{}1{}}}", "[".repeat(70), "]".repeat(70));
        assert_eq!(
            check_text(text.as_bytes(), &MESSAGE_LIMITS),
            Err(Exceeded::Depth)
        );
        assert_eq!(
            check_text_quick(text.as_bytes(), &MESSAGE_LIMITS),
            Err(Exceeded::ObjectKeys)
        );
        assert_eq!(parse(&text), Err(JsonError::Exceeded(Exceeded::ObjectKeys)));
        let items = format!("[{}]", vec!["0"; (1 << 20) + 1].join(","));
        assert_eq!(
            check_text_quick(items.as_bytes(), &MESSAGE_LIMITS),
            Err(Exceeded::Items)
        );
        assert_eq!(
            check_text_quick(br#"{"a": [1, {"b": "c"}]}"#, &MESSAGE_LIMITS),
            Ok(())
        );
    }
}
