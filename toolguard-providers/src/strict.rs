//! Strict-mode lowering: the schema subset OpenAI's strict function calling (and Anthropic's
//! strict tool use) guarantee the model's output conforms to.
//!
//! Every object gets `additionalProperties: false`; for OpenAI every property becomes required and
//! an optional one is made a union with `null` (map the `null` back with
//! [`restore_optional_nulls`](super::restore_optional_nulls) before validation); keywords the
//! dialect does not enforce move into the description as `key: value`; `oneOf` becomes `anyOf`;
//! `default` and metadata are dropped. Each such step is recorded. The canonical schema stays the
//! one the dispatcher validates against: nothing dropped here is dropped from validation.

use serde_json::{Map, Value, json};

use super::portable::{JSON_SCHEMA_FORMATS, portable};
use super::schema::{
    Budget, Limits, LossyStep, LowerError, Lowered, Pointer, accepts_null, check_bounds, describe,
    is_recursive, require_object_root, resolve_chain,
};

/// What a strict dialect supports.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StrictProfile {
    /// Every property must be listed in `required` (optional ones become nullable).
    pub require_all: bool,
    /// Validation keywords the dialect enforces (kept as they are).
    pub keep: &'static [&'static str],
    /// `format` values the dialect knows.
    pub formats: &'static [&'static str],
    /// `$ref` cycles are allowed.
    pub recursion: bool,
    /// Size limits of the dialect, checked on the lowered schema.
    pub size: Option<SizeLimits>,
}

/// Documented size limits of a strict dialect.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SizeLimits {
    /// Object properties in the whole schema.
    pub properties: usize,
    /// Levels of object nesting (written nesting; `$ref`s are not followed).
    pub nesting: usize,
    /// `enum` values in the whole schema.
    pub enum_values: usize,
    /// Characters of all property names, definition names, enum and const values.
    pub text: usize,
}

/// OpenAI Structured Outputs / strict function calling.
pub(crate) const OPENAI: StrictProfile = StrictProfile {
    require_all: true,
    keep: &[
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    ],
    formats: &[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "uuid",
    ],
    recursion: true,
    size: Some(SizeLimits {
        properties: 5000,
        nesting: 10,
        enum_values: 1000,
        text: 120_000,
    }),
};

/// Anthropic strict tool use (structured outputs).
pub(crate) const ANTHROPIC: StrictProfile = StrictProfile {
    require_all: false,
    keep: &["pattern"],
    formats: &[
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "uri",
        "ipv4",
        "ipv6",
        "uuid",
    ],
    recursion: false,
    size: None,
};

/// Keywords every strict dialect understands structurally.
const STRUCTURAL: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "oneOf",
    "enum",
    "const",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "format",
];

/// Annotations dropped without moving them into the description.
const DROPPED: &[&str] = &[
    "$schema",
    "$id",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Lowers `canonical` for OpenAI strict mode.
pub fn lower_openai_strict(canonical: &Value) -> Result<Lowered, LowerError> {
    lower_strict(canonical, &OPENAI, Limits::DEFAULT)
}

/// Lowers `canonical` for Anthropic strict tool use.
pub fn lower_anthropic_strict(canonical: &Value) -> Result<Lowered, LowerError> {
    lower_strict(canonical, &ANTHROPIC, Limits::DEFAULT)
}

pub(crate) fn lower_strict(
    canonical: &Value,
    profile: &StrictProfile,
    limits: Limits,
) -> Result<Lowered, LowerError> {
    check_bounds(canonical, limits)?;
    require_object_root(canonical)?;
    let portable = portable(canonical, JSON_SCHEMA_FORMATS, limits)?;
    let canonical = &portable.schema;
    if !profile.recursion && is_recursive(canonical, limits)? {
        return Err(LowerError::NotStrict {
            pointer: String::new(),
            reason: "recursive schemas are not supported".to_owned(),
        });
    }
    let mut walk = Strict {
        root: canonical,
        profile,
        budget: Budget::new(limits),
        lossy: Vec::new(),
    };
    let schema = walk.node(canonical, &Pointer::root(), 1)?;
    if let Some(size) = profile.size {
        check_size(&schema, size)?;
    }
    let mut lossy = portable.lossy;
    lossy.extend(walk.lossy);
    Ok(Lowered { schema, lossy })
}

/// Refuses a lowered schema over the dialect's documented size limits.
fn check_size(schema: &Value, size: SizeLimits) -> Result<(), LowerError> {
    let too_big = |what: String| LowerError::NotStrict {
        pointer: String::new(),
        reason: format!("more than {what}"),
    };
    let (mut properties, mut enum_values, mut text) = (0usize, 0usize, 0usize);
    // (value, object nesting level of the value)
    let mut stack = vec![(schema, 1usize)];
    while let Some((value, level)) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    match (key.as_str(), child) {
                        ("properties", Value::Object(props)) => {
                            if level > size.nesting {
                                return Err(too_big(format!("{} levels of nesting", size.nesting)));
                            }
                            properties += props.len();
                            text += props.keys().map(|k| k.chars().count()).sum::<usize>();
                            stack.extend(props.values().map(|v| (v, level + 1)));
                        }
                        ("$defs" | "definitions", Value::Object(defs)) => {
                            text += defs.keys().map(|k| k.chars().count()).sum::<usize>();
                            stack.extend(defs.values().map(|v| (v, 1)));
                        }
                        ("enum", Value::Array(values)) => {
                            enum_values += values.len();
                            text += values.iter().map(text_len).sum::<usize>();
                        }
                        ("const", c) => text += text_len(c),
                        (_, child) => stack.push((child, level)),
                    }
                }
            }
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, level))),
            _ => {}
        }
    }
    if properties > size.properties {
        return Err(too_big(format!("{} object properties", size.properties)));
    }
    if enum_values > size.enum_values {
        return Err(too_big(format!("{} enum values", size.enum_values)));
    }
    if text > size.text {
        return Err(too_big(format!(
            "{} characters of names and values",
            size.text
        )));
    }
    Ok(())
}

