//! Mapping a strict-mode `null` back to "absent" before validation.
//!
//! OpenAI's strict mode makes every property required, so an optional property the model chose
//! not to fill arrives as `null`. [`restore_optional_nulls`] removes exactly those: a property
//! whose value is `null`, that every canonical schema applying to its object leaves optional, and
//! whose canonical schema does not itself accept `null`. Everything else is left for the
//! dispatcher's validation against the canonical schema, which runs whatever this did.

use serde_json::Value;

use super::schema::{LowerError, accepts_null, resolve_ref};
use toolguard_pipeline::{RawArguments, ToolCall};

/// Deepest argument nesting [`restore_optional_nulls`] descends into.
const MAX_DEPTH: usize = 64;
/// Most schemas considered for one value (through `$ref`, `anyOf`, `oneOf`, `allOf`).
const MAX_APPLICABLE: usize = 256;

/// Removes the `null`s that stand for absent optional properties of `args`, walking `canonical`
/// (the tool's canonical input schema). Returns how many were removed.
///
/// Arguments nested deeper than 64 levels are left as they are (validation decides).
pub fn restore_optional_nulls(canonical: &Value, args: &mut Value) -> Result<usize, LowerError> {
    let mut removed = 0;
    restore(canonical, &[canonical], args, 0, &mut removed)?;
    Ok(removed)
}

/// [`restore_optional_nulls`] on a call's arguments.
///
/// Arguments still in JSON text are parsed first, strictly: text that is not one JSON document or
/// repeats a key is left untouched for the dispatcher to report as `malformed`. Returns whether
/// anything was removed (the arguments are then a parsed value).
pub fn restore_call_nulls(call: &mut ToolCall, canonical: &Value) -> Result<bool, LowerError> {
    match &mut call.arguments {
        RawArguments::Value(value) => Ok(restore_optional_nulls(canonical, value)? > 0),
        RawArguments::Json(text) => {
            let Some(mut value) = parse_strict(text) else {
                return Ok(false);
            };
            if restore_optional_nulls(canonical, &mut value)? == 0 {
                return Ok(false);
            }
            call.arguments = RawArguments::Value(value);
            Ok(true)
        }
    }
}

/// Whether a canonical input schema declares no arguments: an object schema with no (or empty)
/// `properties`, nothing `required`, and no map keywords (`patternProperties`, or
/// `additionalProperties` with a schema or `true`).
pub fn takes_no_arguments(canonical: &Value) -> bool {
    let Some(map) = canonical.as_object() else {
        return false;
    };
    let empty = |key: &str| match map.get(key) {
        None => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(_) => false,
    };
    map.get("type").and_then(Value::as_str) == Some("object")
        && empty("properties")
        && empty("required")
        && empty("patternProperties")
        && map
            .get("additionalProperties")
            .is_none_or(|a| a == &Value::Bool(false))
}

/// For a tool that takes no arguments (see [`takes_no_arguments`]), arguments that some
/// OpenAI-compatible back ends send for such a call — empty text (`""`, or only whitespace) or
/// JSON `null` — become `{}`. Returns whether the arguments were replaced.
///
/// Only there: for a tool with parameters, empty arguments stay as they are, and the dispatcher
/// refuses them as `malformed`.
pub fn restore_empty_arguments(call: &mut ToolCall, canonical: &Value) -> bool {
    let empty = match &call.arguments {
        RawArguments::Json(text) => text.trim().is_empty(),
        RawArguments::Value(value) => value.is_null(),
    };
    if !empty || !takes_no_arguments(canonical) {
        return false;
    }
    call.arguments = RawArguments::Value(Value::Object(serde_json::Map::new()));
    true
}

