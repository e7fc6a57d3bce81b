//! What a tool declares about itself: [`ToolSpec`], its [`Risk`] and the per-field rules
//! ([`FieldSpec`]). The `#[tool]` macro builds these; hand-written tools may too.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::{Status, Stop};

/// How much harm a wrong call of the tool can do: defined once, in `toolguard-rules` (which the
/// `#[tool]` macro and the declaration rules read), and serialized in snake case (`"low"`,
/// `"high"`).
pub use toolguard_rules::Risk;

pub use toolguard_rules::Role;
pub use toolguard_rules::names::is_valid_tool_name;
pub use toolguard_sanitize::FieldKind;

/// Rules of one argument field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub struct FieldSpec {
    /// Field name as it appears in the arguments object.
    pub name: String,
    /// What the field holds.
    pub kind: FieldKind,
    /// Description for the model.
    pub description: Option<String>,
    /// Redacted in audit entries.
    pub sensitive: bool,
    /// The amount field that `approval_over` and session limits measure.
    pub amount: bool,
    /// Not required.
    pub optional: bool,
    /// Minimum length in characters.
    pub min_len: Option<u64>,
    /// Maximum length in characters.
    pub max_len: Option<u64>,
    /// Regular expression the value must match.
    pub pattern: Option<String>,
    /// Inclusive minimum of a number.
    pub min: Option<f64>,
    /// Inclusive maximum of a number.
    pub max: Option<f64>,
    /// Confinement root of a path field.
    pub root: Option<String>,
    /// What the field does in the action (provenance per argument); `None`: the default of its
    /// kind ([`Role::default_for`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Decimal places of a money field sent as a number in major units: its value is read
    /// exactly as an integer of minor units ([`measure_amount`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<u8>,
    /// Currency (ISO 4217) of a scaled money field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// Scheme a `url` value written without one is read with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_scheme: Option<String>,
    /// A `path` field in the upstream's own namespace: relative and normalized, no root.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub upstream_namespace: bool,
    /// The tool sends data out only when this field is set (not absent, null or empty).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub egress_when: bool,
    /// With `egress_when`: the hosts and e-mail domains that stay inside (`egress = "outside"`);
    /// the field sends data out only when it carries an address outside them. Empty: whenever
    /// it is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress_internal: Vec<String>,
    /// Declared as not the caller's identity although named like it (`identity = false`): a
    /// field of someone else's server, judged by its kind ([`check_identity_of`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_identity: bool,
}

impl FieldSpec {
    /// A text field called `name` with no constraints.
    pub fn new(name: impl Into<String>) -> Self {
        FieldSpec {
            name: name.into(),
            ..FieldSpec::default()
        }
    }

    /// This field with kind `kind`.
    #[must_use]
    pub fn with_kind(mut self, kind: FieldKind) -> Self {
        self.kind = kind;
        self
    }
}

impl FieldSpec {
    /// The field's role: declared, or the default of its kind (e-mail and URL: destination;
    /// money or the amount field: amount; text: content; anything else: selector).
    pub fn role(&self) -> Role {
        self.role.unwrap_or(match self.kind {
            _ if self.amount => Role::Amount,
            FieldKind::Email | FieldKind::Url => Role::Destination,
            FieldKind::Money => Role::Amount,
            FieldKind::Text => Role::Content,
            _ => Role::Selector,
        })
    }
}

impl toolguard_sanitize::FieldRule for FieldSpec {
    fn name(&self) -> &str {
        &self.name
    }
    fn kind(&self) -> FieldKind {
        self.kind
    }
    fn max_len(&self) -> Option<u64> {
        self.max_len
    }
    fn root(&self) -> Option<&str> {
        self.root.as_deref()
    }
    fn default_scheme(&self) -> Option<&str> {
        self.default_scheme.as_deref()
    }
    fn upstream_namespace(&self) -> bool {
        self.upstream_namespace
    }
    fn scale(&self) -> Option<u8> {
        self.scale
    }
}