fn text_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.chars().count(),
        other => other.to_string().len(),
    }
}

struct Strict<'p> {
    root: &'p Value,
    profile: &'p StrictProfile,
    budget: Budget,
    lossy: Vec<LossyStep>,
}

impl Strict<'_> {
    fn record(&mut self, at: &Pointer, what: impl Into<String>) {
        self.lossy.push(LossyStep {
            pointer: at.to_string(),
            what: what.into(),
        });
    }

    /// Lowers one schema node: each keyword in turn, then the strict form checks on the result.
    fn node(&mut self, schema: &Value, at: &Pointer, depth: usize) -> Result<Value, LowerError> {
        self.budget.visit(depth)?;
        let map = strict_map(schema, at)?;
        let mut draft = Draft::default();
        for (key, value) in map {
            self.keyword(map, key, value, &at.child(key), depth, &mut draft)?;
        }
        let Draft { mut out, moved } = draft;
        describe(&mut out, &moved);
        if is_object_schema(map) {
            if map.contains_key("anyOf") || map.contains_key("oneOf") {
                return Err(not_strict(
                    at,
                    "an object schema together with anyOf/oneOf (e.g. a flattened enum)",
                ));
            }
            self.close_object(map, &mut out, at)?;
        }
        check_strict_form(&out, at)?;
        wrap_ref(&mut out, at)?;
        Ok(Value::Object(out))
    }

    /// Lowers one keyword of the node `map` into `draft`: kept, lowered, dropped or moved into
    /// the description.
    fn keyword(
        &mut self,
        map: &Map<String, Value>,
        key: &str,
        value: &Value,
        here: &Pointer,
        depth: usize,
        draft: &mut Draft,
    ) -> Result<(), LowerError> {
        match key {
            "properties" | "$defs" | "definitions" => {
                let lowered = self.named_schemas(value, here, depth)?;
                draft.out.insert(key.to_owned(), lowered);
            }
            "items" => {
                if value.is_array() {
                    return Err(not_strict(here, "tuple `items`"));
                }
                let lowered = self.node(value, here, depth + 1)?;
                draft.out.insert(key.to_owned(), lowered);
            }
            "anyOf" | "oneOf" => self.branches(key, value, here, depth, &mut draft.out)?,
            "additionalProperties" => self.additional_properties(value, here)?,
            "format"
                if value
                    .as_str()
                    .is_some_and(|f| self.profile.formats.contains(&f)) =>
            {
                draft.out.insert(key.to_owned(), value.clone());
            }
            "format" => self.move_out(draft, here, "format moved to description", key, value),
            "required" if !is_object_schema(map) => {
                self.move_out(draft, here, "required moved to description", key, value);
            }
            "required" => {}
            "$ref" => {
                let reference = value.as_str().unwrap_or_default();
                resolve_chain(self.root, reference, here)?;
                draft.out.insert(key.to_owned(), value.clone());
            }
            k if STRUCTURAL.contains(&k) || self.profile.keep.contains(&k) => {
                draft.out.insert(key.to_owned(), value.clone());
            }
            k if DROPPED.contains(&k) => self.record(here, format!("{k} dropped")),
            k => self.move_out(draft, here, format!("{k} moved to description"), key, value),
        }
        Ok(())
    }

    /// Records `what` at `here` and moves `key: value` into the description.
    fn move_out(
        &mut self,
        draft: &mut Draft,
        here: &Pointer,
        what: impl Into<String>,
        key: &str,
        value: &Value,
    ) {
        self.record(here, what);
        draft.moved.push((key.to_owned(), value.clone()));
    }

    /// Lowers each schema of a name-to-schema map (`properties`, `$defs`, `definitions`).
    fn named_schemas(
        &mut self,
        value: &Value,
        here: &Pointer,
        depth: usize,
    ) -> Result<Value, LowerError> {
        let schemas = value
            .as_object()
            .ok_or_else(|| unsupported(here, "not a map"))?;
        let mut lowered = Map::new();
        for (name, sub) in schemas {
            lowered.insert(name.clone(), self.node(sub, &here.child(name), depth + 2)?);
        }
        Ok(Value::Object(lowered))
    }

    /// Lowers the branches of `anyOf` or `oneOf` (recorded as lowered to `anyOf`) into the
    /// node's `anyOf`.
    fn branches(
        &mut self,
        key: &str,
        value: &Value,
        here: &Pointer,
        depth: usize,
        out: &mut Map<String, Value>,
    ) -> Result<(), LowerError> {
        let branches = value
            .as_array()
            .ok_or_else(|| unsupported(here, "not an array"))?;
        let mut lowered = Vec::with_capacity(branches.len());
        for (i, sub) in branches.iter().enumerate() {
            lowered.push(self.node(sub, &here.child(&i.to_string()), depth + 2)?);
        }
        if key == "oneOf" {
            self.record(here, "oneOf lowered to anyOf");
        }
        if let Some(Value::Array(existing)) = out.get_mut("anyOf") {
            existing.extend(lowered);
        } else {
            out.insert("anyOf".to_owned(), Value::Array(lowered));
        }
        Ok(())
    }

    /// `additionalProperties`: `false` stays (the object is closed anyway), `true` is closed and
    /// recorded, a schema (a map) is refused.
    fn additional_properties(&mut self, value: &Value, here: &Pointer) -> Result<(), LowerError> {
        match value {
            Value::Bool(false) => Ok(()),
            Value::Bool(true) => {
                self.record(here, "additionalProperties: true closed");
                Ok(())
            }
            _ => Err(not_strict(
                here,
                "a map (additionalProperties with a schema) has no strict form",
            )),
        }
    }

    /// `additionalProperties: false`, and (for OpenAI) every property required, optional ones
    /// nullable.
    fn close_object(
        &mut self,
        canonical: &Map<String, Value>,
        out: &mut Map<String, Value>,
        at: &Pointer,
    ) -> Result<(), LowerError> {
        out.insert("additionalProperties".to_owned(), Value::Bool(false));
        out.entry("type".to_owned())
            .or_insert_with(|| json!("object"));
        if !out.contains_key("properties") {
            out.insert("properties".to_owned(), Value::Object(Map::new()));
        }
        let required: Vec<&str> = canonical
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let names: Vec<String> = out
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        if !self.profile.require_all {
            let kept: Vec<Value> = names
                .iter()
                .filter(|n| required.contains(&n.as_str()))
                .map(|n| Value::String(n.clone()))
                .collect();
            out.insert("required".to_owned(), Value::Array(kept));
            return Ok(());
        }
        let empty = Value::Null;
        for name in &names {
            if required.contains(&name.as_str()) {
                continue;
            }
            let original = canonical
                .get("properties")
                .and_then(|p| p.get(name))
                .unwrap_or(&empty);
            let nullable = accepts_null(self.root, original);
            if !nullable
                && let Some(Value::Object(props)) = out.get_mut("properties")
                && let Some(prop) = props.get_mut(name)
            {
                make_nullable(prop);
            }
            self.record(
                &at.child2("properties", name),
                "optional property made required and nullable (null means absent)",
            );
        }
        out.insert(
            "required".to_owned(),
            Value::Array(names.into_iter().map(Value::String).collect()),
        );
        Ok(())
    }
}

