//! Rules over a tool's JSON Schema (feature `json`): what the macro checks on parameters, checked
//! again on every property of an input schema at any depth, for tools whose schema comes from
//! elsewhere (nested structs, serde renames, run-time declarations).

use serde_json::Value;

use crate::decl::{Collection, FieldDecl, KEY_FIELD, Scalar};
use crate::kinds::Kind;
use crate::names::is_identity_name;

/// The fields of an input schema (an object's `properties`), as the declaration model reads
/// them: each property's JSON type ([`Scalar`]; through `["string", "null"]` and
/// `anyOf: [.., {"type": "null"}]`), arrays as [`Collection::Sequence`] with the item's type and
/// string or number constraints, objects of free keys (`additionalProperties` without
/// `properties`) as [`Collection::Map`], and `description`, `minLength`, `maxLength`,
/// `pattern`, `minimum`, `maximum`, `maxItems`/`maxProperties`. Strings get [`Kind::Text`] and
/// everything else [`Kind::Opaque`]; what the schema cannot say (risk, kind, amount, root,
/// sensitive) comes from the declaration. The `idempotency_key` property is skipped: a
/// declaration says `idempotent` instead.
pub fn fields(schema: &Value) -> Vec<FieldDecl> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .filter(|(name, _)| name.as_str() != KEY_FIELD)
        .map(|(name, sub)| field(name, sub))
        .collect()
}

fn field(name: &str, sub: &Value) -> FieldDecl {
    let sub = non_null(sub);
    let (collection, element) = match json_type(sub) {
        Some("array") => (
            Some(Collection::Sequence),
            non_null(sub.get("items").unwrap_or(&Value::Null)),
        ),
        Some("object")
            if sub.get("properties").is_none()
                && sub
                    .get("additionalProperties")
                    .is_some_and(Value::is_object) =>
        {
            (
                Some(Collection::Map),
                non_null(&sub["additionalProperties"]),
            )
        }
        _ => (None, sub),
    };
    let scalar = match json_type(element) {
        Some("string") => Scalar::Text,
        Some("integer") => Scalar::Integer,
        Some("number") => Scalar::Float,
        Some("boolean") => Scalar::Boolean,
        _ => Scalar::Other,
    };
    let kind = if scalar == Scalar::Text {
        Kind::Text
    } else {
        Kind::Opaque
    };
    let mut f = FieldDecl::new(name, kind, scalar);
    f.description = sub
        .get("description")
        .and_then(Value::as_str)
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

/// The JSON type of `schema`, with `"null"` left out of a list of types.
fn json_type(schema: &Value) -> Option<&str> {
    match schema.get("type")? {
        Value::String(t) => Some(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

/// `schema` without an `anyOf`/`oneOf` alternative of `null` (how an `Option` of a referenced
/// type is written): the one other alternative.
fn non_null(schema: &Value) -> &Value {
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let rest: Vec<&Value> = alts
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [only] = rest.as_slice() {
                return only;
            }
        }
    }
    schema
}

/// The dotted path of the first property below `schema` named like identity or authority
/// (rule 4, [`is_identity_name`]): in nested objects, array items and `$defs`/`definitions`
/// (`customer.tenant_id`, `$defs.Meta.user`).
pub fn identity_property(schema: &Value) -> Option<String> {
    identity_below(schema, "")
}

fn identity_below(schema: &Value, path: &str) -> Option<String> {
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
                    if is_identity_name(name) {
                        Some(join(name))
                    } else {
                        identity_below(sub, &join(name))
                    }
                }),
                ("$defs" | "definitions", Value::Object(defs)) => defs
                    .iter()
                    .find_map(|(name, sub)| identity_below(sub, &format!("$defs.{name}"))),
                (_, sub) => identity_below(sub, path),
            }),
        Value::Array(items) => items.iter().find_map(|v| identity_below(v, path)),
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
                "idempotency_key": {"type": "string"}
            }
        });
        let found = fields(&schema);
        let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        // serde_json's map keeps keys sorted unless `preserve_order` is on: compare as a set.
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, ["amount", "headers", "memo", "rate", "speed", "to"]);
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
}
