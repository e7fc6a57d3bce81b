//! The safety rules of a run-time declaration: the rules `#[tool]` enforces at compile time,
//! applied when a [`Declaration`] is loaded. Each rule is one function; the README's rule table
//! marks which rules apply where. The name rules (identity, money, tool names) are the ones the
//! macro uses; they live in one place per crate until the shared rules crate lands.

use serde_json::Value;

use super::{Declaration, FieldDecl, KeySource, pointer_property};
use crate::spec::{FieldKind, Risk, check_identity_properties};

/// Why a declaration was refused: the tool, the field (a JSON pointer) when one is at fault, and
/// what is wrong with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("tool `{tool}`{}: {message}", field.as_ref().map(|f| format!(", field `{f}`")).unwrap_or_default())]
pub struct DeclareError {
    /// The tool.
    pub tool: String,
    /// The field, as a JSON pointer, when the error concerns one.
    pub field: Option<String>,
    /// What is wrong and how to fix it.
    pub message: String,
}

type Rule = Result<(), DeclareError>;

fn fail(tool: &str, field: Option<&str>, message: impl Into<String>) -> Rule {
    Err(DeclareError {
        tool: tool.to_owned(),
        field: field.map(str::to_owned),
        message: message.into(),
    })
}

/// Runs every rule; the first broken one is returned.
pub fn check(name: &str, description: &str, schema: &Value, decl: &Declaration) -> Rule {
    tool_name(name)?;
    object_schema(name, schema)?;
    identity_properties(name, schema)?;
    contradictions(name, decl)?;
    high_risk_idempotent(name, decl)?;
    approval_over_needs_amount(name, decl)?;
    described(name, description, schema, decl)?;
    for (pointer, field) in &decl.fields {
        field_rules(name, schema, decl, pointer, field)?;
    }
    amount_field(name, schema, decl)?;
    money_properties(name, schema)?;
    high_risk_bounds(name, schema, decl)?;
    data_flow(name, decl)?;
    key_field(name, schema, decl)
}

/// Rule 19 (shared with `#[tool]` through `toolguard-rules`): a tool whose results are untrusted
/// (the default here) and that sends data to any destination needs `egress = "allowlisted"` or
/// `risk = "critical"`; `egress = "allowlisted"` needs a destination field.
pub fn data_flow(name: &str, d: &Declaration) -> Rule {
    use toolguard_rules::decl as shared;
    let mut tool = shared::ToolDecl::new(name, None);
    tool.risk = match d.risk {
        Risk::Low => toolguard_rules::Risk::Low,
        Risk::Medium => toolguard_rules::Risk::Medium,
        Risk::High => toolguard_rules::Risk::High,
        Risk::Critical => toolguard_rules::Risk::Critical,
    };
    tool.read_only = d.read_only;
    tool.output = Some(match d.output {
        Some(super::OutputTrust::Trusted) => shared::OutputTrust::Trusted,
        _ => shared::OutputTrust::Untrusted,
    });
    tool.egress = match d.egress {
        crate::spec::Egress::None => None,
        crate::spec::Egress::Open => Some(shared::EgressDecl::Open),
        crate::spec::Egress::Allowlisted => Some(shared::EgressDecl::Allowlisted),
    };
    for (pointer, f) in &d.fields {
        let kind = match f.kind {
            Some(FieldKind::Email) => toolguard_rules::Kind::Email,
            Some(FieldKind::Url) => toolguard_rules::Kind::Url,
            _ => toolguard_rules::Kind::Text,
        };
        let field = pointer_property(pointer).unwrap_or_else(|| pointer.clone());
        tool.fields
            .push(shared::FieldDecl::new(field, kind, shared::Scalar::Text));
    }
    match shared::data_flow(&tool, shared::Syntax::Keys)
        .into_iter()
        .next()
    {
        Some(v) => fail(name, None, v.message),
        None => Ok(()),
    }
}

