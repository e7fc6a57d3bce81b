//! URLs inside nested values: which strings of an `opaque` field (a struct, map, vector of
//! structs or `serde_json::Value`) get the `url` checks instead of the `text` ones.
//!
//! A string is judged as a `url` when
//! - the tool's input schema declares its position a URL: `format: "uri"` (what
//!   [`toolguard::Url`](crate::kinds::Url) fields of nested structs carry) or
//!   `x-toolguard-kind: "url"`, reached through `properties`, `additionalProperties`, `items`,
//!   `prefixItems`, `$ref` to `$defs`/`definitions`, and the branches of
//!   `anyOf`/`oneOf`/`allOf` (`Option<Url>`); or
//! - the field is named in [`Sanitizer::check_nested_urls`](super::Sanitizer::check_nested_urls)
//!   and the string starts like an absolute or scheme-relative URL (`http:`, `https:`, `ftp:`,
//!   `//`, `\\`, in any case, after white space).
//!
//! Not checked as URLs: URLs inside longer text (they are `text`, and markup around them is
//! refused as `markup_link`), map keys (judged as text), positions the schema leaves open
//! (`serde_json::Value`, `additionalProperties: true`) unless the per-field option is set, and
//! numbers or booleans.

use serde_json::Value;

/// How many `$ref` hops are followed before giving up (cycles).
const MAX_REF_HOPS: usize = 16;

/// How many positions one reading of the schema visits at most. A schema whose branches each
/// lead to more branches (`anyOf` of `$ref`s, level after level) has exponentially many paths;
/// a reading that runs out answers the cautious way: not settled, not listed, not a URL, no
/// schema for the child (so the value is judged as text).
const MAX_VISITS: usize = 2048;

/// A fresh reading's visit budget.
fn visits() -> usize {
    MAX_VISITS
}

/// One reading's visit budget: whether another position may be visited.
fn visit(budget: &mut usize) -> bool {
    match budget.checked_sub(1) {
        Some(left) => {
            *budget = left;
            true
        }
        None => false,
    }
}

/// A position in the input schema, with the root the `$ref`s resolve against.
#[derive(Clone, Copy)]
pub struct SchemaAt<'a> {
    root: &'a Value,
    node: Option<&'a Value>,
}

