//! Rules over a tool's JSON Schema (feature `json`): an input schema read into the declaration
//! model ([`fields`]), and what the macro checks on parameters, checked again on every property
//! of an input schema at any depth ([`check`]), for tools whose schema comes from elsewhere
//! (nested structs, serde renames, run-time declarations).

use serde_json::Value;

use crate::decl::{Collection, FieldDecl, Scalar, Syntax, identity_message, pattern_message};
use crate::kinds::Kind;
use crate::names::is_identity_name;

/// The fields of an input schema (an object's `properties`), as the declaration model reads
/// them: each property's JSON type ([`Scalar`]; through `["string", "null"]` and
/// `anyOf: [.., {"type": "null"}]`), arrays as [`Collection::Sequence`] with the item's type and
/// string or number constraints, objects of free keys (`additionalProperties` without
/// `properties`) as [`Collection::Map`], and `description` (of the property, or of its non-null
/// alternative), `minLength`, `maxLength`, `pattern`, `minimum`, `maximum`,
/// `maxItems`/`maxProperties`. Strings get [`Kind::Text`] and everything else (a string
/// confined to an `enum` or a `const` too) [`Kind::Opaque`];
/// what the schema cannot say (risk, kind, amount, root, sensitive) comes from the declaration.
/// A property listing several types is read as a float if `"number"` is among them (so money
/// never hides behind `["integer", "number"]`), else as a string if `"string"` is.
pub fn fields(schema: &Value) -> Vec<FieldDecl> {
    properties(schema)
        .map(|(name, sub)| field(name, sub))
        .collect()
}

/// The properties of an object schema, in the map's order.
pub fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

/// Where a property's constraints live, as JSON pointers relative to the property's schema:
/// `container` takes `maxItems` (`maxProperties` for a map), `element` the constraints of each
/// value (`minLength`, `maxLength`, `pattern`, `minimum`, `maximum`). For a plain string both are
/// `""`; for `{"type": "array", "items": ..}` the element is `/items`; through an `anyOf` with
/// `null` the pointers go into the non-null alternative (`/anyOf/0/items`). The element of an
/// array without `items` is `/items` all the same: it does not exist yet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layout {
    /// The collection the property is, if any.
    pub collection: Option<Collection>,
    /// Where `maxItems`/`maxProperties` go.
    pub container: String,
    /// Where each value's constraints go.
    pub element: String,
}

/// The [`Layout`] of a property's schema.
pub fn layout(property: &Value) -> Layout {
    let (sub, container) = non_null(property, String::new());
    let (collection, step) = match json_type(sub) {
        Some("array") => (Some(Collection::Sequence), "items"),
        Some("object")
            if sub.get("properties").is_none()
                && sub
                    .get("additionalProperties")
                    .is_some_and(Value::is_object) =>
        {
            (Some(Collection::Map), "additionalProperties")
        }
        _ => {
            return Layout {
                collection: None,
                element: container.clone(),
                container,
            };
        }
    };
    let element = match sub.get(step) {
        Some(inner) => non_null(inner, format!("{container}/{step}")).1,
        None => format!("{container}/{step}"),
    };
    Layout {
        collection,
        container,
        element,
    }
}

fn field(name: &str, raw: &Value) -> FieldDecl {
    let Layout {
        collection,
        container,
        element,
    } = layout(raw);
    let null = Value::Null;
    let sub = raw.pointer(&container).unwrap_or(&null);
    let element = raw.pointer(&element).unwrap_or(&null);
    let scalar = scalar(element);
    let kind = if scalar == Scalar::Text {
        Kind::Text
    } else {
        Kind::Opaque
    };
    let mut f = FieldDecl::new(name, kind, scalar);
    f.description = [raw, sub]
        .into_iter()
        .find_map(|s| s.get("description").and_then(Value::as_str))
        .map(str::to_owned);
    f.collection = collection;
    f.min_len = element.get("minLength").and_then(Value::as_u64);
    f.max_len = element.get("maxLength").and_then(Value::as_u64);
    f.pattern = element
        .get("pattern")
        .and_then(Value::as_str)
        .map(str::to_owned);
    f.min = element.get("minimum").and_then(Value::as_f64);
    f.max = element.get("maximum").and_then(Value::as_f64);
    f.max_items = match collection {
        Some(Collection::Sequence) => sub.get("maxItems").and_then(Value::as_u64),
        Some(Collection::Map) => sub.get("maxProperties").and_then(Value::as_u64),
        None => None,
    };
    f
}

