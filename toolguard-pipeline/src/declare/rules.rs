//! The safety rules of a run-time declaration: the rules `#[tool]` enforces at compile time,
//! applied when a [`Declaration`] is loaded. No rule is written here: they live in
//! `toolguard-rules` ([`toolguard_rules::decl`] over one tool, [`toolguard_rules::schema`] over a
//! whole input schema), where the macro reads them too, so both meet the same conditions and
//! give the same diagnosis, with fixes spelt as keys (`max_len = N`). This module builds the
//! rules' model of a tool from its JSON Schema and its declaration, and reports the first broken
//! rule as a [`DeclareError`] naming the tool and the field.

use serde_json::Value;
use toolguard_rules::decl::{self as model, Syntax};
use toolguard_rules::{Kind, schema as schema_rules};

use super::{Declaration, FieldDecl, KeySource, OutputTrust, pointer_property};
use crate::spec::{Egress, FieldKind, KeyReuse};

/// Why a declaration was refused: the tool, the field (a JSON pointer) when one is at fault, and
/// what is wrong with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}`{}: {message}", field.as_ref().map(|f| format!(", field `{f}`")).unwrap_or_default())]
#[non_exhaustive]
pub struct DeclareError {
    /// The tool.
    pub tool: String,
    /// The field, as a JSON pointer, when the error concerns one.
    pub field: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl DeclareError {
    fn new(tool: &str, field: Option<String>, message: impl Into<String>) -> Self {
        DeclareError {
            tool: tool.to_owned(),
            field,
            message: message.into(),
        }
    }
}

/// Checks tool `name` (described upstream as `description`) with input schema `schema` and
/// declaration `decl` against every declaration rule: the input schema is an object schema; the
/// tool and each top-level property, read into the rules' model ([`schema_rules::fields`], then what
/// `decl` says of each field), meet [`model::check`]; no property at any depth is named like
/// identity and every pattern is portable ([`schema_rules::check`]). The first broken rule is
/// returned.
pub fn check(
    name: &str,
    description: &str,
    schema: &Value,
    decl: &Declaration,
) -> Result<(), DeclareError> {
    match check_all(name, description, schema, decl)
        .into_iter()
        .next()
    {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every rule [`check`] finds broken, in the same order (a schema that is not an object schema,
/// or a declaration of a property the schema lacks, is the only error: nothing else can be
/// read). A review of a whole policy file shows them all at once.
pub fn check_all(
    name: &str,
    description: &str,
    schema: &Value,
    decl: &Declaration,
) -> Vec<DeclareError> {
    let not_identity: Vec<&str> = decl
        .fields
        .iter()
        .filter(|(_, f)| f.identity == Some(false))
        .filter_map(|(p, _)| p.strip_prefix('/'))
        .collect();
    let whole = schema_rules::check_except(schema, Syntax::Keys, &not_identity);
    // An input schema that is not an object schema has no fields to read.
    if let Some(v) = whole.iter().find(|v| v.at.is_empty()) {
        return vec![DeclareError::new(name, None, v.message.clone())];
    }
    let tool = match tool_model(name, Some(description), Some(schema), decl) {
        Ok(tool) => tool,
        Err(e) => return vec![e],
    };
    let mut all: Vec<DeclareError> = model::check_with(&tool, Syntax::Keys)
        .into_iter()
        .map(|v| error_of(name, &tool, v))
        .collect();
    // A top-level property named like identity is found by both walks: reported once.
    for v in whole {
        if !all.iter().any(|e| e.message == v.message) {
            all.push(DeclareError::new(name, None, v.message));
        }
    }
    // A schema under which checking one value never ends (the dispatcher refuses it too).
    if let Err(message) = crate::stage::validate::check_branching(schema) {
        all.push(DeclareError::new(name, None, message));
    }
    all
}

/// Checks what `decl` says of itself, before the schema it will apply to is known (a policy file
/// on load): the rules of [`model::check_declared`] over the tool and the fields it declares.
/// [`check`] applies every rule once the schema is there.
pub fn check_declaration(name: &str, decl: &Declaration) -> Result<(), DeclareError> {
    let tool = tool_model(name, None, None, decl)?;
    first(name, &tool, model::check_declared(&tool, Syntax::Keys))
}

/// The first of `found`, as the error of tool `name`, on the field its site names.
fn first(
    name: &str,
    tool: &model::ToolDecl,
    found: Vec<model::Violation>,
) -> Result<(), DeclareError> {
    match found.into_iter().next() {
        Some(v) => Err(error_of(name, tool, v)),
        None => Ok(()),
    }
}

/// Violation `v` as the error of tool `name`, on the field its site names.
fn error_of(name: &str, tool: &model::ToolDecl, v: model::Violation) -> DeclareError {
    let field = v.site.field().map(|i| pointer_of(&tool.fields[i].name));
    DeclareError::new(name, field, v.message)
}

/// The rules' model of tool `name`: from `schema` and `decl`, or from `decl` alone (its fields,
/// of unknown type) when there is no schema yet.
fn tool_model(
    name: &str,
    description: Option<&str>,
    schema: Option<&Value>,
    d: &Declaration,
) -> Result<model::ToolDecl, DeclareError> {
    let description = d.description.as_deref().or(description).map(str::to_owned);
    let mut tool = model::ToolDecl::new(name, description);
    tool.risk = d.risk;
    tool.read_only = d.read_only;
    tool.idempotent = d.idempotent.then_some(match d.idempotency_key {
        KeySource::Host => model::KeySource::Host,
        KeySource::Field(_) => model::KeySource::Argument,
    });
    tool.key_field = match &d.idempotency_key {
        KeySource::Field(f) => Some(f.clone()),
        KeySource::Host => None,
    };
    tool.key_wins = d.key_reuse == KeyReuse::KeyWins;
    tool.approval = d.approval;
    tool.approval_over = d.approval_over;
    tool.approvals = d.approvals.map(u64::from);
    tool.timeout_ms = d.timeout_ms;
    // A forwarded result is content the caller did not produce, unless declared otherwise.
    tool.output = Some(match d.output {
        Some(OutputTrust::Trusted) => model::OutputTrust::Trusted,
        Some(OutputTrust::Untrusted) | None => model::OutputTrust::Untrusted,
    });
    tool.untrusted_fields.clone_from(&d.untrusted_fields);
    tool.egress = match d.egress {
        Egress::None => None,
        Egress::Open => Some(model::EgressDecl::Open),
        Egress::Allowlisted => Some(model::EgressDecl::Allowlisted),
    };
    tool.fields = schema.map(schema_rules::fields).unwrap_or_default();
    for (pointer, f) in &d.fields {
        let i = field_index(name, schema, &mut tool.fields, pointer, "field rules take")?;
        apply(&mut tool.fields[i], f);
    }
    if let Some(pointer) = &d.amount {
        let i = field_index(name, schema, &mut tool.fields, pointer, "`amount` takes")?;
        tool.fields[i].amount = true;
    }
    Ok(tool)
}

/// The index of the field `pointer` names; without a schema, a declared field is added.
fn field_index(
    name: &str,
    schema: Option<&Value>,
    fields: &mut Vec<model::FieldDecl>,
    pointer: &str,
    what: &str,
) -> Result<usize, DeclareError> {
    let at = Some(pointer.to_owned());
    let Some(prop) = pointer_property(pointer) else {
        return Err(DeclareError::new(
            name,
            at,
            format!(
                "{what} the JSON pointer of a top-level property (`/path`, in a policy file \
                 `fields.\"/path\"`); a field's kind applies to every string nested in that \
                 property"
            ),
        ));
    };
    if let Some(i) = fields.iter().position(|f| f.name == prop) {
        return Ok(i);
    }
    match schema {
        Some(schema) => Err(DeclareError::new(
            name,
            at,
            format!(
                "the input schema has no property `{prop}`; the properties are: {}",
                property_list(schema)
            ),
        )),
        None => {
            // The declared kind (or `text`) and an unknown type until the schema is read.
            fields.push(model::FieldDecl::new(
                prop,
                Kind::Text,
                model::Scalar::Other,
            ));
            Ok(fields.len() - 1)
        }
    }
}

/// What the declaration says of a field, over what its schema says.
fn apply(field: &mut model::FieldDecl, f: &FieldDecl) {
    if let Some(kind) = f.kind {
        field.kind = kind_of(kind);
        field.kind_declared = true;
    }
    field.not_identity = f.identity == Some(false);
    field.scale = f.scale;
    field.currency = f.currency.clone();
    field.default_scheme = f.default_scheme.clone();
    field.upstream_namespace = f.namespace == Some(super::PathNamespace::Upstream);
    field.egress_when = f.egress.is_marked();
    field.egress_outside = f.egress == super::FieldEgress::Outside;
    field.internal = !f.internal.is_empty();
    if let Some(d) = &f.description {
        field.description = Some(d.clone());
    }
    field.sensitive = f.sensitive;
    field.min_len = f.min_len.or(field.min_len);
    field.max_len = f.max_len.or(field.max_len);
    field.max_items = f.max_items.or(field.max_items);
    if let Some(p) = &f.pattern {
        field.pattern = Some(p.clone());
    }
    field.root = f.root.clone();
    field.allow_domains = !f.allow_domains.is_empty();
    field.allow_hosts = !f.allow_hosts.is_empty() || !f.allow_schemes.is_empty();
}

/// The rules' kind of a runtime field kind.
fn kind_of(kind: FieldKind) -> Kind {
    match kind {
        FieldKind::Identifier => Kind::Identifier,
        FieldKind::Text => Kind::Text,
        FieldKind::Name => Kind::Name,
        FieldKind::Email => Kind::Email,
        FieldKind::Url => Kind::Url,
        FieldKind::Path => Kind::Path,
        FieldKind::Money => Kind::Money,
        FieldKind::Opaque => Kind::Opaque,
        // A kind the rules do not know yet is judged as free text, the kind with most rules.
        _ => Kind::Text,
    }
}

/// The JSON pointer of top-level property `name`.
pub(crate) fn pointer_of(name: &str) -> String {
    format!("/{}", name.replace('~', "~0").replace('/', "~1"))
}

fn property_list(schema: &Value) -> String {
    let names: Vec<String> = schema_rules::properties(schema)
        .map(|(p, _)| format!("`{}`", pointer_of(p)))
        .collect();
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::spec::Risk;

    #[test]
    fn the_first_broken_rule_names_the_tool_and_the_field() {
        let schema = json!({"type": "object", "properties": {
            "memo": {"type": "string", "description": "Memo."}
        }});
        let mut decl = Declaration::new(Risk::High, false);
        decl.idempotent = true;
        let err = check("note", "Notes.", &schema, &decl).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("/memo"));
        assert!(
            err.message
                .starts_with("unbounded string `memo` on a high-risk tool"),
            "{err}"
        );
        assert!(err.message.contains("Add `max_len = N`"), "{err}");
        assert!(err.to_string().starts_with("tool `note`, field `/memo`: "));
    }

    #[test]
    fn an_upstream_enum_is_an_enum_not_free_text() {
        // Upstream servers confine choices with `enum` and `const`: on a high-risk tool such a
        // string needs no `max_len`, and the sanitizer has no text to judge in it.
        let schema = json!({"type": "object", "properties": {
            "amount": {"type": "integer", "description": "Minor units."},
            "currency": {"type": "string", "enum": ["USD", "EUR"], "description": "Currency."},
            "rail": {"anyOf": [{"type": "string", "const": "sepa"}, {"type": "null"}],
                     "description": "Payment rail."},
            "memo": {"type": "string", "description": "Memo."},
            "fallbacks": {"type": "array", "items": {"type": "string", "enum": ["sepa", "swift"]},
                          "maxItems": 2, "description": "Rails to try next."}
        }});
        let mut decl = Declaration::new(Risk::High, false);
        decl.idempotent = true;
        let err = check("pay", "Pays.", &schema, &decl).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("/memo"), "{err}");
        decl.fields.insert(
            "/memo".to_owned(),
            FieldDecl {
                max_len: Some(140),
                ..FieldDecl::default()
            },
        );
        let spec = super::super::declare("pay", "Pays.", &schema, &decl).expect("declared");
        for confined in ["currency", "rail", "fallbacks"] {
            let field = spec.field(confined).expect(confined);
            assert_eq!(field.kind, FieldKind::Opaque, "{confined}");
        }
        assert_eq!(spec.field("memo").map(|f| f.kind), Some(FieldKind::Text));
        // Decided once, at registration: the choices (a list of them too) need no walk per call.
        assert_eq!(
            crate::stage::core::settled_fields(&spec),
            ["amount", "currency", "fallbacks", "rail"]
        );
        // Declared as text, an enum is judged as text by the sanitizer; its values still bound it.
        decl.fields.insert(
            "/currency".to_owned(),
            FieldDecl {
                kind: Some(FieldKind::Text),
                ..FieldDecl::default()
            },
        );
        let spec = super::super::declare("pay", "Pays.", &schema, &decl).expect("declared");
        assert_eq!(
            spec.field("currency").map(|f| f.kind),
            Some(FieldKind::Text)
        );
    }

    #[test]
    fn a_schema_whose_branches_multiply_is_refused_at_declaration() {
        // An upstream schema under which one value is checked against 20^16 subschemas: every
        // call with `{"x": []}` would never end.
        let mut schema = crate::stage::validate::tests::branching(16, 20);
        schema["properties"]["x"]["description"] = json!("Items.");
        let decl = Declaration::new(Risk::Low, true);
        let err = check("sum", "Sums.", &schema, &decl).unwrap_err();
        assert_eq!(err.tool, "sum");
        assert!(err.message.contains("`/properties/x`"), "{err}");
        assert!(err.message.contains("flatten the schema"), "{err}");
        assert!(super::super::declare("sum", "Sums.", &schema, &decl).is_err());
    }

    #[test]
    fn nested_identity_and_non_object_schemas_are_refused() {
        let decl = Declaration::new(Risk::Low, true);
        let nested = json!({"type": "object", "properties": {"order": {"type": "object",
            "properties": {"owner_id": {"type": "string"}}}}});
        let err = check("list", "Lists.", &nested, &decl).unwrap_err();
        assert!(err.message.contains("`order.owner_id`"), "{err}");
        let err = check("list", "Lists.", &json!({"type": "string"}), &decl).unwrap_err();
        assert!(err.message.contains("\"type\": \"object\""), "{err}");
    }

    #[test]
    fn a_declaration_alone_is_checked_for_what_it_says() {
        let mut decl = Declaration::new(Risk::Low, true);
        decl.fields.insert(
            "/file".to_owned(),
            FieldDecl {
                kind: Some(FieldKind::Path),
                ..FieldDecl::default()
            },
        );
        let err = check_declaration("read", &decl).unwrap_err();
        assert_eq!(err.field.as_deref(), Some("/file"));
        assert!(err.message.contains("root = "), "{err}");
        decl.fields.clear();
        decl.fields.insert("/a/b".to_owned(), FieldDecl::default());
        let err = check_declaration("read", &decl).unwrap_err();
        assert!(err.message.contains("top-level property"), "{err}");
    }

    #[test]
    fn bounds_go_where_the_rules_read_them() {
        let schema = json!({"type": "object", "properties": {
            "tags": {"description": "Tags.", "anyOf": [
                {"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
            "headers": {"description": "Headers.", "type": "object",
                "additionalProperties": {"type": "string"}}
        }});
        let mut decl = Declaration::new(Risk::High, true);
        for (pointer, max_items) in [("/tags", 5), ("/headers", 8)] {
            decl.fields.insert(
                pointer.to_owned(),
                FieldDecl {
                    max_len: Some(32),
                    max_items: Some(max_items),
                    ..FieldDecl::default()
                },
            );
        }
        let spec = crate::declare::declare("tag", "Tags things.", &schema, &decl).unwrap();
        let props = &spec.input_schema["properties"];
        assert_eq!(props["tags"]["anyOf"][0]["maxItems"], 5);
        assert_eq!(props["tags"]["anyOf"][0]["items"]["maxLength"], 32);
        assert_eq!(props["headers"]["maxProperties"], 8);
        assert_eq!(props["headers"]["additionalProperties"]["maxLength"], 32);
        // Without the bounds, the wrapped array and the map are unbounded on a high-risk tool.
        let err = check(
            "tag",
            "Tags things.",
            &schema,
            &Declaration::new(Risk::High, true),
        )
        .unwrap_err();
        assert!(err.message.starts_with("unbounded"), "{err}");
    }

    /// A Python server's `send_money`: `subject` named like identity, `amount: float | None`.
    fn python_transfer() -> Value {
        json!({"type": "object", "required": ["recipient", "subject"], "properties": {
            "recipient": {"type": "string", "title": "Recipient"},
            "amount": {"anyOf": [{"type": "number"}, {"type": "null"}], "default": null},
            "subject": {"type": "string", "title": "Subject"}
        }})
    }

    fn transfer_decl() -> Declaration {
        let mut decl = Declaration::new(Risk::Medium, false);
        decl.idempotent = true;
        decl.amount = Some("/amount".to_owned());
        decl.approval_over = Some(100_000);
        decl.fields.insert(
            "/amount".to_owned(),
            FieldDecl {
                kind: Some(FieldKind::Money),
                scale: Some(2),
                currency: Some("USD".to_owned()),
                ..FieldDecl::default()
            },
        );
        decl.fields.insert(
            "/subject".to_owned(),
            FieldDecl {
                kind: Some(FieldKind::Text),
                identity: Some(false),
                ..FieldDecl::default()
            },
        );
        decl
    }

    #[test]
    fn a_third_party_field_and_an_optional_decimal_amount_can_be_declared() {
        let spec =
            crate::declare::declare("send_money", "Pays.", &python_transfer(), &transfer_decl())
                .unwrap();
        let amount = spec.field("amount").unwrap();
        assert_eq!(
            (amount.scale, amount.currency.as_deref()),
            (Some(2), Some("USD"))
        );
        assert_eq!(
            spec.input_schema["properties"]["amount"]["anyOf"][0]["minimum"],
            0
        );
        assert_eq!(
            spec.input_schema["properties"]["amount"]["anyOf"][1]["type"],
            "null"
        );
        // 1000.01 USD is 100001 cents: over the threshold, read without a float.
        let args = json!({"amount": 1000.01});
        assert_eq!(
            crate::spec::measure_amount(&spec, &args).unwrap(),
            Some(100_001)
        );
        let stop = crate::spec::measure_amount(&spec, &json!({"amount": 0.001})).unwrap_err();
        assert_eq!(stop.reason.as_deref(), Some("amount_too_precise"));
    }

    #[test]
    fn undeclared_the_identity_rule_still_applies_and_names_the_policy_option() {
        let mut decl = transfer_decl();
        decl.fields.remove("/subject");
        let err = check("send_money", "Pays.", &python_transfer(), &decl).unwrap_err();
        assert!(err.message.contains("looks like identity"), "{err}");
        assert!(err.message.contains("identity = false"), "{err}");
        assert!(!err.message.contains("ToolContext"), "{err}");
        // Without scale, the float amount is refused with the fix that declares it.
        let mut decl = transfer_decl();
        decl.fields.get_mut("/amount").unwrap().scale = None;
        decl.fields.get_mut("/amount").unwrap().currency = None;
        let err = check("send_money", "Pays.", &python_transfer(), &decl).unwrap_err();
        assert!(err.message.contains("scale = 2"), "{err}");
        // `identity = false` passes over the field itself, not over what is nested in it.
        let nested = json!({"type": "object", "properties": {"user": {"type": "object",
            "properties": {"tenant_id": {"type": "string"}}}}});
        let mut decl = Declaration::new(Risk::Low, true);
        decl.fields.insert(
            "/user".to_owned(),
            FieldDecl {
                kind: Some(FieldKind::Opaque),
                identity: Some(false),
                ..FieldDecl::default()
            },
        );
        decl.output = Some(OutputTrust::Trusted);
        let err = check("lookup", "Looks up.", &nested, &decl).unwrap_err();
        assert!(err.message.contains("`user.tenant_id`"), "{err}");
    }
}