/// A node being lowered: the keywords it keeps, and those moved into its description.
#[derive(Default)]
struct Draft {
    out: Map<String, Value>,
    moved: Vec<(String, Value)>,
}

/// The keyword map of a schema node, refusing what has no strict form: a boolean schema, an
/// empty schema, `anyOf` together with `oneOf`.
fn strict_map<'s>(schema: &'s Value, at: &Pointer) -> Result<&'s Map<String, Value>, LowerError> {
    let map = match schema {
        Value::Object(map) => map,
        Value::Bool(b) => {
            return Err(LowerError::NotStrict {
                pointer: at.to_string(),
                reason: format!("boolean schema `{b}` (an unconstrained or empty value)"),
            });
        }
        _ => return Err(unsupported(at, "a schema must be an object or a boolean")),
    };
    if map.is_empty() {
        return Err(not_strict(at, "empty schema (any value)"));
    }
    if map.contains_key("anyOf") && map.contains_key("oneOf") {
        return Err(not_strict(at, "anyOf together with oneOf"));
    }
    Ok(map)
}

/// Refuses a lowered node that accepts any value (no `type`, `anyOf`, `$ref`, `enum` or
/// `const`), or an array without `items`.
fn check_strict_form(out: &Map<String, Value>, at: &Pointer) -> Result<(), LowerError> {
    if !["type", "anyOf", "$ref", "enum", "const"]
        .iter()
        .any(|k| out.contains_key(*k))
    {
        return Err(not_strict(
            at,
            "a schema without type, anyOf, $ref, enum or const (it accepts any value)",
        ));
    }
    let is_array = match out.get("type") {
        Some(Value::String(t)) => t == "array",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "array"),
        _ => false,
    };
    if is_array && !out.contains_key("items") {
        return Err(not_strict(
            at,
            "an array without items (a tuple, or an array of any values)",
        ));
    }
    Ok(())
}