/// What happens when an idempotency key is reused with different arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KeyReuse {
    /// `idempotency_conflict`, as payment APIs do.
    #[default]
    Conflict,
    /// The first outcome is returned again; the new arguments are ignored.
    KeyWins,
}

/// Whether a tool sends data to a destination outside the tenant (mail, an HTTP request, a
/// webhook, a fetched URL whose query can carry data); see [`crate::provenance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Egress {
    /// No data leaves the tenant.
    #[default]
    None,
    /// Data leaves to the destinations its `email`/`url` fields name, each restricted by a
    /// sanitizer allowlist (checked when the dispatcher is built).
    Allowlisted,
    /// Data leaves to any destination its arguments name.
    Open,
}

/// Everything the dispatcher knows about a tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolSpec {
    /// Name the model calls the tool by.
    pub name: String,
    /// Description for the model.
    pub description: String,
    /// JSON Schema (draft 2020-12) of the arguments object.
    pub input_schema: Value,
    /// JSON Schema of the result.
    pub output_schema: Value,
    /// Risk level.
    pub risk: Risk,
    /// Reads only; no side effect.
    pub read_only: bool,
    /// State-changing calls carry an idempotency key and execute at most once per key.
    pub idempotent: bool,
    /// Reuse of a key with other arguments.
    pub key_reuse: KeyReuse,
    /// Argument field that carries the model-supplied idempotency key (`None`: the host supplies
    /// it on the [`crate::ToolCall`]). The field is not passed to the handler.
    pub idempotency_key_field: Option<String>,
    /// Amounts strictly above this need approval.
    pub approval_over: Option<u64>,
    /// Distinct approvers an approval needs.
    pub approvals: u8,
    /// Execution deadline.
    pub timeout: Duration,
    /// Revision of the tool's contract (input/output schema and effect); raise it on any change.
    pub revision: u32,
    /// Per-field rules, in declaration order.
    pub fields: Vec<FieldSpec>,
    /// The result carries content from outside the caller's trust (mail, web pages, documents,
    /// search results, other users' text): an `ok` result becomes a provenance source of the
    /// session ([`crate::provenance`]).
    #[serde(default)]
    pub untrusted_output: bool,
    /// When only part of the result holds such content: the places that do, as JSON pointers
    /// whose segments may be `*` (`/transactions/*/subject`, see
    /// [`toolguard_rules::result_path`]). Only these become the session's source; the rest of
    /// the result is the application's own data and, in the precise mode, records trusted
    /// values. Empty: all of an untrusted result is untrusted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted_fields: Vec<String>,
    /// Whether the declaration says where the result comes from (`output = "trusted"` or
    /// `"untrusted"`). A read-only tool whose output schema can carry free-form text must say
    /// it: without it the dispatcher is not built (rule 20, read from the schema by
    /// `toolguard_rules::schema::free_text`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub output_declared: bool,
    /// Whether the tool sends data out of the tenant.
    #[serde(default)]
    pub egress: Egress,
}

impl ToolSpec {
    /// Default execution deadline.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// A low-risk spec with the given name, description and schemas.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        output_schema: Value,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema,
            risk: Risk::Low,
            read_only: false,
            idempotent: false,
            key_reuse: KeyReuse::Conflict,
            idempotency_key_field: None,
            approval_over: None,
            approvals: 1,
            timeout: Self::DEFAULT_TIMEOUT,
            revision: 1,
            fields: Vec::new(),
            untrusted_output: false,
            untrusted_fields: Vec::new(),
            output_declared: false,
            egress: Egress::None,
        }
    }

    /// The rules of field `name`.
    pub fn field(&self, name: &str) -> Option<&FieldSpec> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// The field measured by `approval_over` and session limits.
    pub fn amount_field(&self) -> Option<&FieldSpec> {
        self.fields
            .iter()
            .find(|f| f.amount)
            .or_else(|| self.fields.iter().find(|f| f.name == "amount"))
    }
}