/// What one value of `schema` holds. A string confined to listed values (`enum`, `const`) is
/// an enum ([`Scalar::Other`]), as a Rust enum's schema is: the model picks one of the values
/// the schema's author wrote, it cannot write text of its own there, so no length bound or text
/// rule applies to it.
fn scalar(schema: &Value) -> Scalar {
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let has = |t: &str| types.contains(&t);
    if has("number") {
        Scalar::Float
    } else if has("string") {
        if confined(schema) {
            Scalar::Other
        } else {
            Scalar::Text
        }
    } else if has("integer") {
        Scalar::Integer
    } else if has("boolean") {
        Scalar::Boolean
    } else {
        Scalar::Other
    }
}

/// Whether `schema` confines its value to values it lists (`enum`, `const`): the model picks
/// one of them, it cannot write a value of its own there.
pub fn confined(schema: &Value) -> bool {
    schema.get("enum").is_some() || schema.get("const").is_some()
}

/// The JSON type of `schema`, with `"null"` left out of a list of types.
fn json_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

/// `schema` without an `anyOf`/`oneOf` alternative of `null` (how an `Option` of a referenced
/// type is written): the one other alternative, with its pointer below `at`.
fn non_null(schema: &Value, at: String) -> (&Value, String) {
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let rest: Vec<(usize, &Value)> = alts
                .iter()
                .enumerate()
                .filter(|(_, a)| a.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [(i, only)] = rest.as_slice() {
                return (only, format!("{at}/{key}/{i}"));
            }
        }
    }
    (schema, at)
}

/// A broken rule found in a whole schema, at a place the declaration model has no field for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SchemaViolation {
    /// The rule's number in `RULES.md` (0 for the consistency checks).
    pub rule: u8,
    /// Where: the dotted path of a property (`order.lines.user_id`, `$defs.Meta.roles`) or the
    /// JSON pointer of a keyword (`/properties/code/pattern`); empty for the schema as a whole.
    pub at: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// The rules over a whole input schema that [`fields`] and [`crate::decl::check`] do not see: it
/// is an object schema, no property at any depth is named like identity or authority (rule 4,
/// with the message of a parameter), and every `pattern` at any depth is portable (rule 17).
/// Fixes are spelt in `syntax`. A schema that is not an object schema gets that one violation.
pub fn check(schema: &Value, syntax: Syntax) -> Vec<SchemaViolation> {
    check_except(schema, syntax, &[])
}

/// [`check`], with the identity-name rule passing over the top-level properties in
/// `not_identity` (fields declared `identity = false`: a field of someone else's server that
/// is named like identity but holds what its declared kind says). Properties nested in them are
/// still checked.
pub fn check_except(schema: &Value, syntax: Syntax, not_identity: &[&str]) -> Vec<SchemaViolation> {
    let typed_object = schema.get("type").and_then(Value::as_str) == Some("object");
    if !schema.is_object() || !(typed_object || schema.get("properties").is_some()) {
        return vec![SchemaViolation {
            rule: 0,
            at: String::new(),
            message: "the input schema must be a JSON Schema object with `\"type\": \"object\"`: \
                      a tool's arguments are an object of named fields"
                .to_owned(),
        }];
    }
    let mut out = Vec::new();
    if let Some(path) = identity_property_except(schema, not_identity) {
        out.push(SchemaViolation {
            rule: 4,
            message: identity_message(&path, syntax),
            at: path,
        });
    }
    for (at, problem) in unportable_patterns(schema) {
        out.push(SchemaViolation {
            rule: 17,
            message: pattern_message(&at, &problem),
            at,
        });
    }
    out
}

/// The dotted path of the first property below `schema` named like identity or authority
/// (rule 4, [`is_identity_name`]): in nested objects, array items and `$defs`/`definitions`
/// (`customer.tenant_id`, `$defs.Meta.user`).
pub fn identity_property(schema: &Value) -> Option<String> {
    identity_below(schema, "", &[])
}