fn restore(
    root: &Value,
    schemas: &[&Value],
    value: &mut Value,
    depth: usize,
    removed: &mut usize,
) -> Result<(), LowerError> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut applicable = Vec::new();
    for schema in schemas {
        expand(root, schema, &mut applicable, 0);
    }
    match value {
        Value::Object(object) => {
            let keys: Vec<String> = object.keys().cloned().collect();
            for key in keys {
                let mentions: Vec<(&Value, bool)> = applicable
                    .iter()
                    .filter_map(|s| {
                        let sub = s.get("properties")?.get(&key)?;
                        let required = s
                            .get("required")
                            .and_then(Value::as_array)
                            .is_some_and(|r| r.iter().any(|n| n == key.as_str()));
                        Some((sub, required))
                    })
                    .collect();
                let Some(child) = object.get_mut(&key) else {
                    continue;
                };
                if child.is_null() {
                    let absent_means_null = !mentions.is_empty()
                        && mentions
                            .iter()
                            .all(|(sub, required)| !required && !accepts_null(root, sub));
                    if absent_means_null {
                        object.remove(&key);
                        *removed += 1;
                    }
                } else {
                    let subs: Vec<&Value> = mentions.iter().map(|(s, _)| *s).collect();
                    if !subs.is_empty() {
                        restore(root, &subs, child, depth + 1, removed)?;
                    }
                }
            }
        }
        Value::Array(items) => {
            let subs: Vec<&Value> = applicable.iter().filter_map(|s| s.get("items")).collect();
            if !subs.is_empty() {
                for item in items {
                    restore(root, &subs, item, depth + 1, removed)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The schemas that apply to one value: `schema` itself, and through `$ref`, `anyOf`, `oneOf` and
/// `allOf`, the schemas they reach.
fn expand<'a>(root: &'a Value, schema: &'a Value, out: &mut Vec<&'a Value>, depth: usize) {
    if depth > MAX_DEPTH || out.len() >= MAX_APPLICABLE {
        return;
    }
    let Some(map) = schema.as_object() else {
        return;
    };
    out.push(schema);
    if let Some(target) = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| resolve_ref(root, r))
    {
        expand(root, target, out, depth + 1);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = map.get(key).and_then(Value::as_array) {
            for branch in branches {
                expand(root, branch, out, depth + 1);
            }
        }
    }
}

/// Parses one JSON document, refusing duplicate object keys. `None` when it is not valid.
pub(crate) fn parse_strict(text: &str) -> Option<Value> {
    toolguard_pipeline::call::strict_json(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": "integer"},
                "c": {"type": ["string", "null"]},
                "n": {"$ref": "#/$defs/N"},
                "list": {"type": "array", "items": {"$ref": "#/$defs/N"}}
            },
            "required": ["a"],
            "$defs": {"N": {"type": "object", "properties": {"x": {"type": "string"}}}}
        })
    }

    #[test]
    fn removes_only_optional_non_nullable_nulls() {
        let mut args = json!({"a": null, "b": null, "c": null, "n": {"x": null},
            "list": [{"x": null}, {"x": "k"}]});
        let removed = restore_optional_nulls(&schema(), &mut args).unwrap();
        assert_eq!(removed, 3);
        assert_eq!(
            args,
            json!({"a": null, "c": null, "n": {}, "list": [{}, {"x": "k"}]})
        );
    }

    #[test]
    fn strict_parse_rejects_duplicates() {
        assert!(parse_strict(r#"{"a":1,"a":2}"#).is_none());
        assert!(parse_strict(r#"{"a":1} x"#).is_none());
        assert!(parse_strict("").is_none());
        assert_eq!(
            parse_strict(r#"{"a":[1,{"b":null}]}"#),
            Some(json!({"a": [1, {"b": null}]}))
        );
    }

    #[test]
    fn call_with_bad_text_is_untouched() {
        let mut call = ToolCall::new("c1", "t", r#"{"b":null,"b":null}"#);
        assert!(!restore_call_nulls(&mut call, &schema()).unwrap());
        assert_eq!(
            call.arguments,
            RawArguments::Json(r#"{"b":null,"b":null}"#.to_owned())
        );
        let mut call = ToolCall::new("c1", "t", r#"{"a":"x","b":null}"#);
        assert!(restore_call_nulls(&mut call, &schema()).unwrap());
        assert_eq!(call.arguments, RawArguments::Value(json!({"a": "x"})));
    }
}
