//! Shared machinery of every schema lowering: limits, errors, the record of lossy steps, JSON
//! pointers and local `$ref` resolution.
//!
//! Every walk over a schema is bounded twice: [`check_bounds`] first measures the whole document
//! without recursion (so a 100,000-deep document is refused before any recursive walk starts), and
//! the recursive walks that follow `$ref`s count the nodes they produce against the same
//! [`Limits`].

use serde::Serialize;
use serde_json::{Map, Value};

/// Bounds on the size of a schema walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most JSON values a schema (or a schema with its `$ref`s inlined) may have.
    pub max_nodes: usize,
    /// Deepest JSON nesting a schema (or an inlined schema) may have.
    pub max_depth: usize,
}

impl Limits {
    /// 10,000 nodes, depth 64.
    pub const DEFAULT: Limits = Limits {
        max_nodes: 10_000,
        max_depth: 64,
    };
}

impl Default for Limits {
    fn default() -> Self {
        Limits::DEFAULT
    }
}

/// Why a schema could not be lowered to a dialect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LowerError {
    /// The schema has more nodes than [`Limits::max_nodes`].
    #[error("schema has more than {limit} nodes")]
    TooLarge {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The schema is nested deeper than [`Limits::max_depth`].
    #[error("schema is nested deeper than {limit} levels")]
    TooDeep {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A `$ref` is not local (`#` or `#/...`) or points nowhere.
    #[error("unresolvable $ref {reference:?} at {pointer:?}")]
    BadRef {
        /// Where the `$ref` is, as a JSON pointer into the canonical schema.
        pointer: String,
        /// The reference.
        reference: String,
    },
    /// The schema is recursive and the dialect needs it inlined, or its `$ref`s form a cycle that
    /// never reaches a real schema.
    #[error("recursive schema at {pointer:?} cannot be expressed in this dialect")]
    Recursive {
        /// Where the recursion closes.
        pointer: String,
    },
    /// The schema has no strict-mode form.
    #[error("not expressible in strict mode at {pointer:?}: {reason}")]
    NotStrict {
        /// Where the obstacle is.
        pointer: String,
        /// What the obstacle is.
        reason: String,
    },
    /// The schema breaks a hard rule of the dialect (e.g. the root is not an object).
    #[error("unsupported schema at {pointer:?}: {reason}")]
    Unsupported {
        /// Where the obstacle is.
        pointer: String,
        /// What the obstacle is.
        reason: String,
    },
}

/// One place where a lowered schema says less (or something else) than the canonical one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct LossyStep {
    /// JSON pointer into the canonical schema.
    pub pointer: String,
    /// What was changed, e.g. `minLength moved to description`.
    pub what: String,
}

/// A schema lowered to a dialect, with the record of what it lost.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Lowered {
    /// The dialect's schema.
    pub schema: Value,
    /// Every lossy step, in walk order.
    pub lossy: Vec<LossyStep>,
}

/// Measures `schema` without recursion; refuses documents over `limits`.
pub fn check_bounds(schema: &Value, limits: Limits) -> Result<(), LowerError> {
    let mut stack: Vec<(&Value, usize)> = vec![(schema, 1)];
    let mut nodes = 0usize;
    while let Some((value, depth)) = stack.pop() {
        nodes += 1;
        if nodes > limits.max_nodes {
            return Err(LowerError::TooLarge {
                limit: limits.max_nodes,
            });
        }
        if depth > limits.max_depth {
            return Err(LowerError::TooDeep {
                limit: limits.max_depth,
            });
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|v| (v, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|v| (v, depth + 1))),
            _ => {}
        }
    }
    Ok(())
}

/// Counts nodes produced by a recursive walk (one that may inline `$ref`s).
#[derive(Debug)]
pub(crate) struct Budget {
    limits: Limits,
    nodes: usize,
}

impl Budget {
    pub(crate) fn new(limits: Limits) -> Self {
        Budget { limits, nodes: 0 }
    }

