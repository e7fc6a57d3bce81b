//! Lowering to the OpenAPI 3.0 schema subset of Gemini's `parameters` field.
//!
//! `$ref`s are inlined (a recursive schema is refused), type unions with `null` become
//! `nullable: true`, every schema has a single `type`, `additionalProperties`, `$schema` and `$id`
//! are dropped, `const` becomes a one-value `enum`, and property names must match
//! `[a-zA-Z_][a-zA-Z0-9_]{0,63}`.

use serde_json::{Map, Value, json};

use super::schema::{
    Budget, Limits, LossyStep, LowerError, Lowered, Pointer, check_bounds, describe,
    require_object_root, resolve_ref,
};

/// Keywords of the OpenAPI subset kept as they are.
const KEEP: &[&str] = &[
    "description",
    "title",
    "minLength",
    "maxLength",
    "pattern",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "default",
    "example",
    "nullable",
];

/// `format` values the subset knows.
const FORMATS: &[&str] = &["enum", "date-time", "int32", "int64", "float", "double"];

/// Keywords dropped without moving them into the description.
const DROPPED: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "additionalProperties",
    "examples",
];

/// Lowers `canonical` to Gemini's OpenAPI subset.
pub fn lower_gemini_openapi(canonical: &Value) -> Result<Lowered, LowerError> {
    lower_openapi(canonical, Limits::DEFAULT)
}

pub(crate) fn lower_openapi(canonical: &Value, limits: Limits) -> Result<Lowered, LowerError> {
    check_bounds(canonical, limits)?;
    require_object_root(canonical)?;
    let mut walk = OpenApi {
        root: canonical,
        budget: Budget::new(limits),
        lossy: Vec::new(),
        active: vec![],
    };
    let schema = walk.node(canonical, &Pointer::root(), 1)?;
    // A definition inlined at several places is recorded once.
    let mut lossy: Vec<LossyStep> = Vec::with_capacity(walk.lossy.len());
    for step in walk.lossy {
        if !lossy.contains(&step) {
            lossy.push(step);
        }
    }
    Ok(Lowered { schema, lossy })
}

/// Whether `name` is a property key Gemini accepts.
pub fn is_gemini_key(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

struct OpenApi<'a> {
    root: &'a Value,
    budget: Budget,
    lossy: Vec<LossyStep>,
    /// `$ref`s being inlined, outermost first: a repeat is recursion.
    active: Vec<String>,
}

impl<'a> OpenApi<'a> {
    fn record(&mut self, at: &Pointer, what: impl Into<String>) {
        self.lossy.push(LossyStep {
            pointer: at.to_string(),
            what: what.into(),
        });
    }

    fn node(&mut self, schema: &'a Value, at: &Pointer, depth: usize) -> Result<Value, LowerError> {
        self.budget.visit(depth)?;
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(true) => {
                self.record(at, "boolean schema true lowered to an unconstrained schema");
                return Ok(json!({}));
            }
            _ => {
                return Err(LowerError::Unsupported {
                    pointer: at.to_string(),
                    reason: "a schema that accepts nothing (or is not a schema)".to_owned(),
                });
            }
        };
        if map.contains_key("anyOf") && map.contains_key("oneOf") {
            return Err(unsupported(at, "anyOf together with oneOf"));
        }
        let mut out = Map::new();
        let mut moved: Vec<(String, Value)> = Vec::new();
        let mut nullable = false;

        if let Some(reference) = map.get("$ref") {
            let reference = reference.as_str().unwrap_or_default();
            if self.active.iter().any(|r| r == reference) {
                return Err(LowerError::Recursive {
                    pointer: at.child("$ref").to_string(),
                });
            }
            let target = resolve_ref(self.root, reference).ok_or_else(|| LowerError::BadRef {
                pointer: at.child("$ref").to_string(),
                reference: reference.to_owned(),
            })?;
            self.active.push(reference.to_owned());
            // Lossy steps inside the target are recorded at the target's own location.
            let target_at = Pointer::from_fragment(reference);
            let inlined = self.node(target, &target_at, depth + 1);
            self.active.pop();
            if let Value::Object(inner) = inlined? {
                out = inner;
            }
        }