/// [`identity_property`], passing over the names in `not_identity` among the top-level
/// properties (but not what is nested in them).
pub fn identity_property_except(schema: &Value, not_identity: &[&str]) -> Option<String> {
    identity_below(schema, "", not_identity)
}

fn identity_below(schema: &Value, path: &str, exempt: &[&str]) -> Option<String> {
    let join = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    match schema {
        Value::Object(map) => map
            .iter()
            .find_map(|(key, value)| match (key.as_str(), value) {
                ("properties", Value::Object(props)) => props.iter().find_map(|(name, sub)| {
                    let declared = path.is_empty() && exempt.contains(&name.as_str());
                    if is_identity_name(name) && !declared {
                        Some(join(name))
                    } else {
                        identity_below(sub, &join(name), &[])
                    }
                }),
                ("$defs" | "definitions", Value::Object(defs)) => defs
                    .iter()
                    .find_map(|(name, sub)| identity_below(sub, &format!("$defs.{name}"), &[])),
                (_, sub) => identity_below(sub, path, exempt),
            }),
        Value::Array(items) => items.iter().find_map(|v| identity_below(v, path, exempt)),
        _ => None,
    }
}

/// Each `pattern` in `schema` (at any depth) that does not mean the same in Rust's `regex` and in
/// ECMA-262, with its JSON pointer-like location and the problem
/// (see [`crate::pattern::check`]).
pub fn unportable_patterns(schema: &Value) -> Vec<(String, crate::pattern::PatternProblem)> {
    let mut out = Vec::new();
    patterns_below(schema, String::new(), &mut out);
    out
}

