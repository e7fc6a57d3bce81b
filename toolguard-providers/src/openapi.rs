//! Lowering to the OpenAPI 3.0 schema subset of Gemini's `parameters` field.
//!
//! `$ref`s are inlined (a recursive schema is refused), type unions with `null` become
//! `nullable: true`, every schema has a single `type`, `additionalProperties`, `$schema` and `$id`
//! are dropped, `const` becomes a one-value `enum`, and property names must match
//! `[a-zA-Z_][a-zA-Z0-9_]{0,63}`.
//!
//! Gemini rejects some schemas the subset can spell; they are refused with
//! [`LowerError::Unsupported`] and a reason: a schema without a `type` (one that accepts any
//! value, or only `null`), an object without properties below the root (a map, or an empty
//! object), and an array without one `items` schema (a tuple, or an array of anything). A root
//! without properties is a tool without arguments: its lowered schema has no `properties` and
//! [`function_declaration`](super::gemini::function_declaration) omits `parameters`; a root that
//! is a map (`additionalProperties` or `patternProperties` without `properties`) is refused.

use serde_json::{Map, Value, json};

use super::portable::portable;
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
    let portable = portable(canonical, FORMATS, limits)?;
    let canonical = &portable.schema;
    let mut walk = OpenApi {
        root: canonical,
        budget: Budget::new(limits),
        lossy: Vec::new(),
        active: vec![],
    };
    let mut schema = walk.lower(canonical, &Pointer::root(), 1)?;
    if let Value::Object(out) = &mut schema
        && out
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        let is_map = ["additionalProperties", "patternProperties"]
            .iter()
            .any(|k| canonical.get(*k).is_some_and(|v| v != &Value::Bool(false)));
        if is_map {
            return Err(unsupported(
                &Pointer::root(),
                "an object without properties (a map) has no form in Gemini's OpenAPI subset",
            ));
        }
        out.remove("properties");
        out.remove("required");
    } else {
        walk.check(&schema, &Pointer::root())?;
    }
    // A definition inlined at several places is recorded once.
    let mut lossy: Vec<LossyStep> = portable.lossy;
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

    /// [`Self::lower`], refusing a result Gemini would reject.
    fn node(&mut self, schema: &'a Value, at: &Pointer, depth: usize) -> Result<Value, LowerError> {
        let lowered = self.lower(schema, at, depth)?;
        self.check(&lowered, at)?;
        Ok(lowered)
    }

    /// Refuses a lowered node Gemini rejects: no `type` (and no `anyOf`), an object without
    /// properties, an array without `items`.
    fn check(&self, lowered: &Value, at: &Pointer) -> Result<(), LowerError> {
        let Some(map) = lowered.as_object() else {
            return Ok(());
        };
        if !map.contains_key("type") && !map.contains_key("anyOf") {
            return Err(unsupported(
                at,
                "a schema without a type (one that accepts any value, or only null) has no form \
                 in Gemini's OpenAPI subset",
            ));
        }
        match map.get("type").and_then(Value::as_str) {
            Some("object")
                if map
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty) =>
            {
                Err(unsupported(
                    at,
                    "an object without properties (a map, or an empty object) has no form in \
                     Gemini's OpenAPI subset",
                ))
            }
            Some("array") if !map.contains_key("items") => Err(unsupported(
                at,
                "an array without one items schema (a tuple, or an array of any values) has no \
                 form in Gemini's OpenAPI subset",
            )),
            _ => Ok(()),
        }
    }

    /// Lowers one schema node (unchecked: a `$ref` target or an `anyOf` branch is checked
    /// where it ends up).
    fn lower(
        &mut self,
        schema: &'a Value,
        at: &Pointer,
        depth: usize,
    ) -> Result<Value, LowerError> {
        self.budget.visit(depth)?;
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(true) => {
                self.record(at, "boolean schema true lowered to an unconstrained schema");
                return Ok(json!({}));
            }
            _ => {
                return Err(unsupported(
                    at,
                    "a schema that accepts nothing (or is not a schema)",
                ));
            }
        };
        if map.contains_key("anyOf") && map.contains_key("oneOf") {
            return Err(unsupported(at, "anyOf together with oneOf"));
        }
        let mut draft = Draft::default();
        if let Some(reference) = map.get("$ref") {
            draft.out = self.inline_ref(reference, at, depth)?;
        }
        for (key, value) in map {
            self.keyword(map, key, value, &at.child(key), depth, &mut draft)?;
        }
        let Draft {
            mut out,
            moved,
            nullable,
        } = draft;
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

    /// The lowered target of a `$ref`, the start of the node that holds it; a `$ref` already
    /// being inlined (recursion) or one that does not resolve is refused.
    fn inline_ref(
        &mut self,
        reference: &Value,
        at: &Pointer,
        depth: usize,
    ) -> Result<Map<String, Value>, LowerError> {
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
        let inlined = self.lower(target, &target_at, depth + 1);
        self.active.pop();
        match inlined? {
            Value::Object(inner) => Ok(inner),
            _ => Ok(Map::new()),
        }
    }

    /// Lowers one keyword of the node `map` into `draft`: kept, lowered, dropped or moved into
    /// the description.
    fn keyword(
        &mut self,
        map: &'a Map<String, Value>,
        key: &str,
        value: &'a Value,
        here: &Pointer,
        depth: usize,
        draft: &mut Draft,
    ) -> Result<(), LowerError> {
        match key {
            "required" if !map.contains_key("properties") => {
                self.move_out(draft, here, "required moved to description", key, value);
            }
            "$ref" | "$defs" | "definitions" | "required" => {}
            "type" => self.lower_type(value, here, draft)?,
            "properties" => self.properties(map, value, here, depth, &mut draft.out)?,
            "items" if value.is_array() => {
                self.move_out(draft, here, "tuple items moved to description", key, value);
            }
            "items" => {
                let lowered = self.node(value, here, depth + 1)?;
                draft.out.insert(key.to_owned(), lowered);
            }
            "anyOf" | "oneOf" => self.branches(key, value, here, depth, draft)?,
            "const" => self.lower_const(value, here, draft),
            "enum" => self.lower_enum(map, value, here, draft)?,
            "format" if value.as_str().is_some_and(|f| FORMATS.contains(&f)) => {
                draft.out.insert(key.to_owned(), value.clone());
            }
            "format" => self.move_out(draft, here, "format moved to description", key, value),
            k if KEEP.contains(&k) => {
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

    /// `type`: `null` becomes `nullable`, a union of one type that type, a union of several an
    /// `anyOf` of one branch a type.
    fn lower_type(
        &mut self,
        value: &Value,
        here: &Pointer,
        draft: &mut Draft,
    ) -> Result<(), LowerError> {
        let types = match value {
            Value::String(t) if t == "null" => {
                draft.nullable = true;
                self.record(here, "type null lowered to nullable");
                return Ok(());
            }
            Value::String(t) => {
                draft.out.insert("type".to_owned(), json!(t));
                return Ok(());
            }
            Value::Array(types) => types,
            _ => return Err(unsupported(here, "type is not a string or an array")),
        };
        let mut kept: Vec<&Value> = Vec::new();
        for t in types {
            if t == "null" {
                draft.nullable = true;
            } else {
                kept.push(t);
            }
        }
        match kept.as_slice() {
            [] => {}
            [one] => {
                draft.out.insert("type".to_owned(), (*one).clone());
            }
            many => {
                self.record(here, "type union lowered to anyOf");
                let branches: Vec<Value> = many.iter().map(|t| json!({ "type": t })).collect();
                draft.out.insert("anyOf".to_owned(), Value::Array(branches));
            }
        }
        Ok(())
    }

    /// `properties`, each name checked against Gemini's key rule and each schema lowered and
    /// checked; `required` keeps the names among them.
    fn properties(
        &mut self,
        map: &Map<String, Value>,
        value: &'a Value,
        here: &Pointer,
        depth: usize,
        out: &mut Map<String, Value>,
    ) -> Result<(), LowerError> {
        let props = value
            .as_object()
            .ok_or_else(|| unsupported(here, "not a map"))?;
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
        let required = required_among(map, &lowered);
        out.insert("properties".to_owned(), Value::Object(lowered));
        if !required.is_empty() {
            out.insert("required".to_owned(), Value::Array(required));
        }
        Ok(())
    }

    /// `anyOf` or `oneOf` (recorded as lowered to `anyOf`): a branch that only allows `null`
    /// makes the node nullable, every other branch is lowered, checked and added to `anyOf`.
    fn branches(
        &mut self,
        key: &str,
        value: &'a Value,
        here: &Pointer,
        depth: usize,
        draft: &mut Draft,
    ) -> Result<(), LowerError> {
        let branches = value
            .as_array()
            .ok_or_else(|| unsupported(here, "not an array"))?;
        if key == "oneOf" {
            self.record(here, "oneOf lowered to anyOf");
        }
        let mut lowered = Vec::new();
        for (i, sub) in branches.iter().enumerate() {
            let branch_at = here.child(&i.to_string());
            let branch = self.lower(sub, &branch_at, depth + 2)?;
            if branch == json!({"nullable": true}) {
                draft.nullable = true;
            } else {
                self.check(&branch, &branch_at)?;
                lowered.push(branch);
            }
        }
        if let Some(Value::Array(existing)) = draft.out.get_mut("anyOf") {
            existing.extend(lowered);
        } else {
            draft.out.insert("anyOf".to_owned(), Value::Array(lowered));
        }
        Ok(())
    }

    /// `const`: a string becomes a one-value string `enum`, `null` makes the node nullable,
    /// anything else moves into the description.
    fn lower_const(&mut self, value: &Value, here: &Pointer, draft: &mut Draft) {
        if value.is_string() {
            draft.out.insert("enum".to_owned(), json!([value]));
            draft
                .out
                .entry("type".to_owned())
                .or_insert_with(|| json!("string"));
        } else if value.is_null() {
            draft.nullable = true;
            self.record(here, "const null lowered to nullable");
        } else {
            self.move_out(
                draft,
                here,
                "non-string const moved to description",
                "const",
                value,
            );
        }
    }

    /// `enum`: a `null` value makes the node nullable; string values stay a string `enum`,
    /// any other value moves the whole `enum` into the description.
    fn lower_enum(
        &mut self,
        map: &Map<String, Value>,
        value: &Value,
        here: &Pointer,
        draft: &mut Draft,
    ) -> Result<(), LowerError> {
        let values = value
            .as_array()
            .ok_or_else(|| unsupported(here, "not an array"))?;
        if values.iter().any(Value::is_null) {
            draft.nullable = true;
        }
        let strings: Vec<&Value> = values.iter().filter(|v| !v.is_null()).collect();
        if strings.iter().all(|v| v.is_string()) {
            draft.out.insert("enum".to_owned(), json!(strings));
            if !map.contains_key("type") {
                draft.out.insert("type".to_owned(), json!("string"));
            }
        } else {
            self.move_out(
                draft,
                here,
                "non-string enum moved to description",
                "enum",
                value,
            );
        }
        Ok(())
    }
}

/// A node being lowered: the keywords it keeps, those moved into its description, and whether
/// it accepts `null`.
#[derive(Default)]
struct Draft {
    out: Map<String, Value>,
    moved: Vec<(String, Value)>,
    nullable: bool,
}

/// The names of the node's `required` that are among its lowered properties.
fn required_among(map: &Map<String, Value>, lowered: &Map<String, Value>) -> Vec<Value> {
    map.get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter(|n| n.as_str().is_some_and(|n| lowered.contains_key(n)))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
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

    fn refusal(canonical: Value) -> (String, String) {
        match lower_gemini_openapi(&canonical) {
            Err(LowerError::Unsupported { pointer, reason }) => (pointer, reason),
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }

    #[test]
    fn refuses_what_gemini_rejects() {
        // A map below the root.
        let (pointer, reason) = refusal(json!({"type": "object", "properties": {
            "m": {"type": "object", "additionalProperties": {"type": "string"}}}}));
        assert_eq!(pointer, "/properties/m");
        assert!(reason.contains("without properties"), "{reason}");
        // A typeless node, directly and as a `true` schema.
        let (pointer, reason) = refusal(json!({"type": "object", "properties": {
            "any": {"description": "anything"}}}));
        assert_eq!(pointer, "/properties/any");
        assert!(reason.contains("without a type"), "{reason}");
        let (pointer, _) = refusal(json!({"type": "object", "properties": {"t": true}}));
        assert_eq!(pointer, "/properties/t");
        // A tuple, written both ways, and an array of anything.
        for tuple in [
            json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}),
            json!({"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}),
            json!({"type": "array"}),
        ] {
            let (pointer, reason) = refusal(json!({"type": "object", "properties": {"p": tuple}}));
            assert_eq!(pointer, "/properties/p");
            assert!(reason.contains("without one items"), "{reason}");
        }
        // A map at the root.
        let (pointer, _) =
            refusal(json!({"type": "object", "additionalProperties": {"type": "integer"}}));
        assert_eq!(pointer, "");
        // An anyOf branch is checked too.
        let (pointer, _) = refusal(json!({"type": "object", "properties": {
            "u": {"anyOf": [{"type": "string"}, {"type": "object"}]}}}));
        assert_eq!(pointer, "/properties/u/anyOf/1");
    }

    #[test]
    fn root_without_properties_has_no_properties() {
        for root in [
            json!({"type": "object"}),
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        ] {
            let lowered = lower_gemini_openapi(&root).unwrap();
            assert_eq!(lowered.schema, json!({"type": "object"}));
        }
        // A string enum without a type gets one; a nullable union keeps working.
        let lowered = lower_gemini_openapi(&json!({"type": "object", "properties": {
            "e": {"enum": ["a", "b"]}, "n": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}))
        .unwrap();
        assert_eq!(
            lowered.schema["properties"],
            json!({"e": {"enum": ["a", "b"], "type": "string"},
                "n": {"type": "string", "nullable": true}})
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
