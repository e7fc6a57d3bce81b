//! Tools declared at run time: a [`ToolSpec`] built from a JSON Schema (e.g. the `inputSchema` an
//! MCP server announces) plus a [`Declaration`], checked by the same safety rules `#[tool]` enforces
//! at compile time ([`rules`]), and a [`RuntimeTool`] whose handler forwards the call.
//!
//! ```
//! use serde_json::json;
//! use toolguard_pipeline::declare::{Declaration, FieldDecl, declare};
//! use toolguard_pipeline::{FieldKind, Risk};
//!
//! let schema = json!({
//!     "type": "object",
//!     "properties": {"path": {"type": "string", "description": "file to read"}},
//!     "required": ["path"]
//! });
//! let mut decl = Declaration::new(Risk::Low, true);
//! decl.fields.insert(
//!     "/path".to_owned(),
//!     FieldDecl { kind: Some(FieldKind::Path), root: Some("/srv/data".into()), max_len: Some(256), ..FieldDecl::default() },
//! );
//! let spec = declare("read_file", "Reads a file.", &schema, &decl).unwrap();
//! assert_eq!(spec.input_schema["properties"]["path"]["maxLength"], 256);
//! assert!(declare("read_file", "", &schema, &Declaration::new(Risk::High, false)).is_err());
//! ```
//!
//! The `toolguard-policy` crate (`toolguard::policy`, with the facade's `policy` feature) reads
//! these declarations (and who may call what) from a TOML file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::{Egress, FieldKind, KeyReuse, Risk, ToolSpec};

pub mod rules;
mod schema;
mod tool;

pub use rules::DeclareError;
pub use tool::{ForwardFn, LabelFn, RuntimeTool};

/// Where a state-changing call's idempotency key comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum KeySource {
    /// The host supplies it (over MCP: the request's `_meta["toolguard/idempotencyKey"]`).
    #[default]
    Host,
    /// The model supplies it in this argument, which the declaration adds to the schema and which
    /// is not forwarded.
    Field(String),
}

/// What a run-time tool declares about itself, beside its JSON Schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Declaration {
    /// Replaces the description the upstream gives.
    #[serde(default)]
    pub description: Option<String>,
    /// Risk level (required).
    pub risk: Risk,
    /// Reads only (`true`) or changes state (`false`); required, never guessed.
    pub read_only: bool,
    /// State-changing calls execute at most once per idempotency key.
    #[serde(default)]
    pub idempotent: bool,
    /// Where the idempotency key comes from (default: the host).
    #[serde(default)]
    pub idempotency_key: KeySource,
    /// Reuse of a key with other arguments.
    #[serde(default)]
    pub key_reuse: KeyReuse,
    /// Every call waits for a human.
    #[serde(default)]
    pub approval: bool,
    /// Amounts strictly above this need approval (needs `amount`).
    #[serde(default)]
    pub approval_over: Option<u64>,
    /// Distinct approvers an approval needs (default 1).
    #[serde(default)]
    pub approvals: Option<u8>,
    /// JSON pointer of the amount field (`/amount`).
    #[serde(default)]
    pub amount: Option<String>,
    /// Execution deadline in milliseconds (default 30 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Per-field rules by JSON pointer of a top-level property (`/path`); a field's kind applies
    /// to every string nested in it.
    #[serde(default)]
    pub fields: BTreeMap<String, FieldDecl>,
    /// Where results come from: `"untrusted"` (the default: a forwarded result is content the
    /// caller did not produce, and becomes a provenance source of the session) or `"trusted"`
    /// (data the upstream application produced itself). See [`crate::provenance`].
    #[serde(default)]
    pub output: Option<OutputTrust>,
    /// When only part of a result holds content from outside the caller's trust: the places
    /// that do, as JSON pointers whose segments may be `*` (`["/messages/*/body"]`). The rest
    /// of the result is then the application's own data (in the precise mode its values are
    /// trusted); `output = "trusted"` beside it is a load error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted_fields: Vec<String>,
    /// Whether the tool sends data out of the tenant: `"none"` (default), `"open"`, or
    /// `"allowlisted"` (its `email`/`url` fields' `allow_domains`/`allow_hosts` restrict where).
    #[serde(default)]
    pub egress: Egress,
}

