//! Parse: the arguments must be exactly one JSON object, with no duplicate keys at any depth.

use serde_json::Value;

use super::Stop;
use crate::call::RawArguments;

/// Parses the model's arguments into a JSON object ([`RawArguments::parse`]).
pub(crate) fn arguments(raw: &RawArguments) -> Result<Value, Stop> {
    raw.parse()
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
