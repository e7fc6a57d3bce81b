//! Rules over a tool's JSON Schema (feature `json`): what the macro checks on parameters, checked
//! again on every property of an input schema at any depth, for tools whose schema comes from
//! elsewhere (nested structs, serde renames, run-time declarations).

use serde_json::Value;

use crate::names::is_identity_name;

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
