//! The portable form every export starts from: what providers and MCP clients accept at every
//! schema position.
//!
//! * A boolean schema (`true`, what schemars emits for a `serde_json::Value` argument) becomes an
//!   object: `true` is `{}` with a description saying it accepts any JSON value, `false` is
//!   `{"not": {}}`. MCP requires every property schema to be an object (the official TypeScript
//!   SDK rejects a whole `tools/list` otherwise). `additionalProperties`,
//!   `unevaluatedProperties` and `unevaluatedItems` keep their boolean form, which every
//!   provider accepts.
//! * A schema that accepts any value (no `type`, `enum`, `const`, `$ref` or combinator) gets a
//!   description that says so.
//! * A `format` the dialect does not know (schemars' `uint`, `uint64`, `int32`, `double`, ...) is
//!   removed; a sized integer format is mapped to the `minimum`/`maximum` it implies (the
//!   tighter bound wins when the schema has one already).
//!
//! Each change is a [`LossyStep`]. The canonical schema, which the dispatcher validates against,
//! is untouched.

use serde_json::{Map, Value, json};

use super::schema::{Limits, LossyStep, LowerError, Lowered, Pointer, check_bounds};

/// The sentence given to a schema that accepts any JSON value.
pub const ANY_VALUE: &str =
    "Accepts any JSON value: a string, number, boolean, null, array or object.";

/// The formats of JSON Schema 2020-12 (the only ones JSON-Schema dialects keep).
pub(crate) const JSON_SCHEMA_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Keywords whose value is one schema.
const ONE: &[&str] = &[
    "items",
    "additionalItems",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
];
/// Keywords whose value is one schema, where a boolean is the common, accepted spelling.
const BOOLEAN_OK: &[&str] = &[
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
];
/// Keywords whose value maps names to schemas.
const MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];
/// Keywords whose value is an array of schemas.
const LISTS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];
/// Keywords that restrict which values a schema accepts (without them it accepts any value).
const RESTRICTING: &[&str] = &[
    "type", "enum", "const", "$ref", "anyOf", "oneOf", "allOf", "not", "if",
];

/// The range a sized integer format implies: `(format, minimum, maximum)`.
const INTEGER_RANGES: &[(&str, i64, Option<i64>)] = &[
    ("int8", -128, Some(127)),
    ("int16", -32_768, Some(32_767)),
    ("int32", -2_147_483_648, Some(2_147_483_647)),
    ("uint8", 0, Some(255)),
    ("uint16", 0, Some(65_535)),
    ("uint32", 0, Some(4_294_967_295)),
    ("uint", 0, None),
    ("uint64", 0, None),
    ("uint128", 0, None),
    ("usize", 0, None),
];

/// `canonical` in its portable form, keeping the formats in `formats`.
pub(crate) fn portable(
    canonical: &Value,
    formats: &[&str],
    limits: Limits,
) -> Result<Lowered, LowerError> {
    check_bounds(canonical, limits)?;
    let mut walk = Portable {
        formats,
        lossy: Vec::new(),
    };
    let schema = walk.node(canonical, &Pointer::root(), false);
    Ok(Lowered {
        schema,
        lossy: walk.lossy,
    })
}

struct Portable<'f> {
    formats: &'f [&'f str],
    lossy: Vec<LossyStep>,
}

impl Portable<'_> {
    fn record(&mut self, at: &Pointer, what: impl Into<String>) {
        self.lossy.push(LossyStep {
            pointer: at.to_string(),
            what: what.into(),
        });
    }

    /// One schema position; `describe` says whether an any-value schema here gets the sentence
    /// (not at the root, nor under `not`). The depth was bounded by [`check_bounds`] first.
    fn node(&mut self, schema: &Value, at: &Pointer, describe: bool) -> Value {
        let map = match schema {
            Value::Bool(true) => {
                self.record(at, "boolean schema true written as {} with a description");
                return json!({ "description": ANY_VALUE });
            }
            Value::Bool(false) => {
                self.record(at, "boolean schema false written as {\"not\": {}}");
                return json!({ "not": {} });
            }
            Value::Object(map) => map,
            // Not a schema: left for the dialect's own checks to refuse.
            other => return other.clone(),
        };
        let mut out = Map::with_capacity(map.len());
        for (key, value) in map {
            let here = at.child(key);
            let lowered = match (key.as_str(), value) {
                (k, Value::Bool(_)) if BOOLEAN_OK.contains(&k) => value.clone(),
                (k, _) if ONE.contains(&k) || BOOLEAN_OK.contains(&k) => {
                    if k == "items" && value.is_array() {
                        self.list(value, &here)
                    } else {
                        self.node(value, &here, k != "not")
                    }
                }
                (k, Value::Object(children)) if MAPS.contains(&k) => {
                    let mut lowered = Map::with_capacity(children.len());
                    for (name, child) in children {
                        lowered.insert(name.clone(), self.node(child, &here.child(name), true));
                    }
                    Value::Object(lowered)
                }
                (k, Value::Array(_)) if LISTS.contains(&k) => self.list(value, &here),
                _ => value.clone(),
            };
            out.insert(key.clone(), lowered);
        }
        self.format(&mut out, at);
        if describe && !RESTRICTING.iter().any(|k| out.contains_key(*k)) {
            self.say_any_value(&mut out, at);
        }
        Value::Object(out)
    }

    fn list(&mut self, value: &Value, at: &Pointer) -> Value {
        let items = value.as_array().map(Vec::as_slice).unwrap_or_default();
        let lowered = items
            .iter()
            .enumerate()
            .map(|(i, item)| self.node(item, &at.child(&i.to_string()), true))
            .collect();
        Value::Array(lowered)
    }

    /// Removes a `format` outside the dialect's list, mapping sized integers to bounds.
    fn format(&mut self, out: &mut Map<String, Value>, at: &Pointer) {
        let Some(format) = out.get("format").and_then(Value::as_str).map(str::to_owned) else {
            return;
        };
        if self.formats.contains(&format.as_str()) {
            return;
        }
        out.remove("format");
        let here = at.child("format");
        match INTEGER_RANGES.iter().find(|(name, _, _)| *name == format) {
            Some(&(_, min, max)) => {
                tighten(out, "minimum", min, |new, old| new > old);
                let mut what = format!("format {format} removed, mapped to minimum {min}");
                if let Some(max) = max {
                    tighten(out, "maximum", max, |new, old| new < old);
                    what.push_str(&format!(" and maximum {max}"));
                }
                self.record(&here, what);
            }
            None => self.record(&here, format!("format {format} removed (not portable)")),
        }
    }

    fn say_any_value(&mut self, out: &mut Map<String, Value>, at: &Pointer) {
        let text = match out.get("description").and_then(Value::as_str) {
            Some(text) if text.contains(ANY_VALUE) => return,
            Some(text) if !text.is_empty() => format!("{text}\n{ANY_VALUE}"),
            _ => ANY_VALUE.to_owned(),
        };
        out.insert("description".to_owned(), Value::String(text));
        self.record(at, "description says the schema accepts any JSON value");
    }
}