fn patterns_below(
    schema: &Value,
    at: String,
    out: &mut Vec<(String, crate::pattern::PatternProblem)>,
) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                let here = format!("{at}/{key}");
                match (key.as_str(), value) {
                    ("pattern", Value::String(p)) => {
                        if let Err(problem) = crate::pattern::check(p) {
                            out.push((here, problem));
                        }
                    }
                    // Property names are data here, never keywords.
                    ("properties" | "$defs" | "definitions", Value::Object(props)) => {
                        for (name, sub) in props {
                            patterns_below(sub, format!("{here}/{name}"), out);
                        }
                    }
                    (_, sub) => patterns_below(sub, here, out),
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                patterns_below(v, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn identity_properties_are_found_at_any_depth() {
        assert_eq!(
            identity_property(&json!({"properties": {"note": {"type": "string"}}})),
            None
        );
        assert_eq!(
            identity_property(&json!({"properties": {"TenantId": {"type": "string"}}})),
            Some("TenantId".to_owned())
        );
        let nested = json!({
            "properties": {"order": {"properties": {"lines": {"items": {
                "properties": {"user_id": {"type": "string"}}}}}}}
        });
        assert_eq!(
            identity_property(&nested),
            Some("order.lines.user_id".to_owned())
        );
        let defs = json!({"$defs": {"Meta": {"properties": {"roles": {}}}}});
        assert_eq!(
            identity_property(&defs),
            Some("$defs.Meta.roles".to_owned())
        );
        // A property *named* `properties` is data, and so are keywords' own values.
        assert_eq!(
            identity_property(&json!({"properties": {"pattern": {"const": "user"}}})),
            None
        );
    }

    #[test]
    fn fields_are_read_from_an_input_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "memo": {"type": ["string", "null"], "maxLength": 140, "description": "Memo."},
                "amount": {"type": "integer", "minimum": 1},
                "rate": {"anyOf": [{"type": "number"}, {"type": "null"}]},
                "to": {"type": "array", "maxItems": 5, "items": {"type": "string", "pattern": "^[a-z]+$"}},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "speed": {"$ref": "#/$defs/Speed"},
                "currency": {"type": "string", "enum": ["USD", "EUR"]},
                "unit": {"anyOf": [{"type": "string", "const": "cm"}, {"type": "null"}]},
                "idempotency_key": {"type": "string"}
            }
        });
        let found = fields(&schema);
        let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        // serde_json's map keeps keys sorted unless `preserve_order` is on: compare as a set.
        let mut sorted = names.clone();
        sorted.sort_unstable();
        // `idempotency_key` is a property like any other: a run-time declaration's key argument
        // must not collide with it.
        assert_eq!(
            sorted,
            [
                "amount",
                "currency",
                "headers",
                "idempotency_key",
                "memo",
                "rate",
                "speed",
                "to",
                "unit"
            ]
        );
        let get = |n: &str| found.iter().find(|f| f.name == n).expect(n);
        assert_eq!(
            (
                get("memo").scalar,
                get("memo").max_len,
                get("memo").description.as_deref()
            ),
            (Scalar::Text, Some(140), Some("Memo."))
        );
        assert_eq!(
            (get("amount").scalar, get("amount").min),
            (Scalar::Integer, Some(1.0))
        );
        assert_eq!(get("rate").scalar, Scalar::Float);
        let to = get("to");
        assert_eq!(
            (
                to.collection,
                to.max_items,
                to.scalar,
                to.pattern.as_deref()
            ),
            (
                Some(Collection::Sequence),
                Some(5),
                Scalar::Text,
                Some("^[a-z]+$")
            )
        );
        assert_eq!(
            (get("headers").collection, get("headers").max_items),
            (Some(Collection::Map), None)
        );
        assert_eq!(
            (get("speed").scalar, get("speed").kind),
            (Scalar::Other, Kind::Opaque)
        );
        // Strings confined to listed values are enums: no text of the model's own fits there.
        for confined in ["currency", "unit"] {
            assert_eq!(
                (get(confined).scalar, get(confined).kind),
                (Scalar::Other, Kind::Opaque),
                "{confined}"
            );
        }
        assert!(fields(&json!({"type": "string"})).is_empty());
    }

    #[test]
    fn unportable_patterns_are_located() {
        let schema = json!({
            "properties": {
                "ok": {"type": "string", "pattern": "^[a-z]+$"},
                "pattern": {"type": "string", "pattern": "(?i)^yes$"},
                "tags": {"items": {"pattern": "^\\d+$"}}
            }
        });
        let found = unportable_patterns(&schema);
        let at: Vec<&str> = found.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(
            at,
            [
                "/properties/pattern/pattern",
                "/properties/tags/items/pattern"
            ]
        );
    }

    #[test]
    fn layouts_point_at_the_collection_and_its_elements() {
        let at = |v: Value| {
            let l = layout(&v);
            (l.collection, l.container, l.element)
        };
        assert_eq!(
            at(json!({"type": "string"})),
            (None, String::new(), String::new())
        );
        assert_eq!(
            at(json!({"type": ["array", "null"], "items": {"type": "string"}})),
            (
                Some(Collection::Sequence),
                String::new(),
                "/items".to_owned()
            )
        );
        assert_eq!(
            at(
                json!({"anyOf": [{"type": "null"}, {"type": "array", "items": {
                "anyOf": [{"type": "string"}, {"type": "null"}]}}]})
            ),
            (
                Some(Collection::Sequence),
                "/anyOf/1".to_owned(),
                "/anyOf/1/items/anyOf/0".to_owned()
            )
        );
        assert_eq!(
            at(json!({"type": "object", "additionalProperties": {"type": "string"}})),
            (
                Some(Collection::Map),
                String::new(),
                "/additionalProperties".to_owned()
            )
        );
        assert_eq!(
            at(json!({"type": "array"})),
            (
                Some(Collection::Sequence),
                String::new(),
                "/items".to_owned()
            )
        );
    }

    #[test]
    fn wrapped_descriptions_and_mixed_types_are_read_failing_closed() {
        let schema = json!({"properties": {
            "note": {"description": "A note.", "anyOf": [{"type": "string"}, {"type": "null"}]},
            "price": {"type": ["integer", "number"]},
            "ids": {"type": "array", "items": {"type": "string", "maxLength": 9}, "maxItems": 3}
        }});
        let found = fields(&schema);
        let get = |n: &str| found.iter().find(|f| f.name == n).expect(n);
        assert_eq!(get("note").description.as_deref(), Some("A note."));
        assert_eq!(get("note").scalar, Scalar::Text);
        assert_eq!(get("price").scalar, Scalar::Float);
        assert_eq!(
            (get("ids").max_len, get("ids").max_items),
            (Some(9), Some(3))
        );
    }

    #[test]
    fn whole_schema_rules_name_the_place() {
        let not_object = check(&json!({"type": "string"}), Syntax::Keys);
        assert_eq!(not_object.len(), 1);
        assert!(not_object[0].message.contains("`\"type\": \"object\"`"));
        let schema = json!({"type": "object", "properties": {"order": {"properties": {
            "tenant_id": {"type": "string"},
            "code": {"type": "string", "pattern": "(?i)^x$"}
        }}}});
        let found = check(&schema, Syntax::Keys);
        let summary: Vec<(u8, &str)> = found.iter().map(|v| (v.rule, v.at.as_str())).collect();
        assert_eq!(
            summary,
            [
                (4, "order.tenant_id"),
                (17, "/properties/order/properties/code/pattern")
            ]
        );
        assert!(
            found[0]
                .message
                .starts_with("parameter `order.tenant_id` looks like identity or authority")
        );
        assert_eq!(check(&json!({"type": "object"}), Syntax::Keys), []);
    }
}