/// Rule 9: `^[a-zA-Z][a-zA-Z0-9_]{0,63}$`.
pub fn tool_name(name: &str) -> Rule {
    if toolguard_rules::names::is_valid_tool_name(name) {
        return Ok(());
    }
    fail(
        name,
        None,
        "the tool name must match ^[a-zA-Z][a-zA-Z0-9_]{0,63}$ (the name every provider accepts); \
         leave the tool undeclared so the default policy hides it",
    )
}

fn object_schema(name: &str, schema: &Value) -> Rule {
    let typed_object = schema.get("type").and_then(Value::as_str) == Some("object");
    if schema.is_object() && (typed_object || schema.get("properties").is_some()) {
        return Ok(());
    }
    fail(
        name,
        None,
        "the input schema must be a JSON Schema object with `\"type\": \"object\"`",
    )
}

/// Rule 4: no property named like identity or authority, at any depth.
pub fn identity_properties(name: &str, schema: &Value) -> Rule {
    check_identity_properties(schema).or_else(|message| fail(name, None, message))
}

/// Rule 11: declarations that cannot mean what they say.
pub fn contradictions(name: &str, d: &Declaration) -> Rule {
    let problem = if d.read_only && (d.idempotent || d.approval_over.is_some() || d.approval) {
        Some(
            "`read_only = true` contradicts `idempotent`, `approval` and `approval_over`: remove them or set `read_only = false`",
        )
    } else if d.approval_over == Some(0) {
        Some("`approval_over = 0` would ask for approval of every call: use `approval = true`")
    } else if d.approvals == Some(0) {
        Some("`approvals = 0` means no approver: remove it (default 1)")
    } else if d.timeout_ms == Some(0) {
        Some("`timeout_ms = 0` never lets a call finish: remove it (default 30000)")
    } else if d.key_reuse == crate::spec::KeyReuse::KeyWins && !d.idempotent {
        Some("`key_reuse = \"key_wins\"` needs `idempotent = true`")
    } else if d.approval && !d.idempotent {
        Some(
            "`approval = true` needs `idempotent = true`: a pending approval is stored under the call's idempotency key, so a retry finds it instead of opening a second one",
        )
    } else {
        None
    };
    problem.map_or(Ok(()), |p| fail(name, None, p))
}

/// Rule 1: a high- or critical-risk tool that changes state must be idempotent.
pub fn high_risk_idempotent(name: &str, d: &Declaration) -> Rule {
    if d.risk >= Risk::High && !d.read_only && !d.idempotent {
        return fail(
            name,
            None,
            format!(
                "a `{}`-risk tool that changes state needs `idempotent = true` (key from the host \
                 by default), so a retried call never executes twice",
                d.risk.as_str()
            ),
        );
    }
    Ok(())
}

/// Rule 2: `approval_over` needs `idempotent` and an amount field.
pub fn approval_over_needs_amount(name: &str, d: &Declaration) -> Rule {
    if d.approval_over.is_none() {
        return Ok(());
    }
    if !d.idempotent {
        return fail(name, None, "`approval_over` needs `idempotent = true`");
    }
    if d.amount.is_none() {
        return fail(
            name,
            None,
            "`approval_over` needs `amount = \"/<field>\"` naming the integer amount field, or it would never fire",
        );
    }
    Ok(())
}

/// Rule 8: the tool needs a description; on a high-risk tool so does every property.
pub fn described(name: &str, description: &str, schema: &Value, d: &Declaration) -> Rule {
    let has = |s: Option<&str>| s.is_some_and(|s| !s.trim().is_empty());
    if !has(Some(description)) && !has(d.description.as_deref()) {
        return fail(
            name,
            None,
            "the tool has no description: add `description = \"...\"`",
        );
    }
    if d.risk < Risk::High {
        return Ok(());
    }
    for (prop, sub) in properties(schema) {
        let pointer = format!("/{prop}");
        let declared = d
            .fields
            .get(&pointer)
            .and_then(|f| f.description.as_deref());
        if !has(sub.get("description").and_then(Value::as_str)) && !has(declared) {
            return fail(
                name,
                Some(&pointer),
                "a high-risk tool needs a description of every field: add `description = \"...\"` to the field",
            );
        }
    }
    Ok(())
}

