//! The input schema as the declaration tightens it, and the field rules the dispatcher applies.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use toolguard_rules::decl::Collection;
use toolguard_rules::schema::{layout, properties};

use super::rules::pointer_of;
use super::{Declaration, KeySource, pointer_property};
use crate::spec::{FieldKind, FieldSpec, ToolSpec};

/// Length and pattern of a model-supplied idempotency key (as `#[tool]` generates it).
const KEY_PATTERN: &str = "^[A-Za-z0-9_-]{8,128}$";

/// `schema` with the declaration's bounds written into it: `maxLength`, `minLength`, `pattern`
/// on each value (the items of an array, the values of a map, through an `anyOf` with `null`:
/// where the rules read them, see [`layout`]), `maxItems` (`maxProperties` on a map),
/// descriptions, `minimum: 0` on the amount, the key field, and no properties beyond the
/// declared ones (`additionalProperties: false`).
pub(crate) fn tighten(schema: &Value, decl: &Declaration) -> Value {
    let mut schema = schema.clone();
    let Some(root) = schema.as_object_mut() else {
        return schema;
    };
    root.remove("$schema");
    root.insert("type".to_owned(), json!("object"));
    root.insert("additionalProperties".to_owned(), json!(false));
    let props = root
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut();
    let Some(props) = props else {
        return schema;
    };
    for (pointer, f) in &decl.fields {
        let Some(sub) = pointer_property(pointer).and_then(|p| props.get_mut(&p)) else {
            continue;
        };
        let at = layout(sub);
        // An array without `items` gets an empty one to hold the element bounds.
        if at.collection == Some(Collection::Sequence)
            && sub.pointer(&at.element).is_none()
            && let Some(array) = sub
                .pointer_mut(&at.container)
                .and_then(Value::as_object_mut)
        {
            array.entry("items").or_insert_with(|| json!({}));
        }
        if let Some(element) = sub.pointer_mut(&at.element).and_then(Value::as_object_mut) {
            set(element, "maxLength", f.max_len.map(Value::from));
            set(element, "minLength", f.min_len.map(Value::from));
            set(element, "pattern", f.pattern.clone().map(Value::from));
        }
        let bound = match at.collection {
            Some(Collection::Map) => "maxProperties",
            _ => "maxItems",
        };
        if let Some(container) = sub
            .pointer_mut(&at.container)
            .and_then(Value::as_object_mut)
        {
            set(container, bound, f.max_items.map(Value::from));
        }
        let Some(sub) = sub.as_object_mut() else {
            continue;
        };
        let description = f.description.clone().or_else(|| {
            (f.kind == Some(FieldKind::Path)).then(|| {
                let old = sub.get("description").and_then(Value::as_str).unwrap_or("");
                format!(
                    "{old} Relative path below the allowed directory (no leading `/`, no `..`)."
                )
                .trim()
                .to_owned()
            })
        });
        set(sub, "description", description.map(Value::from));
    }
    // On the number itself: through an optional field's `anyOf`, the null branch stays.
    if let Some(sub) = decl
        .amount
        .as_deref()
        .and_then(pointer_property)
        .and_then(|p| props.get_mut(&p))
    {
        let at = layout(sub).element;
        if let Some(number) = sub.pointer_mut(&at).and_then(Value::as_object_mut) {
            number.insert("minimum".to_owned(), json!(0));
        }
    }
    if let KeySource::Field(field) = &decl.idempotency_key
        && decl.idempotent
    {
        props.insert(
            field.clone(),
            json!({"type": "string", "pattern": KEY_PATTERN, "description":
                "A unique key per intended action; repeat it only to retry the same action."}),
        );
        let required = root.entry("required").or_insert_with(|| json!([]));
        if let Some(list) = required.as_array_mut() {
            list.push(json!(field));
        }
    }
    schema
}

/// Sets `key` to `value` when there is one.
fn set(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(v) = value {
        map.insert(key.to_owned(), v);
    }
}

/// The dispatcher's field rules: every top-level property, strings default to `text`, numbers,
/// booleans and nulls to `opaque`, declared fields as declared.
pub(crate) fn field_specs(schema: &Value, decl: &Declaration) -> Vec<FieldSpec> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    properties(schema)
        .map(|(name, sub)| {
            let pointer = pointer_of(name);
            let f = decl.fields.get(&pointer).cloned().unwrap_or_default();
            // An optional field (`anyOf: [T, null]`) is read as its non-null alternative. A
            // value confined to listed ones (`enum`, `const`) holds no text of the model's own:
            // opaque, as the rules read it; so does a list of such values (a map's keys are
            // the model's own text: a map is not). An opaque field whose schema settles every
            // value it accepts is not walked per call (`settled_fields`).
            let at = layout(sub);
            let inner = sub.pointer(&at.container).unwrap_or(sub);
            let scalar = |schema: &Value| {
                toolguard_rules::schema::confined(schema)
                    || ["integer", "number", "boolean", "null"]
                        .iter()
                        .any(|t| has_type(schema, t))
            };
            let scalar = match at.collection {
                Some(Collection::Sequence) => sub.pointer(&at.element).is_some_and(scalar),
                _ => scalar(inner),
            };
            let kind = f.kind.unwrap_or(if scalar {
                FieldKind::Opaque
            } else {
                FieldKind::Text
            });
            FieldSpec {
                name: name.clone(),
                kind,
                description: sub
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                sensitive: f.sensitive,
                amount: decl.amount.as_deref() == Some(pointer.as_str()),
                optional: !required.contains(&name.as_str()),
                min_len: f.min_len,
                max_len: f.max_len,
                pattern: f.pattern.clone(),
                min: None,
                max: None,
                root: f.root.clone(),
                role: f.role,
                scale: f.scale,
                currency: f.currency.clone(),
                default_scheme: f.default_scheme.clone(),
                upstream_namespace: f.namespace == Some(super::PathNamespace::Upstream),
                egress_when: f.egress.is_marked(),
                egress_internal: match f.egress {
                    super::FieldEgress::Outside => f.internal.clone(),
                    _ => Vec::new(),
                },
                not_identity: f.identity == Some(false) && f.kind.is_some(),
            }
        })
        .collect()
}

/// Whether `schema`'s `type` is or includes `ty`.
fn has_type(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(s)) => s == ty,
        Some(Value::Array(a)) => a.iter().any(|t| t.as_str() == Some(ty)),
        _ => false,
    }
}

/// A revision that changes whenever the tool's contract (schemas, effect, rules) changes, so an
/// approval bound to an earlier contract no longer executes. Never 0.
pub(crate) fn revision_of(spec: &ToolSpec) -> u32 {
    let mut copy = spec.clone();
    copy.revision = 0;
    // Not part of the contract the revision names (the trust it declares is).
    copy.output_declared = false;
    let bytes = serde_json::to_vec(&copy).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
    n.max(1)
}
