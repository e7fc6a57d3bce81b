//! Schema validation: the arguments against the tool's input schema (jsonschema, compiled once).

use jsonschema::Validator;
use serde_json::Value;

use super::Stop;
use crate::outcome::{ArgumentError, Status};

/// Most errors reported for one call.
pub(crate) const MAX_REPORTED_ERRORS: usize = 32;

/// Compiles a tool schema.
pub(crate) fn compile(schema: &Value) -> Result<Validator, jsonschema::ValidationError<'static>> {
    jsonschema::validator_for(schema)
}

/// Most subschemas one position of a value can be checked against, following `$ref`, `anyOf`,
/// `oneOf`, `allOf`, `not`, `if`/`then`/`else` and `dependentSchemas` (each path counted).
/// Branches that lead to more branches, level after level, multiply: twenty `$ref`s at each of
/// sixteen levels are 20^16 checks of one value, enough for one call to run for ever.
pub(crate) const MAX_SCHEMA_PATHS: u64 = 1024;

/// Refuses a schema under which one position of a value is checked against more than
/// [`MAX_SCHEMA_PATHS`] subschemas, or against a subschema that leads back to itself without
/// moving into the value: the message names the position, inside the schema, where it starts.
pub(crate) fn check_branching(schema: &Value) -> Result<(), String> {
    let mut paths = Paths {
        root: schema,
        memo: std::collections::HashMap::new(),
        open: Vec::new(),
    };
    let mut worst: Option<(u64, String)> = None;
    let mut pending = vec![(schema, String::new())];
    while let Some((node, at)) = pending.pop() {
        match node {
            Value::Object(map) => {
                let n = paths.count(node);
                if n > MAX_SCHEMA_PATHS && worst.as_ref().is_none_or(|(w, _)| n > *w) {
                    worst = Some((n, at.clone()));
                }
                for (key, child) in map {
                    // Values, not schemas.
                    if !matches!(key.as_str(), "enum" | "const" | "examples" | "default") {
                        pending.push((child, format!("{at}/{}", escape(key))));
                    }
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    pending.push((child, format!("{at}/{i}")));
                }
            }
            _ => {}
        }
    }
    match worst {
        None => Ok(()),
        Some((u64::MAX, at)) => Err(format!(
            "the schema at `{at}` leads back to itself (`$ref`, `anyOf`, `oneOf`, `allOf`, \
             `not`, `if`) without moving into the value: checking a value would never end"
        )),
        Some((n, at)) => {
            let n = match n {
                n if n == u64::MAX - 1 => "more than 10^19".to_owned(),
                n => n.to_string(),
            };
            Err(format!(
                "one value at `{at}` would be checked against {n} subschemas (`$ref`s inside \
                 `anyOf`/`oneOf`/`allOf`, level after level); at most {MAX_SCHEMA_PATHS} are \
                 allowed, so that no call costs unbounded time: flatten the schema"
            ))
        }
    }
}

/// A JSON pointer token.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Counts, per subschema, the subschemas one position of a value is checked against.
struct Paths<'a> {
    root: &'a Value,
    /// Counted subschemas, by address.
    memo: std::collections::HashMap<*const Value, u64>,
    /// The subschemas being counted (a cycle among them never ends: `u64::MAX`).
    open: Vec<*const Value>,
}

impl<'a> Paths<'a> {
    fn count(&mut self, node: &'a Value) -> u64 {
        let id: *const Value = node;
        if let Some(n) = self.memo.get(&id) {
            return *n;
        }
        if self.open.contains(&id) {
            return u64::MAX;
        }
        self.open.push(id);
        let mut n: u64 = 1;
        for child in same_position(self.root, node) {
            let c = self.count(child);
            // `u64::MAX` is a cycle; a count that overflows stays just below it.
            n = if c == u64::MAX || n == u64::MAX {
                u64::MAX
            } else {
                n.saturating_add(c).min(u64::MAX - 1)
            };
        }
        self.open.pop();
        self.memo.insert(id, n);
        n
    }
}

