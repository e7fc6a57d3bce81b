//! Parse: the arguments must be exactly one JSON object, with no duplicate keys at any depth.

use serde_json::Value;
use toolguard_sanitize::json::{self, JsonError};

use super::Stop;
use crate::call::RawArguments;
use crate::outcome::Status;

/// Parses the model's arguments into a JSON object.
pub(crate) fn arguments(raw: &RawArguments) -> Result<Value, Stop> {
    let value = match raw {
        RawArguments::Value(v) => v.clone(),
        RawArguments::Json(text) => {
            if text.trim().is_empty() {
                return Err(malformed(
                    "empty",
                    "arguments are empty; send a JSON object",
                ));
            }
            // The gate measured the text already: the strict reader alone.
            json::strict(text, usize::MAX).map_err(|e| match e {
                JsonError::DuplicateKey(_) => malformed("duplicate_key", "arguments repeat a key"),
                JsonError::TrailingData => {
                    malformed("trailing_data", "arguments hold more than one JSON value")
                }
                e => malformed("invalid_json", format!("arguments are not valid JSON: {e}")),
            })?
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

fn malformed(reason: &str, message: impl Into<String>) -> Stop {
    Stop::new(Status::Malformed, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> Option<String> {
        arguments(&RawArguments::Json(text.into()))
            .err()
            .and_then(|s| s.reason.map(|r| r.to_string()))
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
