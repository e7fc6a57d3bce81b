//! Parse: the arguments must be exactly one JSON object, with no duplicate keys at any depth.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::Stop;
use crate::call::RawArguments;
use crate::outcome::Status;

pub use toolguard_sanitize::limits::MAX_ARGUMENT_BYTES;

/// Parses the model's arguments into a JSON object.
pub fn arguments(raw: &RawArguments) -> Result<Value, Stop> {
    let value = match raw {
        RawArguments::Value(v) => v.clone(),
        RawArguments::Json(text) => {
            if text.trim().is_empty() {
                return Err(malformed(
                    "empty",
                    "arguments are empty; send a JSON object",
                ));
            }
            let mut de = serde_json::Deserializer::from_str(text);
            let v = de.deserialize_any(StrictValue).map_err(|e| {
                if e.to_string().starts_with(DUPLICATE) {
                    malformed("duplicate_key", "arguments repeat a key")
                } else {
                    malformed("invalid_json", format!("arguments are not valid JSON: {e}"))
                }
            })?;
            de.end().map_err(|_| {
                malformed("trailing_data", "arguments hold more than one JSON value")
            })?;
            v
        }
    };
    if !value.is_object() {
        return Err(malformed(
            "not_an_object",
            "arguments must be a JSON object",
        ));
    }
    Ok(value)
}

/// Parses one JSON document strictly (no duplicate keys at any depth, nothing after it), without
/// the size and object checks of [`arguments`]. `None` when it does not parse.
pub fn strict_value(text: &str) -> Option<Value> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = de.deserialize_any(StrictValue).ok()?;
    de.end().ok()?;
    Some(value)
}

fn malformed(reason: &str, message: impl Into<String>) -> Stop {
    Stop::new(Status::Malformed, reason, message)
}

const DUPLICATE: &str = "duplicate key";

/// Builds a `serde_json::Value`, refusing objects that repeat a key.
struct StrictValue;

impl<'de> de::DeserializeSeed<'de> for StrictValue {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictValue)
    }
}

impl<'de> Visitor<'de> for StrictValue {
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
            .ok_or_else(|| E::custom("non-finite number"))
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
        while let Some(v) = seq.next_element_seed(StrictValue)? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictValue)?;
            if out.insert(key, value).is_some() {
                return Err(de::Error::custom(DUPLICATE));
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> Option<String> {
        arguments(&RawArguments::Json(text.into()))
            .err()
            .and_then(|s| s.reason)
    }

    #[test]
    fn accepts_one_object() {
        let v = arguments(&RawArguments::Json(r#"{"a": [1, {"b": "c"}]}"#.into())).unwrap();
        assert_eq!(v["a"][1]["b"], "c");
    }

    #[test]
    fn refuses_duplicates_at_any_depth() {
        assert_eq!(
            reason(r#"{"a": 1, "a": 2}"#).as_deref(),
            Some("duplicate_key")
        );
        assert_eq!(
            reason(r#"{"x": {"a": 1, "a": 1}}"#).as_deref(),
            Some("duplicate_key")
        );
        assert_eq!(
            reason(r#"{"x": [{"a": 1, "a": 1}]}"#).as_deref(),
            Some("duplicate_key")
        );
    }

    #[test]
    fn refuses_non_objects_and_garbage() {
        for (text, why) in [
            ("[1]", "not_an_object"),
            ("\"s\"", "not_an_object"),
            ("null", "not_an_object"),
            ("", "empty"),
            ("{\"a\":", "invalid_json"),
            ("{} {}", "trailing_data"),
        ] {
            assert_eq!(reason(text).as_deref(), Some(why), "{text}");
        }
        assert_eq!(
            arguments(&RawArguments::Value(Value::Bool(true)))
                .unwrap_err()
                .reason
                .as_deref(),
            Some("not_an_object")
        );
    }
}