/// Rules 6, 7 and 15 and the per-field consistency checks.
fn field_rules(name: &str, schema: &Value, d: &Declaration, pointer: &str, f: &FieldDecl) -> Rule {
    let at = Some(pointer);
    let Some(prop) = pointer_property(pointer) else {
        return fail(
            name,
            at,
            "field rules take the JSON pointer of a top-level property (`/path`); a kind applies \
             to every string nested in that property",
        );
    };
    let Some(sub) = schema.get("properties").and_then(|p| p.get(&prop)) else {
        return fail(
            name,
            at,
            format!(
                "the input schema has no property `{prop}`; the properties are: {}",
                property_list(schema)
            ),
        );
    };
    if let (Some(min), Some(max)) = (f.min_len, f.max_len)
        && min > max
    {
        return fail(name, at, "`min_len` is greater than `max_len`");
    }
    if f.max_items == Some(0) || f.max_len == Some(0) {
        return fail(
            name,
            at,
            "`max_items = 0` or `max_len = 0` admits no value: give a positive bound",
        );
    }
    if f.max_items.is_some() && !has_type(sub, "array") {
        return fail(name, at, "`max_items` applies to array fields only");
    }
    if let Some(pattern) = &f.pattern {
        pattern_portable(name, pointer, pattern)?;
    }
    path_root(name, pointer, f)?;
    if f.sensitive && d.amount.as_deref() == Some(pointer) {
        return fail(
            name,
            at,
            "the amount field cannot be `sensitive`: approvers must see the amount",
        );
    }
    let url = f.kind == Some(FieldKind::Url);
    if (!f.allow_hosts.is_empty() || !f.allow_schemes.is_empty()) && !url {
        return fail(
            name,
            at,
            "`allow_hosts`/`allow_schemes` need `kind = \"url\"`",
        );
    }
    if !f.allow_domains.is_empty() && f.kind != Some(FieldKind::Email) {
        return fail(name, at, "`allow_domains` needs `kind = \"email\"`");
    }
    Ok(())
}

/// Rule 6: a path field needs an absolute root other than `/`, without `..`.
pub fn path_root(name: &str, pointer: &str, f: &FieldDecl) -> Rule {
    let is_path = f.kind == Some(FieldKind::Path);
    match (&f.root, is_path) {
        (Some(_), false) => fail(
            name,
            Some(pointer),
            "`root` applies to `kind = \"path\"` fields only",
        ),
        (None, true) => fail(
            name,
            Some(pointer),
            "a path field needs `root = \"/absolute/dir\"`: a model-chosen path must be confined below a real directory",
        ),
        (Some(root), true) => match root_problem(root) {
            Some(p) => fail(
                name,
                Some(pointer),
                format!("`root = \"{root}\"` {p}; give an absolute directory such as `/srv/data`"),
            ),
            None => Ok(()),
        },
        (None, false) => Ok(()),
    }
}

pub use toolguard_rules::root::root_problem;

/// A pattern must compile with the `regex` crate (no look-around, no back-references), so it
/// means the same to the schema validator and to every provider.
pub fn pattern_portable(name: &str, pointer: &str, pattern: &str) -> Rule {
    match regex::Regex::new(pattern) {
        Ok(_) => Ok(()),
        Err(e) => fail(
            name,
            Some(pointer),
            format!(
                "`pattern` does not compile as a portable regular expression (no look-around or back-references): {e}"
            ),
        ),
    }
}

/// Rule 3: the amount field is a non-negative integer.
pub fn amount_field(name: &str, schema: &Value, d: &Declaration) -> Rule {
    let Some(pointer) = &d.amount else {
        return Ok(());
    };
    let sub = pointer_property(pointer).and_then(|p| schema.get("properties")?.get(p).cloned());
    match sub {
        None => fail(
            name,
            Some(pointer),
            format!(
                "`amount` names no property; the properties are: {}",
                property_list(schema)
            ),
        ),
        Some(s) if !has_type(&s, "integer") => fail(
            name,
            Some(pointer),
            "the amount field must be an integer of minor units (`\"type\": \"integer\"`): floats, strings and other types would slip under limits",
        ),
        Some(_) => Ok(()),
    }
}