/// Where a run-time tool's results come from (`output = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputTrust {
    /// Data the application produced itself.
    Trusted,
    /// Content from outside the caller's trust.
    Untrusted,
}

impl Declaration {
    /// A declaration with the given risk and effect and nothing else.
    pub fn new(risk: Risk, read_only: bool) -> Self {
        Declaration {
            description: None,
            risk,
            read_only,
            idempotent: false,
            idempotency_key: KeySource::Host,
            key_reuse: KeyReuse::Conflict,
            approval: false,
            approval_over: None,
            approvals: None,
            amount: None,
            timeout_ms: None,
            fields: BTreeMap::new(),
            output: None,
            untrusted_fields: Vec::new(),
            egress: Egress::None,
        }
    }
}

/// Rules of one argument field of a run-time tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct FieldDecl {
    /// What the field holds (default `text` for strings).
    #[serde(default)]
    pub kind: Option<FieldKind>,
    /// Description for the model (replaces the schema's).
    #[serde(default)]
    pub description: Option<String>,
    /// Redacted in audit entries.
    #[serde(default)]
    pub sensitive: bool,
    /// Minimum length in characters.
    #[serde(default)]
    pub min_len: Option<u64>,
    /// Maximum length in characters.
    #[serde(default)]
    pub max_len: Option<u64>,
    /// Maximum number of items of an array field.
    #[serde(default)]
    pub max_items: Option<u64>,
    /// Regular expression the whole value must match.
    #[serde(default)]
    pub pattern: Option<String>,
    /// Confinement root of a `path` field (absolute). The model sends paths relative to it; the
    /// forwarded value is the root joined with the checked relative path.
    #[serde(default)]
    pub root: Option<String>,
    /// E-mail recipient domains allowed (`*.example.com` for sub-domains).
    #[serde(default)]
    pub allow_domains: Vec<String>,
    /// URL hosts allowed (`*.example.com` for sub-domains).
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    /// URL schemes allowed (default `https`, `http`).
    #[serde(default)]
    pub allow_schemes: Vec<String>,
    /// What the field does in the action (`destination`, `amount`, `content`, `selector`), for
    /// provenance per argument; default: by its kind (see [`crate::spec::FieldSpec::role`]).
    #[serde(default)]
    pub role: Option<crate::spec::Role>,
    /// `identity = false`: the field is named like identity or authority (an e-mail's
    /// `subject`, a third party's `user`) but is not the caller's identity; with a declared
    /// `kind` it is judged by that kind instead of refused. Undeclared, the identity rule
    /// applies.
    #[serde(default)]
    pub identity: Option<bool>,
    /// Decimal places of a `money` field sent as a JSON number in major units (`12.34` with
    /// `scale = 2` is 1234 minor units), read exactly from the number's text; needs `currency`.
    #[serde(default)]
    pub scale: Option<u8>,
    /// ISO 4217 code of a scaled `money` field (`"USD"`).
    #[serde(default)]
    pub currency: Option<String>,
    /// Scheme of a `url` field's value written without one (`"https"`: `www.example.com/x` is
    /// read as `https://www.example.com/x`).
    #[serde(default)]
    pub default_scheme: Option<String>,
    /// `"upstream"`: a `path` field names something in the upstream's own namespace (relative,
    /// normalized, no `..`, no absolute path), with no root on the gateway's host.
    #[serde(default)]
    pub namespace: Option<PathNamespace>,
    /// When the tool sends data out through this field: `egress = true`, only when it is set
    /// (not absent, null, empty), so a call without it is not egress; `egress = "outside"`,
    /// only when it carries an address outside [`internal`](Self::internal). Needs the tool's
    /// `egress`.
    #[serde(default)]
    pub egress: FieldEgress,
    /// With `egress = "outside"`: the hosts and e-mail domains that stay inside
    /// (`"example.com"`, `"*.example.com"` for its sub-domains). A value naming any other
    /// address, or none that can be read, makes the call egress.
    #[serde(default)]
    pub internal: Vec<String>,
}