impl toolguard_sanitize::ToolRules for ToolSpec {
    type Field = FieldSpec;
    fn tool_name(&self) -> &str {
        &self.name
    }
    fn input_schema(&self) -> &Value {
        &self.input_schema
    }
    fn field_rule(&self, name: &str) -> Option<&FieldSpec> {
        self.field(name)
    }
}

/// The amount a call moves: the amount field as an integer, or an object's `amount` member.
/// `None` when there is no amount field, it is absent, or it cannot be read (see
/// [`measure_amount`], which the risk policy uses and which fails closed on the latter).
pub fn amount_of(spec: &ToolSpec, args: &Value) -> Option<u64> {
    measure_amount(spec, args).ok().flatten()
}

/// The kind of amount a call moves: the currency beside the amount (the amount object's
/// `currency` member, or the call's `currency` argument), lower-cased; `""` for an amount
/// without one. Tools that move amounts of one kind are counted together where amounts are
/// summed across tools (detection's `structuring`).
pub fn amount_kind(spec: &ToolSpec, args: &Value) -> String {
    let Some(field) = spec.amount_field() else {
        return String::new();
    };
    let nested = args
        .get(&field.name)
        .and_then(|v| v.get("currency"))
        .and_then(Value::as_str);
    nested
        .or_else(|| args.get("currency").and_then(Value::as_str))
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// The amount a call moves, failing closed: `Ok(None)` when the tool has no amount field or the
/// call leaves it out (or null); `policy_denied` (reason `amount_unreadable`) when the value is
/// not a non-negative integer amount (negative, fractional, a string, another shape), so that
/// it is never counted as 0.
pub fn measure_amount(spec: &ToolSpec, args: &Value) -> Result<Option<u64>, Stop> {
    let Some(field) = spec.amount_field() else {
        return Ok(None);
    };
    let value = match args.get(&field.name) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(m)) => m.get("amount"),
        Some(v) => Some(v),
    };
    if let (Some(scale), Some(Value::Number(n))) = (field.scale, value) {
        return scaled_amount(field, n, scale).map(Some);
    }
    match value.and_then(Value::as_u64) {
        Some(amount) => Ok(Some(amount)),
        None => Err(Stop::new(
            Status::PolicyDenied,
            "amount_unreadable",
            "the amount of this call cannot be read as a non-negative integer; nothing was done",
        )),
    }
}

/// A scaled amount (a number in major units, `scale` decimal places) in minor units, read from
/// the number's decimal text (the text the call is forwarded with), never through float
/// arithmetic: `invalid_arguments` with the reason of [`DecimalError`] when it is negative, has
/// more decimals than the scale allows, or is too large to be read exactly.
///
/// [`DecimalError`]: toolguard_sanitize::kinds::DecimalError
fn scaled_amount(field: &FieldSpec, n: &serde_json::Number, scale: u8) -> Result<u64, Stop> {
    use toolguard_sanitize::kinds::{DecimalError, MAX_SIGNIFICANT_DIGITS, minor_units};
    let text = n.to_string();
    minor_units(&text, scale).map_err(|e| {
        let currency = field.currency.as_deref().unwrap_or("");
        let why = match e {
            DecimalError::TooPrecise => format!(
                "has more than {scale} decimal places, which {currency} amounts do not have"
            ),
            DecimalError::Negative => "is negative".to_owned(),
            DecimalError::TooLarge => format!(
                "is too large to be read exactly (at most {MAX_SIGNIFICANT_DIGITS} significant \
                 digits)"
            ),
            _ => "is not a decimal number".to_owned(),
        };
        Stop::new(
            Status::InvalidArguments,
            e.code(),
            format!(
                "the amount `{}` = {text} {why}; nothing was done",
                field.name
            ),
        )
    })
}

/// Whether an argument property named `name` would let the model claim identity or authority,
/// which only the authenticated [`crate::Principal`] may carry (rule 4 of `RULES.md`, shared
/// with the `#[tool]` macro through `toolguard-rules`). Names are compared after removing case
/// and separators (`TenantId`, `tenant_ids`, `USERS`); longer words that merely start with an
/// identity word (`subject_line`, `username_hint`) are ordinary names.
pub fn is_identity_name(name: &str) -> bool {
    toolguard_rules::names::is_identity_name(name)
}