/// The subschemas `node` checks the same position of a value against.
fn same_position<'a>(root: &'a Value, node: &'a Value) -> Vec<&'a Value> {
    let mut out = Vec::new();
    let Some(map) = node.as_object() else {
        return out;
    };
    if let Some(target) = map
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
        .and_then(|p| root.pointer(p))
    {
        out.push(target);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branches) = map.get(key).and_then(Value::as_array) {
            out.extend(branches);
        }
    }
    for key in ["not", "if", "then", "else"] {
        out.extend(map.get(key));
    }
    if let Some(deps) = map.get("dependentSchemas").and_then(Value::as_object) {
        out.extend(deps.values());
    }
    out
}

/// Validates `args`, reporting each error with its JSON pointer. Valid arguments are judged by
/// the validator's boolean check, which builds no error; the errors are collected only when
/// there are some.
pub(crate) fn arguments(validator: &Validator, args: &Value) -> Result<(), Stop> {
    if validator.is_valid(args) {
        return Ok(());
    }
    let errors: Vec<ArgumentError> = validator
        .iter_errors(args)
        .take(MAX_REPORTED_ERRORS)
        .map(|e| ArgumentError {
            pointer: e.instance_path().to_string(),
            message: e.masked().to_string(),
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let mut stop = Stop::new(
        Status::InvalidArguments,
        "schema",
        format!("{} argument error(s)", errors.len()),
    );
    stop.errors = errors;
    Err(stop)
}

/// Validates the sanitized `args` again: stripping characters can leave a value the schema
/// refuses (an all zero-width string under `min_len = 1` becomes `""`). Reason
/// `schema_after_sanitize`.
pub(crate) fn sanitized(validator: &Validator, args: &Value) -> Result<(), Stop> {
    arguments(validator, args).map_err(|mut stop| {
        stop.reason = Some(crate::outcome::Reason::SchemaAfterSanitize);
        stop
    })
}

/// Reports a typed-decoding failure (the schema accepted what the Rust type does not).
pub(crate) fn decode_error(err: serde_json::Error) -> Stop {
    let mut stop = Stop::new(
        Status::InvalidArguments,
        "decode",
        "arguments do not fit the tool",
    );
    stop.errors = vec![ArgumentError {
        pointer: String::new(),
        message: err.to_string(),
    }];
    stop
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// `levels` levels of `width` branches, each a `$ref` to the next level, under property `x`.
    pub(crate) fn branching(levels: usize, width: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for level in 0..levels {
            let next = json!({"$ref": format!("#/$defs/L{}", level + 1)});
            let branches: Vec<_> = (0..width).map(|_| next.clone()).collect();
            defs.insert(
                format!("L{level}"),
                json!({"type": "array", "anyOf": branches}),
            );
        }
        defs.insert(format!("L{levels}"), json!({"type": "integer"}));
        json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/L0"}}, "$defs": defs})
    }

    #[test]
    fn schemas_whose_branches_multiply_are_refused_before_any_call() {
        // 20^16 checks of one value: the validator would run for ever on `{"x": []}`.
        let err = check_branching(&branching(16, 20)).unwrap_err();
        assert!(err.contains("at most 1024"), "{err}");
        assert!(err.contains("more than 10^19"), "{err}");
        assert!(err.contains("`/properties/x`"), "{err}");
        // Over the bound at 4 levels of 6 branches (each a `$ref` node and its target).
        let err = check_branching(&branching(4, 6)).unwrap_err();
        assert!(err.contains("against 3110 subschemas"), "{err}");
        // A union of a few shapes, recursive types, and a tree of properties are fine.
        assert_eq!(check_branching(&branching(3, 4)), Ok(()));
        let tree = json!({"$defs": {"Node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            "value": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}}}},
            "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}});
        assert_eq!(check_branching(&tree), Ok(()));
        // Data is not read as schemas.
        let data = json!({"type": "object", "properties": {"x": {"enum": [{"$ref": "#"}]}}});
        assert_eq!(check_branching(&data), Ok(()));
    }

    #[test]
    fn a_schema_that_leads_back_to_itself_in_place_is_refused() {
        let cycle = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"anyOf": [{"type": "integer"}, {"$ref": "#/$defs/B"}]},
                      "B": {"allOf": [{"$ref": "#/$defs/A"}]}}});
        let err = check_branching(&cycle).unwrap_err();
        assert!(err.contains("leads back to itself"), "{err}");
    }
}