/// Where a value of `schema` (an output schema) can carry free-form text, as a path into the
/// value (`/notes`, `/items/*/body`, `/*` for a map's keys or values, `` (empty) for the value
/// itself); `None` when nothing reachable in it can. Read through nested objects
/// (`properties`, `additionalProperties`, `patternProperties`), arrays (`items`,
/// `prefixItems`), `Option` and enums with data (`anyOf`, `oneOf`, `allOf`) and local
/// references (`$ref` to `#/$defs/..` or `#/definitions/..`, each followed once).
///
/// Free-form text is a string that neither `enum`, `const`, `pattern` nor a `format` of
/// machine values (`date-time`, `date`, `time`, `duration`, `uuid`, `ipv4`, `ipv6`) confines
/// (a `maxLength` does not: 140 characters carry an instruction), the keys of a map, and a
/// schema that allows any value (`true`, `{}`, a JSON value). Rule 20 reads a read-only
/// tool's output by this, not by its type's name.
pub fn free_text(schema: &Value) -> Option<String> {
    let mut seen = Vec::new();
    free_text_at(schema, schema, String::new(), &mut seen)
}

/// Formats whose strings are machine values, not prose.
const MACHINE_FORMATS: [&str; 7] = [
    "date-time",
    "date",
    "time",
    "duration",
    "uuid",
    "ipv4",
    "ipv6",
];

fn free_text_at<'a>(
    root: &'a Value,
    schema: &'a Value,
    at: String,
    seen: &mut Vec<&'a str>,
) -> Option<String> {
    let object = match schema {
        Value::Bool(true) => return Some(at),
        Value::Object(object) => object,
        _ => return None,
    };
    if let Some(found) = free_text_through_ref(root, object, &at, seen) {
        return Some(found);
    }
    for combinator in ["anyOf", "oneOf", "allOf"] {
        for alternative in object
            .get(combinator)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(found) = free_text_at(root, alternative, at.clone(), seen) {
                return Some(found);
            }
        }
    }
    if confined(schema) {
        return None;
    }
    if holds_free_text_itself(object) {
        return Some(at);
    }
    free_text_in_members(root, schema, object, &at, seen)
}

/// The free text behind `object`'s `$ref` (a reference that cannot be followed here may point
/// at anything; a reference already being followed adds nothing).
fn free_text_through_ref<'a>(
    root: &'a Value,
    object: &'a serde_json::Map<String, Value>,
    at: &str,
    seen: &mut Vec<&'a str>,
) -> Option<String> {
    let reference = object.get("$ref").and_then(Value::as_str)?;
    if seen.contains(&reference) {
        return None;
    }
    seen.push(reference);
    let target = reference
        .strip_prefix('#')
        .and_then(|pointer| root.pointer(pointer));
    let found = match target {
        Some(target) => free_text_at(root, target, at.to_owned(), seen),
        None => Some(at.to_owned()),
    };
    seen.pop();
    found
}