impl std::fmt::Debug for SchemaAt<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaAt")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl<'a> SchemaAt<'a> {
    /// The sub-schema of top-level property `field` of `root`.
    pub fn field(root: &'a Value, field: &str) -> Self {
        let at = SchemaAt {
            root,
            node: Some(root),
        };
        at.property(field)
    }

    /// The node with `$ref`s followed.
    fn resolved(&self) -> Option<&'a Value> {
        let mut node = self.node?;
        for _ in 0..MAX_REF_HOPS {
            match node.get("$ref").and_then(Value::as_str) {
                Some(r) => node = self.root.pointer(r.strip_prefix('#')?)?,
                None => return Some(node),
            }
        }
        None
    }

    fn at(&self, node: Option<&'a Value>) -> Self {
        SchemaAt {
            root: self.root,
            node,
        }
    }

    /// The branches of `anyOf`, `oneOf` and `allOf`.
    fn branches(&self) -> impl Iterator<Item = SchemaAt<'a>> + '_ {
        let node = self.resolved();
        ["anyOf", "oneOf", "allOf"]
            .into_iter()
            .filter_map(move |k| node?.get(k)?.as_array())
            .flatten()
            .map(|b| self.at(Some(b)))
    }

    /// True when this position is declared a URL.
    pub fn is_url(&self) -> bool {
        self.is_url_depth(0, &mut visits())
    }

    fn is_url_depth(&self, depth: usize, budget: &mut usize) -> bool {
        if !visit(budget) {
            return false;
        }
        let Some(node) = self.resolved() else {
            return false;
        };
        let format = node.get("format").and_then(Value::as_str);
        let kind = node.get("x-toolguard-kind").and_then(Value::as_str);
        matches!(format, Some("uri"))
            || matches!(kind, Some("url"))
            || (depth < MAX_REF_HOPS && self.branches().any(|b| b.is_url_depth(depth + 1, budget)))
    }

    /// True when `s` is one of the constants the schema lists at this position (`enum`,
    /// `const`, in any branch): a value the tool's author wrote, which the schema check
    /// already confined, so the text checks pass over it.
    pub fn lists(&self, s: &str) -> bool {
        self.lists_depth(s, 0, &mut visits())
    }

    fn lists_depth(&self, s: &str, depth: usize, budget: &mut usize) -> bool {
        if !visit(budget) {
            return false;
        }
        let Some(node) = self.resolved() else {
            return false;
        };
        let is_s = |v: &Value| v.as_str() == Some(s);
        node.get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().any(is_s))
            || node.get("const").is_some_and(is_s)
            || (depth < MAX_REF_HOPS
                && self.branches().any(|b| b.lists_depth(s, depth + 1, budget)))
    }

    /// True when every value the schema accepts at this position is a number, a boolean, null,
    /// one of the schema's own scalar constants, or an array or object made of such values
    /// under keys the schema names: `type` limited to `integer`, `number`, `boolean` and
    /// `null`; an `enum` or `const` of scalars; `type` `array` with every item settled
    /// (`prefixItems` each, `items` the rest or `false`); `type` `object` with every property
    /// settled and no others admitted (`additionalProperties: false`, no `patternProperties`);
    /// `anyOf`/`oneOf` branches that are all settled; or one settled `allOf` branch (`$ref`s
    /// followed). The opaque walk judges none of these values, so a field settled here needs no
    /// walk once its value passed the schema check. Read from the schema alone, so it is
    /// decided once per tool.
    pub fn settled(&self) -> bool {
        self.settled_depth(0, &mut visits())
    }

    fn settled_depth(&self, depth: usize, budget: &mut usize) -> bool {
        if !visit(budget) {
            return false;
        }
        let Some(node) = self.resolved() else {
            return false;
        };
        let scalar = |v: &Value| !v.is_array() && !v.is_object();
        if node
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().all(scalar))
            || node.get("const").is_some_and(scalar)
        {
            return true;
        }
        let scalar_type =
            |t: &Value| matches!(t.as_str(), Some("integer" | "number" | "boolean" | "null"));
        let typed = match node.get("type") {
            Some(Value::Array(types)) => !types.is_empty() && types.iter().all(scalar_type),
            Some(t) => scalar_type(t),
            None => false,
        };
        if typed {
            return true;
        }
        if depth >= MAX_REF_HOPS {
            return false;
        }
        // An array (or null, or a scalar) whose every item is settled: a list of an enum's
        // members, of numbers. Every item must be: `prefixItems` each, and `items` the rest
        // (or `false`: nothing more); without `items` the rest would be open.
        let array = match node.get("type") {
            Some(Value::Array(types)) => {
                types.iter().any(|t| t == "array")
                    && types.iter().all(|t| t == "array" || scalar_type(t))
            }
            Some(t) => t == "array",
            None => false,
        };
        if array {
            let prefix = match node.get("prefixItems") {
                None => true,
                Some(Value::Array(items)) => items
                    .iter()
                    .all(|b| self.at(Some(b)).settled_depth(depth + 1, budget)),
                Some(_) => false,
            };
            let rest = match node.get("items") {
                Some(Value::Bool(false)) => true,
                Some(items @ Value::Object(_)) => {
                    self.at(Some(items)).settled_depth(depth + 1, budget)
                }
                _ => false,
            };
            if prefix && rest {
                return true;
            }
        }
        // An object that admits only the properties it names (`additionalProperties: false`,
        // no `patternProperties`), each settled: its keys are the schema's own words.
        if node.get("type").is_some_and(|t| t == "object")
            && node.get("additionalProperties") == Some(&Value::Bool(false))
            && node.get("patternProperties").is_none()
            && node
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|props| {
                    props
                        .values()
                        .all(|p| self.at(Some(p)).settled_depth(depth + 1, budget))
                })
        {
            return true;
        }
        let branches = |k: &str| {
            node.get(k)
                .and_then(Value::as_array)
                .filter(|b| !b.is_empty())
        };
        let mut settled = |b: &'a Value| self.at(Some(b)).settled_depth(depth + 1, budget);
        ["anyOf", "oneOf"]
            .into_iter()
            .any(|k| branches(k).is_some_and(|b| b.iter().all(&mut settled)))
            || branches("allOf").is_some_and(|b| b.iter().any(&mut settled))
    }

    /// The schema of property `key` of an object at this position.
    #[must_use]
    pub fn property(&self, key: &str) -> Self {
        self.child(0, &mut visits(), &|node| {
            node.get("properties")
                .and_then(|p| p.get(key))
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))
        })
    }

    /// The schema of item `index` of an array at this position.
    #[must_use]
    pub fn item(&self, index: usize) -> Self {
        self.child(0, &mut visits(), &|node| {
            node.get("prefixItems")
                .and_then(|p| p.get(index))
                .or_else(|| node.get("items").filter(|i| i.is_object()))
        })
    }

    fn child(
        &self,
        depth: usize,
        budget: &mut usize,
        pick: &dyn Fn(&'a Value) -> Option<&'a Value>,
    ) -> Self {
        if !visit(budget) {
            return self.at(None);
        }
        if let Some(node) = self.resolved()
            && let Some(found) = pick(node)
        {
            return self.at(Some(found));
        }
        if depth < MAX_REF_HOPS {
            for b in self.branches() {
                let c = b.child(depth + 1, budget, pick);
                if c.node.is_some() {
                    return c;
                }
            }
        }
        self.at(None)
    }
}