/// Rule 20 on the output schema: a read-only tool whose result can carry free-form text (any
/// string reachable in it that nothing confines, see [`toolguard_rules::schema::free_text`])
/// must declare where the text comes from; otherwise the message names the tool, the path of
/// the text in the result and the fix. Tools declared untrusted are not asked.
pub fn check_output_trust(spec: &ToolSpec) -> Result<(), String> {
    for pointer in &spec.untrusted_fields {
        toolguard_rules::result_path::parse(pointer)
            .map_err(|e| format!("`untrusted_fields` of tool `{}`: {e}", spec.name))?;
    }
    if !spec.untrusted_fields.is_empty() && !spec.untrusted_output {
        return Err(format!(
            "tool `{}` lists `untrusted_fields` but its output is not untrusted: set \
             `untrusted_output` (the fields listed are the untrusted places of its result)",
            spec.name
        ));
    }
    if !spec.read_only || spec.output_declared || spec.untrusted_output {
        return Ok(());
    }
    let Some(path) = toolguard_rules::schema::free_text(&spec.output_schema) else {
        return Ok(());
    };
    let at = if path.is_empty() {
        "its result".to_owned()
    } else {
        format!("its result at `{path}`")
    };
    Err(format!(
        "read-only tool `{}` returns free-form text ({at}), which may carry someone else's \
         words into the model's context: declare where it comes from, `output = \"untrusted\"` \
         for mail, web pages, documents, search results or other users' text (the session then \
         records it as a provenance source), or `output = \"trusted\"` for text the \
         application produced itself (rule 20)",
        spec.name
    ))
}

/// Refuses an input schema that has a property named like identity or authority (see
/// [`is_identity_name`]) at any depth: in nested objects, array items and `$defs`, under the
/// name the model sees (after serde renames).
pub fn check_identity_properties(schema: &Value) -> Result<(), String> {
    match toolguard_rules::schema::identity_property(schema) {
        Some(path) => Err(format!(
            "argument property `{path}` is named like identity or authority, which the model \
             must never supply: take it from the authenticated principal (`ToolContext`) and \
             remove or rename the property"
        )),
        None => Ok(()),
    }
}

/// [`check_identity_properties`] of `spec`'s input schema, passing over its top-level fields
/// declared as not the caller's identity ([`FieldSpec::not_identity`]).
pub fn check_identity_of(spec: &ToolSpec) -> Result<(), String> {
    let declared: Vec<&str> = spec
        .fields
        .iter()
        .filter(|f| f.not_identity)
        .map(|f| f.name.as_str())
        .collect();
    match toolguard_rules::schema::identity_property_except(&spec.input_schema, &declared) {
        Some(path) => Err(format!(
            "argument property `{path}` is named like identity or authority, which the model \
             must never supply: take it from the authenticated principal (`ToolContext`) and \
             remove or rename the property, or, for a field of someone else's server that is \
             not the caller's identity, declare it `identity = false` with its `kind`"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::check_identity_properties;

    #[test]
    fn nested_identity_property() {
        let schema = json!({
            "type": "object",
            "properties": {
                "order": {"$ref": "#/$defs/Order"},
                "lines": {"type": "array", "items": {"type": "object", "properties": {
                    "sku": {"type": "string"}
                }}}
            },
            "$defs": {"Order": {"type": "object", "properties": {
                "meta": {"type": "object", "properties": {"ownerId": {"type": "string"}}}
            }}}
        });
        let err = check_identity_properties(&schema).unwrap_err();
        assert!(err.contains("`$defs.Order.meta.ownerId`"), "{err}");
        let fine = json!({"type": "object", "properties": {"subject_line": {"type": "string"}}});
        assert_eq!(check_identity_properties(&fine), Ok(()));
    }
}