/// Whether the value at `object` can itself be free text: a string no pattern or machine format
/// confines, or a schema with neither a type nor any structure (any value, strings included).
fn holds_free_text_itself(object: &serde_json::Map<String, Value>) -> bool {
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let confined = object.contains_key("pattern")
        || object
            .get("format")
            .and_then(Value::as_str)
            .is_some_and(|f| MACHINE_FORMATS.contains(&f));
    let structural = [
        "$ref",
        "anyOf",
        "oneOf",
        "allOf",
        "properties",
        "items",
        "prefixItems",
        "additionalProperties",
        "patternProperties",
    ];
    if types.is_empty() && !confined && !structural.iter().any(|k| object.contains_key(*k)) {
        return true;
    }
    types.contains(&"string") && !confined
}

/// The first free text among the members of an object or array schema: properties, pattern
/// properties, a map's keys and values, tuple items and items.
fn free_text_in_members<'a>(
    root: &'a Value,
    schema: &'a Value,
    object: &'a serde_json::Map<String, Value>,
    at: &str,
    seen: &mut Vec<&'a str>,
) -> Option<String> {
    for (name, property) in properties(schema) {
        let path = format!("{at}/{}", name.replace('~', "~0").replace('/', "~1"));
        if let Some(found) = free_text_at(root, property, path, seen) {
            return Some(found);
        }
    }
    for (_, property) in object
        .get("patternProperties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(found) = free_text_at(root, property, format!("{at}/*"), seen) {
            return Some(found);
        }
    }
    // A map: its keys are text the data chose, unless `propertyNames` confines them.
    if let Some(values @ (Value::Object(_) | Value::Bool(true))) =
        object.get("additionalProperties")
    {
        let names = object.get("propertyNames");
        let keys_confined =
            names.is_some_and(|n| free_text_at(root, n, String::new(), seen).is_none());
        if !keys_confined {
            return Some(format!("{at}/*"));
        }
        if let Some(found) = free_text_at(root, values, format!("{at}/*"), seen) {
            return Some(found);
        }
    }
    for (i, item) in object
        .get("prefixItems")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        if let Some(found) = free_text_at(root, item, format!("{at}/{i}"), seen) {
            return Some(found);
        }
    }
    let items = object.get("items")?;
    free_text_at(root, items, format!("{at}/*"), seen)
}

#[cfg(test)]
mod free_text_tests {
    use super::free_text;
    use serde_json::json;

    #[test]
    fn free_text_is_found_wherever_the_output_can_hold_it() {
        let nested = json!({
            "type": "object",
            "properties": {
                "count": {"type": "integer"},
                "messages": {"type": "array", "items": {"$ref": "#/$defs/Message"}},
            },
            "$defs": {"Message": {"type": "object", "properties": {
                "id": {"type": "string", "format": "uuid"},
                "body": {"type": ["string", "null"]},
            }}},
        });
        assert_eq!(free_text(&nested).as_deref(), Some("/messages/*/body"));
        let option = json!({"anyOf": [{"type": "null"}, {"type": "object", "properties": {"note": {"type": "string", "maxLength": 140}}}]});
        assert_eq!(free_text(&option).as_deref(), Some("/note"));
        let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        assert_eq!(free_text(&map).as_deref(), Some("/*"));
        let enum_with_data = json!({"oneOf": [
            {"type": "string", "enum": ["none"]},
            {"type": "object", "properties": {"text": {"type": "object", "properties": {"0": {"type": "string"}}}}},
        ]});
        assert_eq!(free_text(&enum_with_data).as_deref(), Some("/text/0"));
        assert_eq!(free_text(&json!(true)).as_deref(), Some(""));
        assert_eq!(free_text(&json!({})).as_deref(), Some(""));
        assert_eq!(free_text(&json!({"type": "string"})).as_deref(), Some(""));
    }

    #[test]
    fn confined_values_are_not_free_text() {
        let balance = json!({
            "type": "object",
            "properties": {
                "cents": {"type": "integer"},
                "currency": {"type": "string", "enum": ["USD", "EUR"]},
                "at": {"type": "string", "format": "date-time"},
                "account": {"type": "string", "pattern": "^[a-z0-9-]+$"},
                "flags": {"type": "array", "items": {"type": "boolean"}},
                "next": {"$ref": "#"},
            },
        });
        assert_eq!(free_text(&balance), None);
        let keyed = json!({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}, "additionalProperties": {"type": "number"}});
        assert_eq!(free_text(&keyed), None);
    }
}