    /// Accounts for one schema node at `depth` (root = 1).
    pub(crate) fn visit(&mut self, depth: usize) -> Result<(), LowerError> {
        self.nodes += 1;
        if self.nodes > self.limits.max_nodes {
            return Err(LowerError::TooLarge {
                limit: self.limits.max_nodes,
            });
        }
        if depth > self.limits.max_depth {
            return Err(LowerError::TooDeep {
                limit: self.limits.max_depth,
            });
        }
        Ok(())
    }
}

/// A JSON pointer under construction.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pointer(Vec<String>);

impl Pointer {
    pub(crate) fn root() -> Self {
        Pointer(Vec::new())
    }

    pub(crate) fn child(&self, token: &str) -> Self {
        let mut next = self.0.clone();
        next.push(token.to_owned());
        Pointer(next)
    }

    /// The pointer of a local reference (`#/$defs/A` → `/$defs/A`), tokens decoded.
    pub(crate) fn from_fragment(reference: &str) -> Self {
        let fragment = reference.strip_prefix('#').unwrap_or(reference);
        let tokens = fragment
            .split('/')
            .skip(1)
            .map(|t| {
                percent_decode(t)
                    .unwrap_or_else(|| t.to_owned())
                    .replace("~1", "/")
                    .replace("~0", "~")
            })
            .collect();
        Pointer(tokens)
    }

    pub(crate) fn child2(&self, a: &str, b: &str) -> Self {
        self.child(a).child(b)
    }
}

impl std::fmt::Display for Pointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for token in &self.0 {
            write!(f, "/{}", token.replace('~', "~0").replace('/', "~1"))?;
        }
        Ok(())
    }
}