/// Rule 3: no property named like money may be a float (`"type": "number"`).
pub fn money_properties(name: &str, schema: &Value) -> Rule {
    for (prop, sub) in properties(schema) {
        if is_money_name(prop) && has_type(sub, "number") {
            return fail(
                name,
                Some(&format!("/{prop}")),
                "a money field must be an integer of minor units, not `\"type\": \"number\"`: the tool cannot be guarded with float amounts",
            );
        }
    }
    Ok(())
}

/// Rules 5 and 16: on a high-risk tool every string needs a length bound (unless its kind is
/// bounded) and every array an item bound, from the schema or the declaration.
pub fn high_risk_bounds(name: &str, schema: &Value, d: &Declaration) -> Rule {
    if d.risk < Risk::High {
        return Ok(());
    }
    for (prop, sub) in properties(schema) {
        let pointer = format!("/{prop}");
        let f = d.fields.get(&pointer).cloned().unwrap_or_default();
        let bounded_kind = matches!(
            f.kind,
            Some(FieldKind::Identifier | FieldKind::Email | FieldKind::Url)
        );
        if has_type(sub, "string")
            && !bounded_kind
            && f.max_len.is_none()
            && sub.get("maxLength").is_none()
        {
            return fail(
                name,
                Some(&pointer),
                "a high-risk tool needs `max_len` on every string field",
            );
        }
        if has_type(sub, "array") && f.max_items.is_none() && sub.get("maxItems").is_none() {
            return fail(
                name,
                Some(&pointer),
                "a high-risk tool needs `max_items` on every array field",
            );
        }
    }
    Ok(())
}

/// A model-supplied key field must not collide with a property of the upstream schema.
fn key_field(name: &str, schema: &Value, d: &Declaration) -> Rule {
    match &d.idempotency_key {
        KeySource::Field(f) if !d.idempotent => fail(
            name,
            None,
            format!("`idempotency_key = {{ field = \"{f}\" }}` needs `idempotent = true`"),
        ),
        KeySource::Field(f) if schema.get("properties").and_then(|p| p.get(f)).is_some() => fail(
            name,
            Some(&format!("/{f}")),
            "the key field would replace a property the upstream expects: choose another name",
        ),
        KeySource::Field(f) if !toolguard_rules::names::is_valid_tool_name(f) => fail(
            name,
            Some(&format!("/{f}")),
            "the key field name must match ^[a-zA-Z][a-zA-Z0-9_]{0,63}$",
        ),
        _ => Ok(()),
    }
}

/// Words that make a property name money-like: `total_usd`, `unitPrice`, `FEES`.
const MONEY_WORDS: [&str; 7] = [
    "amount", "price", "cost", "fee", "total", "balance", "cents",
];

/// Whether one word of `name` is a money word or its plural (the macro's rule 3).
pub fn is_money_name(name: &str) -> bool {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            words.extend((!current.is_empty()).then(|| std::mem::take(&mut current)));
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_numeric();
        current.extend(c.to_lowercase());
    }
    words.extend((!current.is_empty()).then_some(current));
    words.iter().any(|w| {
        MONEY_WORDS.contains(&w.as_str())
            || w.strip_suffix('s')
                .is_some_and(|s| MONEY_WORDS.contains(&s))
    })
}

/// The top-level properties of an object schema.
pub(crate) fn properties(schema: &Value) -> impl Iterator<Item = (&String, &Value)> {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
}

fn property_list(schema: &Value) -> String {
    let names: Vec<String> = properties(schema).map(|(p, _)| format!("`/{p}`")).collect();
    if names.is_empty() {
        "(none)".to_owned()
    } else {
        names.join(", ")
    }
}

/// Whether `schema`'s `type` is or includes `ty`.
pub(crate) fn has_type(schema: &Value, ty: &str) -> bool {
    match schema.get("type") {
        Some(Value::String(s)) => s == ty,
        Some(Value::Array(a)) => a.iter().any(|t| t.as_str() == Some(ty)),
        _ => false,
    }
}