        for (key, value) in map {
            let here = at.child(key);
            match key.as_str() {
                "required" if !map.contains_key("properties") => {
                    self.record(&here, "required moved to description");
                    moved.push((key.clone(), value.clone()));
                }
                "$ref" | "$defs" | "definitions" | "required" => {}
                "type" => match value {
                    Value::String(t) if t == "null" => {
                        nullable = true;
                        self.record(&here, "type null lowered to nullable");
                    }
                    Value::String(t) => {
                        out.insert(key.clone(), json!(t));
                    }
                    Value::Array(types) => {
                        let mut kept: Vec<&Value> = Vec::new();
                        for t in types {
                            if t == "null" {
                                nullable = true;
                            } else {
                                kept.push(t);
                            }
                        }
                        match kept.as_slice() {
                            [] => {}
                            [one] => {
                                out.insert(key.clone(), (*one).clone());
                            }
                            many => {
                                self.record(&here, "type union lowered to anyOf");
                                let branches: Vec<Value> =
                                    many.iter().map(|t| json!({ "type": t })).collect();
                                out.insert("anyOf".to_owned(), Value::Array(branches));
                            }
                        }
                    }
                    _ => return Err(unsupported(&here, "type is not a string or an array")),
                },
                "properties" => {
                    let props = value
                        .as_object()
                        .ok_or_else(|| unsupported(&here, "not a map"))?;
                    let mut lowered = Map::new();
                    for (name, sub) in props {
                        if !is_gemini_key(name) {
                            return Err(LowerError::Unsupported {
                                pointer: here.child(name).to_string(),
                                reason: format!(
                                    "property name {name:?} must match [a-zA-Z_][a-zA-Z0-9_]{{0,63}}"
                                ),
                            });
                        }
                        lowered.insert(name.clone(), self.node(sub, &here.child(name), depth + 2)?);
                    }
                    let required: Vec<Value> = map
                        .get("required")
                        .and_then(Value::as_array)
                        .map(|r| {
                            r.iter()
                                .filter(|n| n.as_str().is_some_and(|n| lowered.contains_key(n)))
                                .cloned()
                                .collect()
                        })
                        .unwrap_or_default();
                    out.insert(key.clone(), Value::Object(lowered));
                    if !required.is_empty() {
                        out.insert("required".to_owned(), Value::Array(required));
                    }
                }
                "items" => {
                    if value.is_array() {
                        self.record(&here, "tuple items moved to description");
                        moved.push((key.clone(), value.clone()));
                    } else {
                        out.insert(key.clone(), self.node(value, &here, depth + 1)?);
                    }
                }
                "anyOf" | "oneOf" => {
                    let branches = value
                        .as_array()
                        .ok_or_else(|| unsupported(&here, "not an array"))?;
                    if key == "oneOf" {
                        self.record(&here, "oneOf lowered to anyOf");
                    }
                    let mut lowered = Vec::new();
                    for (i, sub) in branches.iter().enumerate() {
                        let branch = self.node(sub, &here.child(&i.to_string()), depth + 2)?;
                        if branch == json!({"nullable": true}) {
                            nullable = true;
                        } else {
                            lowered.push(branch);
                        }
                    }
                    if let Some(Value::Array(existing)) = out.get_mut("anyOf") {
                        existing.extend(lowered);
                    } else {
                        out.insert("anyOf".to_owned(), Value::Array(lowered));
                    }
                }
                "const" => {
                    if value.is_string() {
                        out.insert("enum".to_owned(), json!([value]));
                        out.entry("type".to_owned())
                            .or_insert_with(|| json!("string"));
                    } else if value.is_null() {
                        nullable = true;
                        self.record(&here, "const null lowered to nullable");
                    } else {
                        self.record(&here, "non-string const moved to description");
                        moved.push((key.clone(), value.clone()));
                    }
                }
                "enum" => {
                    let values = value
                        .as_array()
                        .ok_or_else(|| unsupported(&here, "not an array"))?;
                    if values.iter().any(Value::is_null) {
                        nullable = true;
                    }
                    let strings: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
                    if strings.iter().all(|v| v.is_string()) {
                        out.insert(key.clone(), json!(strings));
                    } else {
                        self.record(&here, "non-string enum moved to description");
                        moved.push((key.clone(), value.clone()));
                    }
                }
                "format" => {
                    if value.as_str().is_some_and(|f| FORMATS.contains(&f)) {
                        out.insert(key.clone(), value.clone());
                    } else {
                        self.record(&here, "format moved to description");
                        moved.push((key.clone(), value.clone()));
                    }
                }
                k if KEEP.contains(&k) => {
                    out.insert(key.clone(), value.clone());
                }
                k if DROPPED.contains(&k) => self.record(&here, format!("{k} dropped")),
                k => {
                    self.record(&here, format!("{k} moved to description"));
                    moved.push((key.clone(), value.clone()));
                }
            }
        }
        describe(&mut out, &moved);
        if merge_string_constants(&mut out) {
            self.record(at, "anyOf of string constants merged into one enum");
        }
        simplify_any_of(&mut out);
        if nullable {
            out.insert("nullable".to_owned(), Value::Bool(true));
        }
        Ok(Value::Object(out))
    }
}