/// Resolves a local `$ref` (`#`, `#/$defs/Name`, any `#/json/pointer`) against `root`.
pub(crate) fn resolve_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() {
        return Some(root);
    }
    if !fragment.starts_with('/') {
        return None;
    }
    let mut current = root;
    for raw in fragment[1..].split('/') {
        let token = percent_decode(raw)?.replace("~1", "/").replace("~0", "~");
        current = match current {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => items.get(token.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

fn percent_decode(raw: &str) -> Option<String> {
    if !raw.contains('%') {
        return Some(raw.to_owned());
    }
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Follows a chain of `$ref`-only schemas from `reference` to the first real schema; refuses a
/// chain that loops or leaves the document.
pub(crate) fn resolve_chain<'a>(
    root: &'a Value,
    reference: &str,
    at: &Pointer,
) -> Result<&'a Value, LowerError> {
    let mut seen: Vec<String> = Vec::new();
    let mut current = reference.to_owned();
    loop {
        if seen.iter().any(|s| s == &current) {
            return Err(LowerError::Recursive {
                pointer: at.to_string(),
            });
        }
        let target = resolve_ref(root, &current).ok_or_else(|| LowerError::BadRef {
            pointer: at.to_string(),
            reference: current.clone(),
        })?;
        match target.get("$ref").and_then(Value::as_str) {
            Some(next) if target.as_object().is_some_and(|m| m.len() == 1) => {
                seen.push(current);
                current = next.to_owned();
            }
            _ => return Ok(target),
        }
    }
}

/// Whether the `$ref` graph reachable from the root of `schema` has a cycle (a recursive type).
pub(crate) fn is_recursive(schema: &Value, limits: Limits) -> Result<bool, LowerError> {
    // Depth-first over reference targets, tracking the active path of references.
    fn refs_in(value: &Value, out: &mut Vec<String>) {
        let mut stack = vec![value];
        while let Some(v) = stack.pop() {
            match v {
                Value::Object(map) => {
                    for (k, child) in map {
                        if k == "$ref" {
                            if let Some(r) = child.as_str() {
                                out.push(r.to_owned());
                            }
                        } else if k != "$defs" && k != "definitions" {
                            stack.push(child);
                        }
                    }
                }
                Value::Array(items) => stack.extend(items.iter()),
                _ => {}
            }
        }
    }
    let mut steps = 0usize;
    // (reference, index of next child to visit, children)
    let mut root_refs = Vec::new();
    refs_in(schema, &mut root_refs);
    let mut path: Vec<String> = Vec::new();
    let mut frames: Vec<(Vec<String>, usize)> = vec![(root_refs, 0)];
    let mut done: Vec<String> = Vec::new();
    while let Some((children, next)) = frames.last_mut() {
        steps += 1;
        if steps > limits.max_nodes {
            return Err(LowerError::TooLarge {
                limit: limits.max_nodes,
            });
        }
        if *next >= children.len() {
            frames.pop();
            if let Some(finished) = path.pop() {
                done.push(finished);
            }
            continue;
        }
        let reference = children[*next].clone();
        *next += 1;
        if reference == "#" || path.iter().any(|p| p == &reference) {
            return Ok(true);
        }
        if done.iter().any(|d| d == &reference) {
            continue;
        }
        let Some(target) = resolve_ref(schema, &reference) else {
            return Err(LowerError::BadRef {
                pointer: String::new(),
                reference,
            });
        };
        let mut grand = Vec::new();
        refs_in(target, &mut grand);
        path.push(reference);
        frames.push((grand, 0));
    }
    Ok(false)
}

/// Whether `schema` certainly accepts JSON `null` (it may also where this says no).
///
/// The walk is bounded: it visits at most [`Limits::DEFAULT`]`.max_nodes` schema nodes and
/// nests at most [`Limits::DEFAULT`]`.max_depth` levels, and it follows each `$ref` once: a
/// reference's answer is memoized, and a reference met again while its own answer is still being
/// worked out counts as "does not certainly accept null". A walk that runs out of budget answers
/// `false` (the conservative answer).
pub(crate) fn accepts_null(root: &Value, schema: &Value) -> bool {
    let mut walk = NullWalk {
        root,
        nodes: 0,
        memo: std::collections::HashMap::new(),
    };
    walk.accepts(schema, 0).unwrap_or(false)
}

/// State of one [`accepts_null`] walk.
struct NullWalk<'a> {
    root: &'a Value,
    nodes: usize,
    /// Answer per `$ref` string; `None` while that reference is being worked out.
    memo: std::collections::HashMap<&'a str, Option<bool>>,
}

/// The walk ran out of budget.
struct OutOfBudget;

impl<'a> NullWalk<'a> {
    fn accepts(&mut self, schema: &'a Value, depth: usize) -> Result<bool, OutOfBudget> {
        self.nodes += 1;
        if self.nodes > Limits::DEFAULT.max_nodes || depth > Limits::DEFAULT.max_depth {
            return Err(OutOfBudget);
        }
        let Some(map) = schema.as_object() else {
            return Ok(schema.as_bool() == Some(true));
        };
        if let Some(r) = map.get("$ref").and_then(Value::as_str) {
            return match self.memo.get(r) {
                Some(Some(answer)) => Ok(*answer),
                // A cycle: this reference is already being worked out higher up.
                Some(None) => Ok(false),
                None => {
                    self.memo.insert(r, None);
                    let answer = match resolve_ref(self.root, r) {
                        Some(target) => self.accepts(target, depth + 1)?,
                        None => false,
                    };
                    self.memo.insert(r, Some(answer));
                    Ok(answer)
                }
            };
        }
        if let Some(t) = map.get("type") {
            let null_typed = match t {
                Value::String(s) => s == "null",
                Value::Array(ts) => ts.iter().any(|t| t == "null"),
                _ => false,
            };
            if !null_typed {
                return Ok(false);
            }
        }
        if let Some(values) = map.get("enum").and_then(Value::as_array)
            && !values.iter().any(Value::is_null)
        {
            return Ok(false);
        }
        if let Some(c) = map.get("const")
            && !c.is_null()
        {
            return Ok(false);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(key).and_then(Value::as_array) {
                let mut any = false;
                for branch in branches {
                    if self.accepts(branch, depth + 1)? {
                        any = true;
                        break;
                    }
                }
                if !any {
                    return Ok(false);
                }
            }
        }
        if let Some(branches) = map.get("allOf").and_then(Value::as_array) {
            for branch in branches {
                if !self.accepts(branch, depth + 1)? {
                    return Ok(false);
                }
            }
        }
        Ok(!map.contains_key("not"))
    }
}

/// Appends `key: value` lines to the description of `out`.
pub(crate) fn describe(out: &mut Map<String, Value>, moved: &[(String, Value)]) {
    if moved.is_empty() {
        return;
    }
    let mut text = out
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    for (key, value) in moved {
        if !text.is_empty() {
            text.push('\n');
        }
        let rendered = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        text.push_str(key);
        text.push_str(": ");
        text.push_str(&rendered);
    }
    out.insert("description".to_owned(), Value::String(text));
}

/// The root of a tool's argument schema must be a plain object schema.
pub(crate) fn require_object_root(schema: &Value) -> Result<&Map<String, Value>, LowerError> {
    let map = schema.as_object().ok_or_else(|| LowerError::Unsupported {
        pointer: String::new(),
        reason: "the root is not a schema object".to_owned(),
    })?;
    match map.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(map),
        _ => Err(LowerError::Unsupported {
            pointer: String::new(),
            reason: "the root must be a schema of type \"object\"".to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointer_escapes() {
        let p = Pointer::root().child("properties").child("a/b~c");
        assert_eq!(p.to_string(), "/properties/a~1b~0c");
    }

    #[test]
    fn resolves_local_refs() {
        let root = json!({"$defs": {"A": {"type": "string"}, "B": {"$ref": "#/$defs/A"}}});
        assert_eq!(
            resolve_ref(&root, "#/$defs/A"),
            Some(&json!({"type": "string"}))
        );
        assert!(resolve_ref(&root, "http://x/y").is_none());
        let at = Pointer::root();
        assert_eq!(
            resolve_chain(&root, "#/$defs/B", &at).unwrap(),
            &json!({"type": "string"})
        );
    }

    #[test]
    fn detects_ref_cycles() {
        let root = json!({
            "$ref": "#/$defs/A",
            "$defs": {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}
        });
        assert!(matches!(
            resolve_chain(&root, "#/$defs/A", &Pointer::root()),
            Err(LowerError::Recursive { .. })
        ));
        assert!(is_recursive(&root, Limits::DEFAULT).unwrap());
        let flat = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "string"}}});
        assert!(!is_recursive(&flat, Limits::DEFAULT).unwrap());
    }

    #[test]
    fn null_acceptance() {
        let root = json!({});
        assert!(accepts_null(&root, &json!({"type": ["string", "null"]})));
        assert!(!accepts_null(&root, &json!({"type": "string"})));
        assert!(accepts_null(
            &root,
            &json!({"anyOf": [{"type": "string"}, {"type": "null"}]})
        ));
        assert!(!accepts_null(&root, &json!({"enum": ["a"]})));
    }

    #[test]
    fn null_acceptance_of_branching_ref_cycle_is_quick_and_defined() {
        // Without memoization this walk takes 2^64 steps before the depth cap stops it.
        let root = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/A"}},
            "$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]}}
        });
        let started = std::time::Instant::now();
        assert!(!accepts_null(&root, &json!({"$ref": "#/$defs/A"})));
        assert!(!accepts_null(&root, &root["properties"]["a"]));
        // A cycle with a way out still finds it.
        let out = json!({"$defs": {"A": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]}}});
        assert!(accepts_null(&out, &json!({"$ref": "#/$defs/A"})));
        // Many distinct references in a wide tree exhaust the node budget: conservative `false`.
        let mut defs = serde_json::Map::new();
        for i in 0..200 {
            let branches: Vec<Value> = (0..200)
                .map(|j| json!({"$ref": format!("#/$defs/D{}", (i + j + 1) % 200)}))
                .collect();
            defs.insert(format!("D{i}"), json!({"anyOf": branches}));
        }
        let wide = json!({"$defs": defs});
        assert!(!accepts_null(&wide, &json!({"$ref": "#/$defs/D0"})));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
    }
}