/// True when `s` starts like an absolute or scheme-relative URL.
pub fn looks_like_url(s: &str) -> bool {
    let t = s.trim_start().as_bytes();
    let starts = |p: &[u8]| t.len() >= p.len() && t[..p.len()].eq_ignore_ascii_case(p);
    starts(b"http:")
        || starts(b"https:")
        || starts(b"ftp:")
        || starts(b"//")
        || starts(b"\\\\")
        || starts(b"/\\")
        || starts(b"\\/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_uri_positions_through_refs_and_options() {
        let schema = json!({
            "type": "object",
            "properties": {
                "trip": {"$ref": "#/$defs/Trip"},
                "links": {"type": "array", "items": {"type": "string", "format": "uri"}},
                "by_name": {"type": "object", "additionalProperties": {"x-toolguard-kind": "url"}},
                "free": {}
            },
            "$defs": {
                "Trip": {"type": "object", "properties": {
                    "site": {"anyOf": [{"type": "string", "format": "uri"}, {"type": "null"}]},
                    "notes": {"type": "array", "items": {"type": "string"}},
                    "loop": {"$ref": "#/$defs/Trip"}
                }}
            }
        });
        let trip = SchemaAt::field(&schema, "trip");
        assert!(trip.property("site").is_url());
        assert!(
            trip.property("loop")
                .property("loop")
                .property("site")
                .is_url()
        );
        assert!(!trip.property("notes").item(0).is_url());
        assert!(SchemaAt::field(&schema, "links").item(3).is_url());
        assert!(SchemaAt::field(&schema, "by_name").property("any").is_url());
        assert!(!SchemaAt::field(&schema, "free").property("x").is_url());
        assert!(!SchemaAt::field(&schema, "missing").is_url());
        let cyclic = json!({"properties": {"a": {"$ref": "#/properties/a"}}});
        assert!(!SchemaAt::field(&cyclic, "a").is_url());
    }

    #[test]
    fn url_prefixes() {
        for s in ["https://x", " HTTP://x", "//x", "\\\\x", "ftp:x"] {
            assert!(looks_like_url(s), "{s}");
        }
        for s in ["see https://x", "httpx", "/path", "mailto:a@b"] {
            assert!(!looks_like_url(s), "{s}");
        }
    }
}