/// An `anyOf` whose branches are each one string constant (how schemars writes a documented
/// unit enum) becomes one string `enum`; the branch descriptions join the parent's as
/// `value: description` lines. Returns whether it merged.
fn merge_string_constants(out: &mut Map<String, Value>) -> bool {
    let Some(Value::Array(branches)) = out.get("anyOf") else {
        return false;
    };
    if branches.len() < 2 || out.contains_key("enum") {
        return false;
    }
    if out.get("type").is_some_and(|t| t != "string") {
        return false;
    }
    let mut values = Vec::new();
    let mut notes = Vec::new();
    for branch in branches {
        let Some(map) = branch.as_object() else {
            return false;
        };
        let allowed = ["type", "enum", "description", "title"];
        if !map.keys().all(|k| allowed.contains(&k.as_str())) {
            return false;
        }
        if map.get("type").is_some_and(|t| t != "string") {
            return false;
        }
        let Some([Value::String(value)]) =
            map.get("enum").and_then(Value::as_array).map(Vec::as_slice)
        else {
            return false;
        };
        if let Some(Value::String(d)) = map.get("description") {
            notes.push((value.clone(), Value::String(d.clone())));
        }
        values.push(Value::String(value.clone()));
    }
    out.remove("anyOf");
    out.insert("type".to_owned(), json!("string"));
    out.insert("enum".to_owned(), Value::Array(values));
    describe(out, &notes);
    true
}

/// An `anyOf` left with one branch is merged into its parent (the parent's keys win).
fn simplify_any_of(out: &mut Map<String, Value>) {
    let single = matches!(out.get("anyOf"), Some(Value::Array(b)) if b.len() == 1);
    if !single {
        if matches!(out.get("anyOf"), Some(Value::Array(b)) if b.is_empty()) {
            out.remove("anyOf");
        }
        return;
    }
    let Some(Value::Array(mut branches)) = out.remove("anyOf") else {
        return;
    };
    if let Some(Value::Object(branch)) = branches.pop() {
        for (k, v) in branch {
            if k == "nullable" {
                out.insert(k, v);
            } else {
                out.entry(k).or_insert(v);
            }
        }
    }
}

fn unsupported(at: &Pointer, what: &str) -> LowerError {
    LowerError::Unsupported {
        pointer: at.to_string(),
        reason: what.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inlines_and_nullables() {
        let canonical = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "n": {"anyOf": [{"$ref": "#/$defs/N"}, {"type": "null"}]},
                "s": {"type": ["string", "null"]},
                "k": {"const": "x"}
            },
            "required": ["k"],
            "$defs": {"N": {"type": "object", "properties": {"a": {"type": "integer"}},
                "required": ["a"], "additionalProperties": false}}
        });
        let lowered = lower_gemini_openapi(&canonical).unwrap();
        assert_eq!(
            lowered.schema,
            json!({
                "type": "object",
                "properties": {
                    "n": {"type": "object", "properties": {"a": {"type": "integer"}},
                        "required": ["a"], "nullable": true},
                    "s": {"type": "string", "nullable": true},
                    "k": {"type": "string", "enum": ["x"]}
                },
                "required": ["k"]
            })
        );
    }

    #[test]
    fn refuses_recursion_and_bad_keys() {
        let recursive = json!({"type": "object", "properties": {"next": {"$ref": "#"}}});
        assert!(matches!(
            lower_gemini_openapi(&recursive),
            Err(LowerError::Recursive { .. })
        ));
        let bad = json!({"type": "object", "properties": {"a-b": {"type": "string"}}});
        assert!(matches!(
            lower_gemini_openapi(&bad),
            Err(LowerError::Unsupported { .. })
        ));
        assert!(is_gemini_key("_a9"));
        assert!(!is_gemini_key("9a"));
    }
}