/// A field's `egress = ...`: when a call sends data out through it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FieldEgress {
    /// `false` (the default): the field says nothing of egress.
    #[default]
    Unmarked,
    /// `true`: the tool sends data out only when this field is set.
    WhenSet,
    /// `"outside"`: only when the field carries an address outside the internal set.
    Outside,
}

impl FieldEgress {
    /// Whether the field marks when the tool sends data out (`true` or `"outside"`).
    pub fn is_marked(self) -> bool {
        self != FieldEgress::Unmarked
    }
}

impl Serialize for FieldEgress {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            FieldEgress::Unmarked => s.serialize_bool(false),
            FieldEgress::WhenSet => s.serialize_bool(true),
            FieldEgress::Outside => s.serialize_str("outside"),
        }
    }
}

impl<'de> Deserialize<'de> for FieldEgress {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = FieldEgress;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("`true`, `false` or `\"outside\"`")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<FieldEgress, E> {
                Ok(if v {
                    FieldEgress::WhenSet
                } else {
                    FieldEgress::Unmarked
                })
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<FieldEgress, E> {
                match v {
                    "outside" => Ok(FieldEgress::Outside),
                    other => Err(E::custom(format!(
                        "a field's `egress = \"{other}\"`: give `true` (egress when the field \
                         is set) or `\"outside\"` (egress when it names an address outside \
                         `internal`)"
                    ))),
                }
            }
        }
        d.deserialize_any(Visit)
    }
}

/// Whose namespace a `path` field's values name (`namespace = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PathNamespace {
    /// The upstream server's own (virtual) names: no root on the gateway's host.
    Upstream,
}

/// Builds the [`ToolSpec`] of tool `name` from its JSON Schema and `decl`, after checking every
/// rule of [`rules`]. The input schema is tightened by the declaration (lengths, patterns, item
/// bounds, amount minimum, the key field, `additionalProperties: false`).
pub fn declare(
    name: &str,
    description: &str,
    input_schema: &Value,
    decl: &Declaration,
) -> Result<ToolSpec, DeclareError> {
    rules::check(name, description, input_schema, decl)?;
    let schema = schema::tighten(input_schema, decl);
    let mut spec = ToolSpec::new(
        name,
        decl.description
            .clone()
            .unwrap_or_else(|| description.to_owned()),
        schema,
        Value::Bool(true),
    );
    spec.risk = decl.risk;
    spec.read_only = decl.read_only;
    spec.idempotent = decl.idempotent;
    spec.key_reuse = decl.key_reuse;
    spec.idempotency_key_field = match &decl.idempotency_key {
        KeySource::Field(f) if decl.idempotent => Some(f.clone()),
        _ => None,
    };
    spec.approval_over = decl.approval_over;
    spec.approvals = decl.approvals.unwrap_or(1);
    if let Some(ms) = decl.timeout_ms {
        spec.timeout = std::time::Duration::from_millis(ms);
    }
    spec.fields = schema::field_specs(&spec.input_schema, decl);
    spec.untrusted_output = decl.output != Some(OutputTrust::Trusted);
    spec.untrusted_fields.clone_from(&decl.untrusted_fields);
    spec.output_declared = decl.output.is_some() || !decl.untrusted_fields.is_empty();
    spec.egress = decl.egress;
    spec.revision = schema::revision_of(&spec);
    Ok(spec)
}

/// The top-level property a field pointer names (`/path` → `path`), if it is one segment.
pub fn pointer_property(pointer: &str) -> Option<String> {
    let rest = pointer.strip_prefix('/')?;
    if rest.is_empty() || rest.contains('/') {
        return None;
    }
    Some(rest.replace("~1", "/").replace("~0", "~"))
}