/// A `$ref` must stand alone: wraps it in a one-branch `anyOf` when anything else is left
/// beside it (refused when that is an `anyOf` already).
fn wrap_ref(out: &mut Map<String, Value>, at: &Pointer) -> Result<(), LowerError> {
    let Some(reference) = out.get("$ref").cloned() else {
        return Ok(());
    };
    if out.len() > 1 {
        if out.contains_key("anyOf") {
            return Err(not_strict(at, "$ref combined with anyOf/oneOf"));
        }
        out.remove("$ref");
        out.insert("anyOf".to_owned(), json!([{ "$ref": reference }]));
    }
    Ok(())
}

fn not_strict(at: &Pointer, reason: &str) -> LowerError {
    LowerError::NotStrict {
        pointer: at.to_string(),
        reason: reason.to_owned(),
    }
}

fn unsupported(at: &Pointer, what: &str) -> LowerError {
    LowerError::Unsupported {
        pointer: at.to_string(),
        reason: what.to_owned(),
    }
}

/// Whether a canonical schema describes objects.
pub(crate) fn is_object_schema(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    }
}

/// Makes a lowered schema also accept `null`.
fn make_nullable(schema: &mut Value) {
    let Some(map) = schema.as_object_mut() else {
        return;
    };
    let simple =
        !map.contains_key("$ref") && !map.contains_key("anyOf") && !map.contains_key("const");
    match map.get_mut("type") {
        Some(Value::String(t)) if simple => {
            let t = std::mem::take(t);
            map.insert("type".to_owned(), json!([t, "null"]));
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.push(Value::Null);
            }
            return;
        }
        Some(Value::Array(ts)) if simple => {
            if !ts.iter().any(|t| t == "null") {
                ts.push(json!("null"));
            }
            if let Some(Value::Array(values)) = map.get_mut("enum")
                && !values.iter().any(Value::is_null)
            {
                values.push(Value::Null);
            }
            return;
        }
        _ => {}
    }
    if !map.contains_key("$ref")
        && let Some(Value::Array(branches)) = map.get_mut("anyOf")
    {
        branches.push(json!({"type": "null"}));
        return;
    }
    // Wrap: keep the description on the outside.
    let description = map.remove("description");
    let inner = Value::Object(std::mem::take(map));
    map.insert("anyOf".to_owned(), json!([inner, {"type": "null"}]));
    if let Some(d) = description {
        map.insert("description".to_owned(), d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optional_becomes_nullable_and_required() {
        let canonical = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "a": {"type": "string", "minLength": 1},
                "b": {"type": "integer", "format": "int32", "default": 3},
                "c": {"type": ["string", "null"]}
            },
            "required": ["a"]
        });
        let lowered = lower_openai_strict(&canonical).unwrap();
        assert_eq!(
            lowered.schema,
            json!({
                "type": "object",
                "properties": {
                    "a": {"type": "string", "description": "minLength: 1"},
                    // The int32 format is mapped to the bounds it implies.
                    "b": {
                        "type": ["integer", "null"],
                        "minimum": -2_147_483_648_i64,
                        "maximum": 2_147_483_647
                    },
                    "c": {"type": ["string", "null"]}
                },
                "required": ["a", "b", "c"],
                "additionalProperties": false
            })
        );
        assert!(
            lowered
                .lossy
                .iter()
                .any(|s| s.pointer == "/properties/b/default")
        );
        assert!(
            lowered
                .lossy
                .iter()
                .any(|s| s.pointer == "/properties/b/format")
        );
    }

    #[test]
    fn size_limits() {
        let values: Vec<Value> = (0..1001).map(|i| json!(format!("v{i}"))).collect();
        let canonical = json!({"type": "object", "properties": {
            "e": {"type": "string", "enum": values}}, "required": ["e"]});
        let result = lower_openai_strict(&canonical).map(|l| l.schema["properties"]["e"].clone());
        assert!(
            matches!(result, Err(LowerError::NotStrict { .. })),
            "{result:?}"
        );
        let mut deep = json!({"type": "string"});
        for _ in 0..11 {
            deep = json!({"type": "object", "properties": {"a": deep}, "required": ["a"]});
        }
        let err = lower_openai_strict(&deep).unwrap_err();
        assert!(err.to_string().contains("10 levels"), "{err}");
    }

    #[test]
    fn maps_are_not_strict() {
        let canonical = json!({"type": "object", "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "string"}}}});
        let result = lower_openai_strict(&canonical).map(|l| l.schema["properties"]["e"].clone());
        assert!(
            matches!(result, Err(LowerError::NotStrict { .. })),
            "{result:?}"
        );
    }

    /// The refusal both strict dialects give `canonical` (they must agree on where).
    fn not_strict_at(canonical: Value) -> (String, String) {
        let refusal = |result: Result<Lowered, LowerError>| match result {
            Err(LowerError::NotStrict { pointer, reason }) => (pointer, reason),
            other => panic!("expected NotStrict, got {other:?}"),
        };
        let openai = refusal(lower_openai_strict(&canonical));
        let anthropic = refusal(lower_anthropic_strict(&canonical));
        assert_eq!(openai.0, anthropic.0);
        openai
    }

    #[test]
    fn typeless_nodes_are_not_strict() {
        let (pointer, reason) = not_strict_at(json!({"type": "object", "properties": {
            "a": {"description": "anything", "minLength": 2}}, "required": ["a"]}));
        assert_eq!(pointer, "/properties/a");
        assert!(reason.contains("without type"), "{reason}");
        // A node kept typed by `enum` or `$ref` is fine.
        let ok = json!({"type": "object", "properties": {
            "e": {"enum": ["x", "y"]}, "r": {"$ref": "#/$defs/S"}},
            "required": ["e", "r"], "$defs": {"S": {"type": "string"}}});
        assert!(lower_openai_strict(&ok).is_ok());
        assert!(lower_anthropic_strict(&ok).is_ok());
    }

    #[test]
    fn arrays_without_items_are_not_strict() {
        let (pointer, reason) = not_strict_at(json!({"type": "object", "properties": {
            "t": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}},
            "required": ["t"]}));
        assert_eq!(pointer, "/properties/t");
        assert!(reason.contains("without items"), "{reason}");
        let (pointer, _) = not_strict_at(json!({"type": "object", "properties": {
            "t": {"type": ["array", "null"]}}, "required": ["t"]}));
        assert_eq!(pointer, "/properties/t");
    }

    #[test]
    fn objects_with_unions_are_not_strict() {
        let (pointer, reason) = not_strict_at(json!({"type": "object", "properties": {
            "f": {"type": "object", "properties": {"common": {"type": "string"}},
                "required": ["common"],
                "oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                    {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]}
                ]}},
            "required": ["f"]}));
        assert_eq!(pointer, "/properties/f");
        assert!(reason.contains("anyOf/oneOf"), "{reason}");
        let (pointer, _) = not_strict_at(
            json!({"type": "object", "properties": {"x": {"type": "string"}},
            "anyOf": [{"type": "object", "properties": {"x": {"type": "string", "minLength": 1}},
                "required": ["x"]}]}),
        );
        assert_eq!(pointer, "");
    }

    #[test]
    fn ref_with_siblings_is_wrapped() {
        let canonical = json!({"type": "object", "properties": {
            "n": {"$ref": "#/$defs/N", "description": "inner"}},
            "required": ["n"],
            "$defs": {"N": {"type": "object", "properties": {}}}});
        let lowered = lower_openai_strict(&canonical).unwrap();
        assert_eq!(
            lowered.schema["properties"]["n"],
            json!({"anyOf": [{"$ref": "#/$defs/N"}], "description": "inner"})
        );
    }
}