/// Sets `key` to `bound` unless the schema's own value is tighter (`tighter(new, old)` says
/// whether `bound` is).
fn tighten(out: &mut Map<String, Value>, key: &str, bound: i64, tighter: fn(f64, f64) -> bool) {
    let old = out.get(key).and_then(Value::as_f64);
    #[allow(clippy::cast_precision_loss)] // bounds of at most 32-bit integers are exact in f64
    let new = bound as f64;
    if old.is_none_or(|old| tighter(new, old)) {
        out.insert(key.to_owned(), json!(bound));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(schema: Value) -> Lowered {
        portable(&schema, JSON_SCHEMA_FORMATS, Limits::DEFAULT).expect("within bounds")
    }

    #[test]
    fn boolean_schemas_become_objects_at_every_position() {
        let lowered = run(json!({
            "type": "object",
            "properties": {"any": true, "never": false, "list": {"type": "array", "items": true}},
            "additionalProperties": false,
            "$defs": {"A": {"anyOf": [true, {"type": "null"}]}}
        }));
        let s = &lowered.schema;
        assert_eq!(s["properties"]["any"], json!({"description": ANY_VALUE}));
        assert_eq!(s["properties"]["never"], json!({"not": {}}));
        assert_eq!(
            s["properties"]["list"]["items"],
            json!({"description": ANY_VALUE})
        );
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(
            s["$defs"]["A"]["anyOf"][0],
            json!({"description": ANY_VALUE})
        );
        let pointers: Vec<&str> = lowered.lossy.iter().map(|l| l.pointer.as_str()).collect();
        assert!(pointers.contains(&"/properties/any"));
        assert!(pointers.contains(&"/$defs/A/anyOf/0"));
    }

    #[test]
    fn untyped_schemas_say_what_they_accept() {
        let lowered = run(json!({
            "type": "object",
            "properties": {"doc": {"description": "Free-form payload."}, "empty": {}}
        }));
        assert_eq!(
            lowered.schema["properties"]["doc"]["description"],
            format!("Free-form payload.\n{ANY_VALUE}")
        );
        assert_eq!(
            lowered.schema["properties"]["empty"]["description"],
            ANY_VALUE
        );
    }

    #[test]
    fn integer_formats_map_to_bounds() {
        let lowered = run(json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "format": "uint8", "minimum": 1},
                "b": {"type": "integer", "format": "int32", "maximum": 3_000_000_000_u64},
                "c": {"type": "integer", "format": "uint64", "minimum": 0},
                "d": {"type": "number", "format": "double"},
                "e": {"type": "string", "format": "date-time"}
            }
        }));
        let p = &lowered.schema["properties"];
        assert_eq!(
            p["a"],
            json!({"type": "integer", "minimum": 1, "maximum": 255})
        );
        assert_eq!(
            p["b"],
            json!({"type": "integer", "minimum": -2_147_483_648_i64, "maximum": 2_147_483_647})
        );
        assert_eq!(p["c"], json!({"type": "integer", "minimum": 0}));
        assert_eq!(p["d"], json!({"type": "number"}));
        assert_eq!(p["e"]["format"], "date-time");
        assert_eq!(lowered.lossy.len(), 4);
    }

    #[test]
    fn formats_the_dialect_knows_are_kept() {
        let lowered = portable(
            &json!({"type": "object", "properties": {"n": {"type": "integer", "format": "int32"}}}),
            &["int32"],
            Limits::DEFAULT,
        )
        .expect("within bounds");
        assert_eq!(lowered.schema["properties"]["n"]["format"], "int32");
        assert!(lowered.lossy.is_empty());
    }
}
