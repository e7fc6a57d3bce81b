//! The rules over one tool declaration, as a small model that both the `#[tool]` macro (from a
//! function signature) and a run-time declaration (from a JSON Schema and a declaration, e.g. a
//! policy file) fill in.
//!
//! [`check`] returns every [`Violation`], each naming the [`Site`] it concerns (an option, a
//! field's name or type) so that the macro reports it on that span and a loader on that key.
//! Every rule is written once, here: the macro and run-time declarations meet the same
//! conditions and read the same diagnosis. Only the fix is spelt for where the declaration is
//! written ([`Syntax`]): as the macro's attributes (`#[arg(max_len = N)]`, a doc comment) or as
//! keys (`max_len = N`, `idempotent = true`).
//!
//! ```
//! use toolguard_rules::decl::{check, FieldDecl, Scalar, Site, ToolDecl};
//! use toolguard_rules::{Kind, Risk};
//!
//! let mut tool = ToolDecl::new("send_note", Some("Sends a note.".into()));
//! tool.risk = Risk::High;
//! let mut body = FieldDecl::new("body", Kind::Text, Scalar::Text);
//! body.description = Some("The note's text.".into());
//! tool.fields.push(body);
//! let found = check(&tool);
//! // Rule 1 (`idempotent`) and rule 5 (`max_len`) are broken.
//! assert_eq!(found.iter().map(|v| v.rule).collect::<Vec<_>>(), [1, 5]);
//! assert_eq!(found[1].site, Site::FieldType(0));
//! assert!(found[1].message.contains("Add `max_len = N`"));
//! ```

use crate::kinds::{Kind, Risk};
use crate::names::{
    is_identity_name, is_money_name, is_valid_argument_name, is_valid_tool_name, suggest_tool_name,
};
use crate::pattern::{self, PatternProblem};
use crate::root::root_problem;

/// The argument `idempotent` adds to the schema when the model sends the key.
pub const KEY_FIELD: &str = "idempotency_key";

/// Where an idempotency key comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// An argument the model sends (added to the schema): `idempotency_key`, or the one
    /// [`ToolDecl::key_field`] names.
    Argument,
    /// The host puts it on the call; no argument is added.
    Host,
}

/// Where a tool's result comes from (`output = "..."`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputTrust {
    /// Data the application produced itself (balances, ids, statuses).
    Trusted,
    /// Content from outside the caller's trust (mail, web pages, documents, search results,
    /// other users' text): every `ok` result becomes a provenance source of the session.
    Untrusted,
}

impl OutputTrust {
    /// The spellings `output = "..."` accepts.
    pub const NAMES: [&'static str; 2] = ["trusted", "untrusted"];

    /// The trust spelt `name`, if it is one of [`Self::NAMES`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "trusted" => Some(OutputTrust::Trusted),
            "untrusted" => Some(OutputTrust::Untrusted),
            _ => None,
        }
    }
}

/// Whether and where a tool sends data out of the tenant (`egress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressDecl {
    /// `egress`: to any destination its arguments name.
    Open,
    /// `egress = "allowlisted"`: only to destinations its `email`/`url` fields' allowlists admit.
    Allowlisted,
}

/// The JSON value a field holds, after looking through `Option` and collections (the element of
/// a `Vec<String>` is `Text`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// A string.
    Text,
    /// A file-system path (`PathBuf`, `&Path`).
    Path,
    /// An integer.
    Integer,
    /// A floating-point number.
    Float,
    /// A boolean.
    Boolean,
    /// Anything else (an enum, a struct, a newtype such as `Email`; a JSON object, a `$ref`, a
    /// property without a type), or not known (a declaration checked without its schema).
    Other,
}

/// What kind of collection a field is, after looking through `Option`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    /// A JSON array: `Vec`, `VecDeque`, sets, slices (`maxItems`).
    Sequence,
    /// A JSON object of arbitrary keys: `HashMap`, `BTreeMap` (`maxProperties`).
    Map,
}

/// One argument field.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldDecl {
    /// Its name in the arguments object.
    pub name: String,
    /// Its description for the model.
    pub description: Option<String>,
    /// Its kind: declared, or inferred from its type.
    pub kind: Kind,
    /// A refused kind spelling (`shell`, `sql`), if one was given.
    pub refused_kind: Option<String>,
    /// What each value holds.
    pub scalar: Scalar,
    /// Whether it is a collection of such values.
    pub collection: Option<Collection>,
    /// Declared as the amount: `#[arg(amount)]` or a parameter named `amount` (the macro),
    /// `amount = "/<field>"` (a run-time declaration, which never guesses it from a name).
    pub amount: bool,
    /// Redacted in audit entries and previews.
    pub sensitive: bool,
    /// Confinement root of a path.
    pub root: Option<String>,
    /// The field's type confines its paths itself (`SafePath` in the macro), so a path field
    /// needs no `root`.
    pub confined: bool,
    /// Minimum length of a string.
    pub min_len: Option<u64>,
    /// Maximum length of a string.
    pub max_len: Option<u64>,
    /// Pattern of a string.
    pub pattern: Option<String>,
    /// Minimum of a number.
    pub min: Option<f64>,
    /// Maximum of a number.
    pub max: Option<f64>,
    /// Maximum number of items of a collection.
    pub max_items: Option<u64>,
    /// An allowlist of e-mail recipient domains is declared (`allow_domains`, run time).
    pub allow_domains: bool,
    /// An allowlist of URL hosts or schemes is declared (`allow_hosts`/`allow_schemes`, run
    /// time).
    pub allow_hosts: bool,
    /// Declared as not the caller's identity (`identity = false`, run time): a field of someone
    /// else's server named like identity (an e-mail's `subject`, a third party's `user`) that
    /// holds what its declared kind says. The identity-name rule (4) passes over it.
    pub not_identity: bool,
    /// Decimal places of a money field sent as a JSON number in major units (`scale = 2`, run
    /// time): read exactly as an integer of minor units, so a float type is no longer refused.
    pub scale: Option<u8>,
    /// The declared currency of a scaled money field (`currency = "USD"`, run time).
    pub currency: Option<String>,
    /// The kind was declared, not inferred from the type (run time: `kind = "..."`).
    pub kind_declared: bool,
    /// The scheme a URL written without one is read with (`default_scheme = "https"`, run
    /// time).
    pub default_scheme: Option<String>,
    /// A path in the upstream's own namespace (`namespace = "upstream"`, run time): relative,
    /// normalized, no traversal, and no root on the gateway's host.
    pub upstream_namespace: bool,
    /// The tool sends data out only when this field is set (`egress = true`, run time).
    pub egress_when: bool,
    /// The tool sends data out only when this field names an address outside the declared
    /// internal hosts and domains (`egress = "outside"`, run time).
    pub egress_outside: bool,
    /// Internal hosts and e-mail domains are declared (`internal = [...]`, run time).
    pub internal: bool,
}

impl FieldDecl {
    /// A field with no options.
    pub fn new(name: impl Into<String>, kind: Kind, scalar: Scalar) -> Self {
        FieldDecl {
            name: name.into(),
            description: None,
            kind,
            refused_kind: None,
            scalar,
            collection: None,
            amount: false,
            sensitive: false,
            root: None,
            confined: false,
            min_len: None,
            max_len: None,
            pattern: None,
            min: None,
            max: None,
            max_items: None,
            allow_domains: false,
            allow_hosts: false,
            not_identity: false,
            scale: None,
            currency: None,
            kind_declared: false,
            default_scheme: None,
            upstream_namespace: false,
            egress_when: false,
            egress_outside: false,
            internal: false,
        }
    }
}

/// One tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDecl {
    /// The name the model calls it by.
    pub name: String,
    /// Its description for the model.
    pub description: Option<String>,
    /// Its risk level.
    pub risk: Risk,
    /// `read_only`.
    pub read_only: bool,
    /// `idempotent`, and where the key comes from.
    pub idempotent: Option<KeySource>,
    /// The argument that carries a model-sent key, when declared by name (a run-time
    /// `idempotency_key = { field = "..." }`); `None` means [`KEY_FIELD`]. Declared on a tool
    /// that is not `idempotent`, it is a contradiction.
    pub key_field: Option<String>,
    /// `key_wins` (`key_reuse = "key_wins"`).
    pub key_wins: bool,
    /// Every call waits for a human (a run-time `approval = true`).
    pub approval: bool,
    /// `approval_over`.
    pub approval_over: Option<u64>,
    /// `approvals`.
    pub approvals: Option<u64>,
    /// `timeout_ms`.
    pub timeout_ms: Option<u64>,
    /// `revision`.
    pub revision: Option<u64>,
    /// `output = "trusted"` / `"untrusted"`, if declared.
    pub output: Option<OutputTrust>,
    /// `egress` / `egress = "allowlisted"`, if declared.
    pub egress: Option<EgressDecl>,
    /// `untrusted_fields = ["/pointer", ...]`: the places of the result that hold content from
    /// outside the caller's trust, when only part of it does ([`crate::result_path`]). Declares
    /// where the result comes from, as `output` does.
    pub untrusted_fields: Vec<String>,
    /// The result is free-form text (a `String` or JSON value result in the macro; a string
    /// without `enum`/`format`/`pattern`/`maxLength` in a run-time output schema).
    pub returns_text: bool,
    /// The compiler checks the amount field's type (the macro asserts `AmountType` on it, after
    /// type aliases are resolved), so the rules report a float amount (rule 3) but leave the
    /// rest of the integer check to it. A run-time declaration leaves it `false`: its amount
    /// must be an integer property.
    pub compiler_checks_amount: bool,
    /// The argument fields, in order (without the key argument that `idempotent` adds).
    pub fields: Vec<FieldDecl>,
}

impl ToolDecl {
    /// A low-risk tool with no options and no fields.
    pub fn new(name: impl Into<String>, description: Option<String>) -> Self {
        ToolDecl {
            name: name.into(),
            description,
            risk: Risk::Low,
            read_only: false,
            idempotent: None,
            key_field: None,
            key_wins: false,
            approval: false,
            approval_over: None,
            approvals: None,
            timeout_ms: None,
            revision: None,
            output: None,
            egress: None,
            untrusted_fields: Vec::new(),
            returns_text: false,
            compiler_checks_amount: false,
            fields: Vec::new(),
        }
    }

    /// The index of the amount field: the first one declared as the amount
    /// ([`FieldDecl::amount`]).
    pub fn amount_field(&self) -> Option<usize> {
        self.fields.iter().position(|f| f.amount)
    }

    /// Whether the result holds content from outside the caller's trust, whole
    /// (`output = "untrusted"`) or in the places `untrusted_fields` names.
    pub fn untrusted_output(&self) -> bool {
        self.output == Some(OutputTrust::Untrusted) || !self.untrusted_fields.is_empty()
    }

    /// The argument a model-sent idempotency key travels in, if the model sends one.
    pub fn key_argument(&self) -> Option<&str> {
        (self.idempotent == Some(KeySource::Argument))
            .then(|| self.key_field.as_deref().unwrap_or(KEY_FIELD))
    }
}

/// What a violation concerns, so that it is reported on the right token or key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    /// The tool as a whole (the function's name).
    Tool,
    /// Where the tool's name is given.
    ToolName,
    /// A tool option, by key (`risk`, `approval_over`, ...).
    ToolOption(&'static str),
    /// A field as a whole.
    Field(usize),
    /// A field's name.
    FieldName(usize),
    /// A field's type.
    FieldType(usize),
    /// A field option, by key (`max_len`, `root`, ...).
    FieldOption(usize, &'static str),
}

impl Site {
    /// The index of the field it concerns, if it concerns one.
    pub fn field(self) -> Option<usize> {
        match self {
            Site::Field(i) | Site::FieldName(i) | Site::FieldType(i) | Site::FieldOption(i, _) => {
                Some(i)
            }
            Site::Tool | Site::ToolName | Site::ToolOption(_) => None,
        }
    }
}

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Violation {
    /// The rule's number in `RULES.md` (0 for the consistency checks listed below the table).
    pub rule: u8,
    /// What it concerns.
    pub site: Site,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// How messages spell an option in their fixes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Syntax {
    /// As a key: `max_len = N`, `idempotent = true` (run-time declarations, policy files).
    #[default]
    Keys,
    /// As the macro's attribute: `#[arg(max_len = N)]`, `#[tool(name = "..")]`.
    Attributes,
}

impl Syntax {
    /// `attributes` for the macro, `keys` for a run-time declaration: the fixes that differ
    /// by more than an option's spelling (a doc comment, a parameter type, `idempotent = true`).
    pub fn pick<T>(self, attributes: T, keys: T) -> T {
        match self {
            Syntax::Attributes => attributes,
            Syntax::Keys => keys,
        }
    }

    /// An option as the fix should spell it: `max_len = N` or `#[arg(max_len = N)]`.
    pub fn opt(self, attr: &str, option: &str) -> String {
        match self {
            Syntax::Keys => format!("`{option}`"),
            Syntax::Attributes => format!("`#[{attr}({option})]`"),
        }
    }
}

/// Collects violations.
struct Found {
    syntax: Syntax,
    /// The fields' types and descriptions are known (false: a declaration checked without the
    /// schema it will apply to).
    typed: bool,
    found: Vec<Violation>,
}

impl Found {
    fn new(syntax: Syntax, typed: bool) -> Self {
        Found {
            syntax,
            typed,
            found: Vec::new(),
        }
    }

    fn push(&mut self, rule: u8, site: Site, message: impl Into<String>) {
        self.found.push(Violation {
            rule,
            site,
            message: message.into(),
        });
    }

    fn opt(&self, attr: &str, option: &str) -> String {
        self.syntax.opt(attr, option)
    }

    fn pick<T>(&self, attributes: T, keys: T) -> T {
        self.syntax.pick(attributes, keys)
    }
}

/// Every rule broken by `tool`, tool-level rules first, then each field's in order; fixes name
/// options as keys (`max_len = N`).
pub fn check(tool: &ToolDecl) -> Vec<Violation> {
    check_with(tool, Syntax::Keys)
}

/// [`check`], with fixes spelt in `syntax`.
pub fn check_with(tool: &ToolDecl, syntax: Syntax) -> Vec<Violation> {
    let mut found = Found::new(syntax, true);
    all_rules(tool, &mut found);
    found.found
}

/// The rules that need only what a declaration says of itself, not the types or descriptions of
/// its fields: what a policy file checks when it is loaded, before the upstream's schema is
/// known. `tool.fields` holds the declared fields (their [`Scalar`] is not read); the rules on
/// descriptions (8), float or non-integer amounts (3), missing bounds (5, 16) and constraints
/// that do not fit a field's type wait for [`check_with`] on the whole declaration.
pub fn check_declared(tool: &ToolDecl, syntax: Syntax) -> Vec<Violation> {
    let mut found = Found::new(syntax, false);
    all_rules(tool, &mut found);
    found.found
}

fn all_rules(tool: &ToolDecl, found: &mut Found) {
    identity_and_description(tool, found);
    contradictions(tool, found);
    approvals(tool, found);
    data_flow_rules(tool, found);
    key_argument(tool, found);
    for (i, field) in tool.fields.iter().enumerate() {
        field_rules(tool, i, field, found);
    }
}

/// Rules 8 and 9 on the tool, and rule 1.
fn identity_and_description(tool: &ToolDecl, found: &mut Found) {
    let name = &tool.name;
    if found.typed
        && tool
            .description
            .as_deref()
            .is_none_or(|d| d.trim().is_empty())
    {
        let opt = found.opt("tool", "description = \"...\"");
        let fix = found.pick(
            format!(
                "Add a doc comment (`/// What it does, for whom, with which effect.`) or {opt}"
            ),
            format!("Add {opt}"),
        );
        found.push(
            8,
            Site::Tool,
            format!(
                "tool `{name}` has no description: the model chooses tools by their description. \
                 {fix}"
            ),
        );
    }
    if !is_valid_tool_name(name) {
        let rename = found.opt("tool", &format!("name = \"{}\"", suggest_tool_name(name)));
        let fix = found.pick(
            format!("Rename it, e.g. {rename}"),
            format!(
                "Rename it, e.g. `{}`; an upstream's tool of this name cannot be declared: leave \
                 it undeclared, so that it stays hidden",
                suggest_tool_name(name)
            ),
        );
        found.push(
            9,
            Site::ToolName,
            format!(
                "invalid tool name `{name}`: providers accept `^[a-zA-Z][a-zA-Z0-9_-]{{0,63}}$` \
                 (a letter, then up to 63 letters, digits, `_` or `-`). {fix}"
            ),
        );
    }
    if tool.risk.is_high() && !tool.read_only && tool.idempotent.is_none() {
        let fix = found.pick(
            "Add `idempotent` (the model sends an `idempotency_key`) or \
             `idempotent(key = \"host\")`, or mark the tool `read_only` if it has no side effect",
            "Add `idempotent = true` (the host supplies the key; with \
             `idempotency_key = { field = \"...\" }` the model sends it), or set \
             `read_only = true` if the tool has no side effect",
        );
        found.push(
            1,
            Site::ToolOption("risk"),
            format!(
                "`risk = \"{}\"` on a tool that changes state needs `idempotent`: a retried or \
                 replayed call must not execute twice. {fix}",
                tool.risk.name()
            ),
        );
    }
}

/// Rule 11, first part: options that only mean something for a tool with side effects, on a
/// `read_only` tool.
fn read_only_contradictions(tool: &ToolDecl, found: &mut Found) {
    if !tool.read_only {
        return;
    }
    let not_read_only = found.pick("remove `read_only`", "set `read_only = false`");
    let side_effects = [
        (
            tool.approval_over.is_some(),
            "approval_over",
            "approvals guard side effects",
            "`approval_over`",
        ),
        (
            tool.idempotent.is_some(),
            "idempotent",
            "idempotency keys deduplicate side effects",
            found.pick("`idempotent`", "`idempotent = true`"),
        ),
        (
            tool.approval,
            "approval",
            "approvals guard side effects",
            found.pick("`approval`", "`approval = true`"),
        ),
    ];
    for (set, key, why, remove) in side_effects {
        if set {
            found.push(
                11,
                Site::ToolOption(key),
                format!(
                    "`{key}` on a `read_only` tool: {why}, and a read-only tool has none. \
                     Remove {remove}, or {not_read_only} if the tool does change state"
                ),
            );
        }
    }
}

/// Rule 11: options that contradict each other or cannot mean what they say.
fn contradictions(tool: &ToolDecl, found: &mut Found) {
    read_only_contradictions(tool, found);
    if tool.approval_over == Some(0) {
        let fix = found.pick(
            "remove `approval_over` if no amount needs one",
            "use `approval = true` if every call needs one",
        );
        found.push(
            11,
            Site::ToolOption("approval_over"),
            format!(
                "`approval_over = 0` makes the threshold meaningless: every amount would need \
                 approval. Give the largest amount that may run without approval (e.g. \
                 `approval_over = 10_000` for $100.00 in cents), or {fix}"
            ),
        );
    }
    match tool.approvals {
        Some(0) => found.push(
            11,
            Site::ToolOption("approvals"),
            "`approvals = 0` is a contradiction: an approval needs at least one approver. Use \
             `approvals = 1` (the default) or more, or remove `approval_over`",
        ),
        Some(n) if n > u64::from(u8::MAX) => found.push(
            0,
            Site::ToolOption("approvals"),
            "`approvals` must be at most 255",
        ),
        _ => {}
    }
    if tool.key_wins && tool.idempotent.is_none() {
        let message = found.pick(
            "`key_wins` decides what a reused idempotency key does, but the tool is not \
             `idempotent`: add `idempotent` or remove `key_wins`",
            "`key_reuse = \"key_wins\"` decides what a reused idempotency key does, but the tool \
             is not `idempotent`: add `idempotent = true` or remove `key_reuse`",
        );
        found.push(11, Site::ToolOption("key_wins"), message);
    }
    if let Some(key) = &tool.key_field
        && tool.idempotent.is_none()
    {
        let add = found.pick("`idempotent`", "`idempotent = true`");
        found.push(
            11,
            Site::ToolOption("idempotency_key"),
            format!(
                "`idempotency_key = {{ field = \"{key}\" }}` names the argument that carries the \
                 idempotency key, but the tool is not `idempotent`: add {add} or remove \
                 `idempotency_key`"
            ),
        );
    }
    if tool.timeout_ms == Some(0) {
        found.push(
            11,
            Site::ToolOption("timeout_ms"),
            "`timeout_ms = 0` would fail every call: give a deadline above zero",
        );
    }
    if tool.revision.is_some_and(|r| r > u64::from(u32::MAX)) {
        found.push(
            0,
            Site::ToolOption("revision"),
            "`revision` must fit in a `u32`",
        );
    }
}

/// Rules 19 and 20: declared data flow (see the provenance model).
fn data_flow_rules(tool: &ToolDecl, found: &mut Found) {
    let name = &tool.name;
    let destination = tool
        .fields
        .iter()
        .any(|f| matches!(f.kind, Kind::Email | Kind::Url));
    match tool.egress {
        Some(EgressDecl::Open) if tool.untrusted_output() && tool.risk != Risk::Critical => {
            let allow = found.opt("tool", "egress = \"allowlisted\"");
            let critical = found.opt("tool", "risk = \"critical\"");
            found.push(
                19,
                Site::ToolOption("egress"),
                format!(
                    "tool `{name}` returns untrusted content and sends data out: one call can read \
                     an injected instruction and carry data to wherever it names. Restrict its \
                     destinations with {allow} (and an allowlist on its `email`/`url` fields: \
                     `Sanitizer::allow_email_domains`/`allow_url_hosts`, or `allow_domains`/\
                     `allow_hosts` in a policy file), or make every call need approval with \
                     {critical}"
                ),
            );
        }
        Some(EgressDecl::Allowlisted) if !destination => {
            let kind = found.opt("arg", "kind = \"url\"");
            found.push(
                19,
                Site::ToolOption("egress"),
                format!(
                    "`egress = \"allowlisted\"` on tool `{name}`, which has no destination field \
                     to allowlist: mark the field that names where data goes {kind} (or \
                     `kind = \"email\"`), or declare plain `egress`"
                ),
            );
        }
        _ => {}
    }
    untrusted_fields(tool, found);
    if tool.read_only
        && tool.returns_text
        && tool.output.is_none()
        && tool.untrusted_fields.is_empty()
    {
        let untrusted = found.opt("tool", "output = \"untrusted\"");
        let trusted = found.opt("tool", "output = \"trusted\"");
        found.push(
            20,
            Site::Tool,
            format!(
                "read-only tool `{name}` returns free-form text, which may carry someone else's \
                 words into the model's context: declare where it comes from, {untrusted} for \
                 mail, web pages, documents, search results or other users' text (the session \
                 then records it as a provenance source), or {trusted} for text the application \
                 produced itself"
            ),
        );
    }
}

/// `untrusted_fields`: each a result path, and not beside `output = "trusted"`.
fn untrusted_fields(tool: &ToolDecl, found: &mut Found) {
    let name = &tool.name;
    for pointer in &tool.untrusted_fields {
        if let Err(e) = crate::result_path::parse(pointer) {
            found.push(
                0,
                Site::ToolOption("untrusted_fields"),
                format!("`untrusted_fields` of tool `{name}`: {e}"),
            );
        }
    }
    if !tool.untrusted_fields.is_empty() && tool.output == Some(OutputTrust::Trusted) {
        found.push(
            11,
            Site::ToolOption("untrusted_fields"),
            format!(
                "tool `{name}` declares its output trusted and lists `untrusted_fields` in it: a \
                 result that holds someone else's content in places is not trusted. Remove \
                 `output = \"trusted\"` (the fields listed are then the untrusted places and the \
                 rest of the result is the application's own data)"
            ),
        );
    }
}

/// Rule 2 (`approval_over` and `approval` need `idempotent`; `approval_over` needs an amount
/// field) and the single amount field.
fn approvals(tool: &ToolDecl, found: &mut Found) {
    let name = &tool.name;
    let needs_key = [
        (tool.approval_over.is_some(), "approval_over"),
        (tool.approval, "approval"),
    ];
    for (set, key) in needs_key {
        if set && tool.idempotent.is_none() && !tool.read_only {
            let fix = found.pick(
                "Add `idempotent` (the model sends an `idempotency_key`) or \
                 `idempotent(key = \"host\")`",
                "Add `idempotent = true`",
            );
            found.push(
                2,
                Site::ToolOption(key),
                format!(
                    "`{key}` needs `idempotent`: an approval request is stored under the call's \
                     idempotency key, so that a retried call finds the pending request instead of \
                     opening a second one. {fix}"
                ),
            );
        }
    }
    if tool.approval_over.is_some() {
        match tool.amount_field().map(|i| &tool.fields[i]) {
            None => {
                let mark = found.opt("arg", "amount");
                let fix = found.pick(
                    format!(
                        "name the parameter `amount` or mark it {mark} (an integer in minor \
                         units, e.g. `amount: u64`)"
                    ),
                    "name it with `amount = \"/<field>\"` (an integer property, in minor units)"
                        .to_owned(),
                );
                found.push(
                    2,
                    Site::ToolOption("approval_over"),
                    format!(
                        "`approval_over` needs an amount field to compare with, and tool `{name}` \
                         has none: {fix}"
                    ),
                );
            }
            Some(f) if found.typed && f.scalar == Scalar::Float && f.scale.is_none() => {
                let fix = found.pick(
                    format!("Make `{}` an integer in minor units (`u64` cents)", f.name),
                    "Name an integer property (`\"type\": \"integer\"`, in minor units) with \
                     `amount = \"/<field>\"`, or declare the decimals it has: \
                     `kind = \"money\", scale = 2, currency = \"USD\"`"
                        .to_owned(),
                );
                found.push(
                    2,
                    Site::ToolOption("approval_over"),
                    format!(
                        "`approval_over` compares against `{}`, which is a float: floats round, \
                         so the threshold could be crossed unnoticed. {fix}",
                        f.name
                    ),
                );
            }
            Some(_) => {}
        }
    }
    let extra: Vec<usize> = (tool.fields.iter().enumerate())
        .filter(|(_, f)| f.amount)
        .skip(1)
        .map(|(i, _)| i)
        .collect();
    for i in extra {
        let mark = found.opt("arg", "amount");
        found.push(
            0,
            Site::FieldOption(i, "amount"),
            format!(
                "only one field can be the amount ({mark}): approvals and session limits measure \
                 one number. Remove the extra `amount` marks"
            ),
        );
    }
}

/// The argument a model-sent key travels in has a usable name that no field already has.
fn key_argument(tool: &ToolDecl, found: &mut Found) {
    let Some(key) = tool.key_argument() else {
        return;
    };
    if !is_valid_argument_name(key) {
        found.push(
            0,
            Site::ToolOption("idempotency_key"),
            format!(
                "the idempotency key argument `{key}` must match `^[a-zA-Z][a-zA-Z0-9_]{{0,63}}$` \
                 (the names every provider accepts): choose another name"
            ),
        );
    }
    if let Some(i) = tool.fields.iter().position(|f| f.name == key) {
        let message = found.pick(
            "`idempotent` adds the `idempotency_key` argument itself and keeps it from the \
             handler: remove this parameter (or use `idempotent(key = \"host\")`)"
                .to_owned(),
            format!(
                "`idempotency_key = {{ field = \"{key}\" }}` adds the `{key}` argument itself and \
                 keeps it from the upstream, which expects a property of that name: choose \
                 another name, or let the host supply the key (remove `idempotency_key`)"
            ),
        );
        found.push(0, Site::FieldName(i), message);
    }
}

/// The message of rule 4 for a parameter or property called `name` (a dotted path below the
/// arguments for a nested property).
pub(crate) fn identity_message(name: &str, syntax: Syntax) -> String {
    let fix = match syntax {
        Syntax::Attributes => {
            "Remove it and take `ctx: &ToolContext<S>` as the first parameter, then use \
             `ctx.tenant()`, `ctx.subject()` or `ctx.principal().roles`"
                .to_owned()
        }
        Syntax::Keys => format!(
            "If it is not the caller's identity (an e-mail's subject, a third party's user name), \
             say what it holds: `fields.\"/{top}\" = {{ kind = \"text\", identity = false }}` (or \
             `kind = \"identifier\"`/`\"name\"`/`\"email\"`) and it is judged by that kind; if \
             it is the caller's identity, the upstream must take it from its own authentication, \
             not from the model",
            top = name.split('.').next().unwrap_or(name)
        ),
    };
    format!(
        "parameter `{name}` looks like identity or authority, which the model must never supply: \
         it comes from the authenticated principal. {fix}"
    )
}

/// The message of rule 17 for the `pattern` of `name` (a field, or a location in a schema).
pub(crate) fn pattern_message(name: &str, problem: &PatternProblem) -> String {
    format!(
        "`pattern` of `{name}` does not mean the same in Rust's regex (the dispatcher) and \
         ECMA-262 (JSON Schema, the providers): {problem}"
    )
}

/// The rules on one field.
fn field_rules(tool: &ToolDecl, i: usize, f: &FieldDecl, found: &mut Found) {
    let amount = tool.amount_field() == Some(i);
    if is_identity_name(&f.name) && !f.not_identity {
        found.push(
            4,
            Site::FieldName(i),
            identity_message(&f.name, found.syntax),
        );
    }
    money(tool, i, f, amount, found);
    scaled_money(i, f, found);
    run_time_options(tool, i, f, found);
    if amount && f.sensitive {
        let remove = found.pick("`sensitive`", "`sensitive = true`");
        found.push(
            15,
            Site::FieldOption(i, "sensitive"),
            format!(
                "`{}` is the amount field and cannot be `sensitive`: approvers must see the amount \
                 in the preview, while `sensitive` redacts it. Remove {remove}",
                f.name
            ),
        );
    } else if f.kind == Kind::Money && f.sensitive {
        let remove = found.pick("`sensitive`", "`sensitive = true`");
        found.push(
            15,
            Site::FieldOption(i, "sensitive"),
            format!(
                "`{}` is money and cannot be `sensitive`: approvers must see amounts in the \
                 preview, while `sensitive` redacts them. Remove {remove}",
                f.name
            ),
        );
    }
    if let Some(k) = &f.refused_kind {
        let sql = k == "sql";
        found.push(
            7,
            Site::FieldOption(i, "kind"),
            format!(
                "`kind = \"{k}\"` is refused: a model-written {} string is an injection channel. \
                 Take structured arguments (an enum of allowed operations, identifiers, numbers) \
                 and build the {} inside the handler",
                if sql { "SQL" } else { "shell command" },
                if sql {
                    "query with bound parameters"
                } else {
                    "command"
                },
            ),
        );
    }
    if found.typed
        && tool.risk.is_high()
        && f.description.as_deref().is_none_or(|d| d.trim().is_empty())
    {
        let opt = found.opt("arg", "description = \"...\"");
        let fix = found.pick(
            format!("Add a doc comment (`/// ...`) above it or {opt}"),
            format!("Add {opt} to the field"),
        );
        found.push(
            8,
            Site::Field(i),
            format!(
                "parameter `{}` of a {}-risk tool has no description: the model must know exactly \
                 what it sets. {fix}",
                f.name,
                tool.risk.name()
            ),
        );
    }
    bounds(tool, i, f, found);
    path_rules(i, f, found);
    constraints(i, f, found);
    allowlists(i, f, found);
}

/// Rule 3: money is never a float, and the amount is an integer.
fn money(tool: &ToolDecl, i: usize, f: &FieldDecl, amount: bool, found: &mut Found) {
    if !found.typed {
        return;
    }
    let scaled = f.scale.is_some();
    if (amount || f.kind == Kind::Money || is_money_name(&f.name))
        && f.scalar == Scalar::Float
        && !scaled
    {
        let what = if amount {
            "an amount"
        } else if f.kind == Kind::Money {
            "money"
        } else {
            "named like money"
        };
        let fix = found.pick(
            "Use an integer in minor units (`u64` cents) or the `Money`/`Cents` type",
            "Declare how to read it exactly: `kind = \"money\", scale = 2, currency = \"USD\"` \
             (decimal places and currency; the number's text is read as minor units, never as \
             a float), or use an integer in minor units (`\"type\": \"integer\"`, e.g. cents)",
        );
        found.push(
            3,
            Site::FieldType(i),
            format!(
                "`{}` is {what} but has a float type: floats cannot represent most decimal \
                 amounts exactly and make limits drift. {fix}",
                f.name
            ),
        );
    } else if amount
        && !tool.compiler_checks_amount
        && !(f.collection.is_none()
            && (f.scalar == Scalar::Integer || (scaled && f.scalar == Scalar::Float)))
    {
        let fix = found.pick(
            "Use an unsigned integer in minor units (`u64` cents) or the `Money`/`Cents` type",
            "Name an integer property (`\"type\": \"integer\"`, in minor units) with \
             `amount = \"/<field>\"`",
        );
        found.push(
            3,
            Site::FieldType(i),
            format!(
                "`{}` is the amount but does not hold one integer: approvals and session limits \
                 compare the amount with integer thresholds, and a string, a list or another \
                 shape would slip under them. {fix}",
                f.name
            ),
        );
    }
}

/// Rule 3 on `scale`/`currency`: they come together, on a `money` field, the scale is at most
/// [`MAX_SCALE`] and the currency is an ISO 4217 code; a scaled field holds one number.
fn scaled_money(i: usize, f: &FieldDecl, found: &mut Found) {
    let (option, message) = match (&f.scale, &f.currency) {
        (None, None) => return,
        (Some(_), None) | (None, Some(_)) => (
            if f.scale.is_some() {
                "scale"
            } else {
                "currency"
            },
            format!(
                "`{}` needs both `scale` (decimal places) and `currency` (e.g. `\"USD\"`): \
                 together they say how many minor units one major unit has and in which money \
                 limits are counted",
                f.name
            ),
        ),
        (Some(scale), _) if *scale > MAX_SCALE => (
            "scale",
            format!(
                "`scale = {scale}` on `{}`: at most {MAX_SCALE} decimal places can be read into \
                 an integer of minor units",
                f.name
            ),
        ),
        (_, Some(c)) if c.len() != 3 || !c.bytes().all(|b| b.is_ascii_uppercase()) => (
            "currency",
            format!(
                "`currency = \"{c}\"` on `{}` is not an ISO 4217 code: three capital letters, \
                 e.g. `\"USD\"`, `\"EUR\"`",
                f.name
            ),
        ),
        _ if f.kind != Kind::Money => (
            "scale",
            format!(
                "`scale`/`currency` read money, but `{}` is not a money field: add \
                 `kind = \"money\"`",
                f.name
            ),
        ),
        _ if found.typed
            && (f.collection.is_some() || !matches!(f.scalar, Scalar::Float | Scalar::Integer)) =>
        {
            (
                "scale",
                format!(
                    "`{}` has a `scale` but does not hold one number: a scaled amount is a JSON \
                     number in major units (`\"type\": \"number\"`)",
                    f.name
                ),
            )
        }
        _ => return,
    };
    found.push(3, Site::FieldOption(i, option), message);
}

/// The options only a run-time declaration has: `identity = false` says what the field is
/// (a `kind`), `default_scheme` reads URLs, `namespace = "upstream"` reads paths, and a field's
/// `egress = true` narrows a tool that sends data out.
fn run_time_options(tool: &ToolDecl, i: usize, f: &FieldDecl, found: &mut Found) {
    let name = &f.name;
    let broken = if f.not_identity && !f.kind_declared {
        Some((
            4,
            "identity",
            format!(
                "`identity = false` on `{name}` must say what the field holds instead: add \
                 `kind = \"text\"` (a subject, a message), `\"name\"`, `\"identifier\"` or \
                 `\"email\"`, and it is judged by that kind"
            ),
        ))
    } else if let Some(scheme) = f.default_scheme.as_deref().filter(|_| f.kind != Kind::Url) {
        Some((
            0,
            "default_scheme",
            format!(
                "`default_scheme = \"{scheme}\"` reads URLs, but `{name}` is not a URL field: add \
                 `kind = \"url\"`, or remove it"
            ),
        ))
    } else if let Some(scheme) = f
        .default_scheme
        .as_deref()
        .filter(|s| !matches!(*s, "https" | "http"))
    {
        Some((
            0,
            "default_scheme",
            format!(
                "`default_scheme = \"{scheme}\"` on `{name}`: a URL written without a scheme is \
                 read as `https` or `http`; give one of them"
            ),
        ))
    } else if f.upstream_namespace && (f.kind != Kind::Path || f.root.is_some()) {
        Some((
            6,
            "namespace",
            format!(
                "`namespace = \"upstream\"` on `{name}` names paths in the upstream's own \
                 namespace: it needs `kind = \"path\"` and no `root` (a root confines paths on \
                 the gateway's host)"
            ),
        ))
    } else if let Some(broken) = outside_egress(f) {
        Some(broken)
    } else if f.egress_when && tool.egress.is_none() {
        Some((
            19,
            "egress",
            format!(
                "`egress = true` on `{name}` says the tool sends data out only when this field \
                 is set, but tool `{}` declares no egress: add `egress = \"open\"` or \
                 `\"allowlisted\"` to the tool, or remove it",
                tool.name
            ),
        ))
    } else {
        None
    };
    if let Some((rule, option, message)) = broken {
        found.push(rule, Site::FieldOption(i, option), message);
    }
}

/// `egress = "outside"` judges addresses: it needs an address kind and the internal set, and
/// `internal` means nothing without it.
fn outside_egress(f: &FieldDecl) -> Option<(u8, &'static str, String)> {
    let name = &f.name;
    if f.egress_outside && !matches!(f.kind, Kind::Email | Kind::Url) {
        return Some((
            19,
            "egress",
            format!(
                "`egress = \"outside\"` on `{name}` judges the addresses it carries, but it is \
                 not an address field: add `kind = \"email\"` or `kind = \"url\"`, or use \
                 `egress = true`"
            ),
        ));
    }
    if f.egress_outside && !f.internal {
        return Some((
            19,
            "egress",
            format!(
                "`egress = \"outside\"` on `{name}` needs the addresses that stay inside: add \
                 `internal = [\"example.com\", \"*.example.com\"]` (hosts and e-mail domains)"
            ),
        ));
    }
    if f.internal && !f.egress_outside {
        return Some((
            19,
            "internal",
            format!(
                "`internal` on `{name}` lists the addresses that are not egress, which only \
                 `egress = \"outside\"` reads: add it, or remove `internal`"
            ),
        ));
    }
    None
}

/// The largest `scale` a money field may declare.
pub const MAX_SCALE: u8 = 9;

/// Rules 5 and 16: strings and collections of high-risk tools are bounded; and bounds that
/// admit nothing (rule 11).
fn bounds(tool: &ToolDecl, i: usize, f: &FieldDecl, found: &mut Found) {
    let high = tool.risk.is_high();
    if high && f.scalar == Scalar::Text && f.max_len.is_none() && !f.kind.is_bounded() {
        let opt = found.opt("arg", "max_len = N");
        let kind = found.opt("arg", "kind = \"identifier\"");
        let fix = found.pick(
            format!("Add {opt}, or use a bounded kind ({kind}, `Identifier`, `Email`, `Url`)"),
            format!("Add {opt}, or use a bounded kind ({kind}, `\"email\"` or `\"url\"`)"),
        );
        found.push(
            5,
            Site::FieldType(i),
            format!(
                "unbounded string `{}` on a {}-risk tool: a model can send any amount of text \
                 here, including injected instructions. {fix}",
                f.name,
                tool.risk.name()
            ),
        );
    }
    if high && f.collection.is_some() && f.max_items.is_none() {
        let fix = found.opt("arg", "max_items = N");
        found.push(
            16,
            Site::FieldType(i),
            format!(
                "unbounded collection `{}` on a {}-risk tool: a model can send any number of \
                 items here, each one an effect. Add {fix} with the largest number the tool \
                 should ever handle in one call",
                f.name,
                tool.risk.name()
            ),
        );
    }
    match f.max_items {
        Some(_) if found.typed && f.collection.is_none() => {
            let message = found.pick(
                format!(
                    "`max_items` bounds a collection (`Vec`, slice, set or map), but `{}` is not \
                     one: remove it (use `max_len` for strings, `max` for numbers)",
                    f.name
                ),
                format!(
                    "`max_items` bounds a collection (an array, or an object of free keys), but \
                     `{}` is not one: remove it (use `max_len` for strings)",
                    f.name
                ),
            );
            found.push(16, Site::FieldOption(i, "max_items"), message);
        }
        Some(0) => {
            let or_remove = found.pick(", or remove the parameter", "");
            found.push(
                11,
                Site::FieldOption(i, "max_items"),
                format!(
                    "`max_items = 0` only admits an empty collection: give the largest number of \
                     items allowed{or_remove}"
                ),
            );
        }
        _ => {}
    }
    if f.max_len == Some(0) {
        let or_remove = found.pick(", or remove the parameter", "");
        found.push(
            11,
            Site::FieldOption(i, "max_len"),
            format!(
                "`max_len = 0` only admits an empty string: give the largest length \
                 allowed{or_remove}"
            ),
        );
    }
}

/// Rule 6: paths are confined below a real root.
fn path_rules(i: usize, f: &FieldDecl, found: &mut Found) {
    match (&f.root, f.kind == Kind::Path) {
        (None, true) if !f.confined && !f.upstream_namespace => {
            let opt = found.opt("arg", "root = \"/srv/data\"");
            let fix = found.pick(
                format!("Confine it with {opt} (or use `SafePath`)"),
                format!(
                    "Confine it with {opt}, or, for a name in the upstream's own namespace (not a \
                     file on this host), `namespace = \"upstream\"`"
                ),
            );
            found.push(
                6,
                Site::FieldType(i),
                format!(
                    "path `{}` has no root: a model-chosen path could reach any file \
                     (`../../etc`). {fix}",
                    f.name
                ),
            );
        }
        (Some(root), true) => {
            if let Some(problem) = root_problem(root) {
                found.push(
                    6,
                    Site::FieldOption(i, "root"),
                    format!(
                        "`root = \"{root}\"` {problem}: the root confines every path the model \
                         sends, so it must be an absolute directory below the file-system root, \
                         e.g. `root = \"/srv/data\"`"
                    ),
                );
            }
        }
        (Some(_), false) => {
            let fix = found.pick(
                "use a `PathBuf` type or `kind = \"path\"`, or remove `root`",
                "add `kind = \"path\"`, or remove `root`",
            );
            found.push(
                0,
                Site::FieldOption(i, "root"),
                format!(
                    "`root` confines paths, but `{}` is not a path field: {fix}",
                    f.name
                ),
            );
        }
        _ => {}
    }
}

/// Constraints mean something for the field's JSON type, are consistent, and `pattern` is
/// portable (rule 17).
fn constraints(i: usize, f: &FieldDecl, found: &mut Found) {
    let numeric = matches!(f.scalar, Scalar::Integer | Scalar::Float | Scalar::Boolean);
    let keys: [(&'static str, bool); 3] = [
        ("min_len", f.min_len.is_some()),
        ("max_len", f.max_len.is_some()),
        ("pattern", f.pattern.is_some()),
    ];
    for (key, _) in keys.iter().filter(|(_, set)| numeric && *set) {
        let fix = found.pick("Use `min`/`max` for numbers, or remove it", "Remove it");
        found.push(
            0,
            Site::FieldOption(i, key),
            format!(
                "`{key}` constrains strings, but `{}` is a number or boolean, so it would check \
                 nothing. {fix}",
                f.name
            ),
        );
    }
    let keys: [(&'static str, bool); 2] = [("min", f.min.is_some()), ("max", f.max.is_some())];
    for (key, _) in keys
        .iter()
        .filter(|(_, set)| f.scalar == Scalar::Text && *set)
    {
        found.push(
            0,
            Site::FieldOption(i, key),
            format!(
                "`{key}` bounds numbers, but `{}` is a string, so it would check nothing. Use \
                 `{key}_len` to bound its length, or remove it",
                f.name
            ),
        );
    }
    if let (Some(lo), Some(hi)) = (f.min_len, f.max_len)
        && lo > hi
    {
        found.push(
            0,
            Site::FieldOption(i, "min_len"),
            "`min_len` is greater than `max_len`: no value could pass",
        );
    }
    if let (Some(lo), Some(hi)) = (f.min, f.max)
        && lo > hi
    {
        found.push(
            0,
            Site::FieldOption(i, "min"),
            "`min` is greater than `max`: no value could pass",
        );
    }
    if let Some(Err(problem)) = f.pattern.as_deref().map(pattern::check) {
        found.push(
            17,
            Site::FieldOption(i, "pattern"),
            pattern_message(&f.name, &problem),
        );
    }
}

/// Allowlists restrict the destinations of the kind they are for.
fn allowlists(i: usize, f: &FieldDecl, found: &mut Found) {
    if f.allow_hosts && f.kind != Kind::Url {
        let kind = found.opt("arg", "kind = \"url\"");
        found.push(
            0,
            Site::FieldOption(i, "allow_hosts"),
            format!(
                "`allow_hosts`/`allow_schemes` restrict URLs, but `{}` is not a URL field: add \
                 {kind}, or remove them",
                f.name
            ),
        );
    }
    if f.allow_domains && f.kind != Kind::Email {
        let kind = found.opt("arg", "kind = \"email\"");
        found.push(
            0,
            Site::FieldOption(i, "allow_domains"),
            format!(
                "`allow_domains` restricts e-mail recipients, but `{}` is not an e-mail field: \
                 add {kind}, or remove it",
                f.name
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(name: &str, kind: Kind, scalar: Scalar) -> FieldDecl {
        let mut f = FieldDecl::new(name, kind, scalar);
        f.description = Some(format!("The {name}."));
        f
    }

    /// A described field declared as the amount.
    fn amount(name: &str, kind: Kind, scalar: Scalar) -> FieldDecl {
        let mut f = described(name, kind, scalar);
        f.amount = true;
        f
    }

    fn tool(fields: Vec<FieldDecl>) -> ToolDecl {
        let mut t = ToolDecl::new("pay", Some("Pays an invoice.".to_owned()));
        t.fields = fields;
        t
    }

    fn rules(t: &ToolDecl) -> Vec<(u8, Site)> {
        check(t).into_iter().map(|v| (v.rule, v.site)).collect()
    }

    #[test]
    fn a_sound_high_risk_tool_passes() {
        let mut memo = described("memo", Kind::Text, Scalar::Text);
        memo.max_len = Some(140);
        memo.pattern = Some("^[A-Za-z ]*$".to_owned());
        let mut to = described("to", Kind::Email, Scalar::Other);
        to.collection = Some(Collection::Sequence);
        to.max_items = Some(5);
        let mut t = tool(vec![
            amount("amount", Kind::Money, Scalar::Integer),
            memo,
            to,
        ]);
        t.risk = Risk::Critical;
        t.idempotent = Some(KeySource::Argument);
        t.approval_over = Some(10_000);
        assert_eq!(check(&t), []);
    }

    #[test]
    fn tool_level_rules_name_their_option() {
        let mut t = tool(vec![]);
        t.name = "send.mail".to_owned();
        t.description = Some("  ".to_owned());
        t.risk = Risk::High;
        assert_eq!(
            rules(&t),
            [
                (8, Site::Tool),
                (9, Site::ToolName),
                (1, Site::ToolOption("risk"))
            ]
        );
        let attrs = &check_with(&t, Syntax::Attributes)[1].message;
        assert!(attrs.contains("`#[tool(name = \"send_mail\")]`"), "{attrs}");
        let keys = &check(&t)[1].message;
        assert!(
            keys.contains("e.g. `send_mail`") && keys.contains("undeclared"),
            "{keys}"
        );
        t.read_only = true;
        assert_eq!(rules(&t)[2..], []);
    }

    #[test]
    fn contradictions_are_refused() {
        let mut t = tool(vec![amount("amount", Kind::Money, Scalar::Integer)]);
        t.read_only = true;
        t.idempotent = Some(KeySource::Host);
        t.approval_over = Some(0);
        t.approvals = Some(0);
        t.timeout_ms = Some(0);
        assert_eq!(
            rules(&t),
            [
                (11, Site::ToolOption("approval_over")),
                (11, Site::ToolOption("idempotent")),
                (11, Site::ToolOption("approval_over")),
                (11, Site::ToolOption("approvals")),
                (11, Site::ToolOption("timeout_ms")),
            ]
        );
        let mut t = tool(vec![]);
        t.key_wins = true;
        t.approvals = Some(256);
        t.revision = Some(u64::MAX);
        assert_eq!(
            rules(&t),
            [
                (0, Site::ToolOption("approvals")),
                (11, Site::ToolOption("key_wins")),
                (0, Site::ToolOption("revision")),
            ]
        );
    }

    #[test]
    fn approval_over_needs_idempotent_and_an_integer_amount() {
        let mut t = tool(vec![described("memo", Kind::Text, Scalar::Text)]);
        t.approval_over = Some(100);
        assert_eq!(
            rules(&t),
            [
                (2, Site::ToolOption("approval_over")),
                (2, Site::ToolOption("approval_over"))
            ]
        );
        t.idempotent = Some(KeySource::Argument);
        t.fields.push(amount("amount", Kind::Opaque, Scalar::Float));
        let found = check(&t);
        assert!(found[0].message.contains("which is a float"), "{found:?}");
        assert_eq!(found[1].rule, 3);
        assert!(found[1].message.contains("an amount"));
    }

    #[test]
    fn one_amount_and_never_sensitive() {
        let mut a = described("net", Kind::Opaque, Scalar::Integer);
        a.amount = true;
        a.sensitive = true;
        let mut b = described("gross", Kind::Opaque, Scalar::Integer);
        b.amount = true;
        assert_eq!(
            rules(&tool(vec![a, b])),
            [
                (0, Site::FieldOption(1, "amount")),
                (15, Site::FieldOption(0, "sensitive"))
            ]
        );
    }

    #[test]
    fn identity_money_and_refused_kinds_are_found_per_field() {
        let mut sql = described("query", Kind::Text, Scalar::Text);
        sql.refused_kind = Some("sql".to_owned());
        let t = tool(vec![
            described("tenant_id", Kind::Text, Scalar::Text),
            described("unitPrice", Kind::Opaque, Scalar::Float),
            described("fx_rate", Kind::Money, Scalar::Float),
            sql,
        ]);
        assert_eq!(
            rules(&t),
            [
                (4, Site::FieldName(0)),
                (3, Site::FieldType(1)),
                (3, Site::FieldType(2)),
                (7, Site::FieldOption(3, "kind"))
            ]
        );
        assert!(check(&t)[3].message.contains("bound parameters"));
    }

    #[test]
    fn high_risk_strings_and_collections_are_bounded_and_described() {
        let mut list = FieldDecl::new("ids", Kind::Identifier, Scalar::Text);
        list.collection = Some(Collection::Map);
        let mut t = tool(vec![FieldDecl::new("memo", Kind::Text, Scalar::Text), list]);
        t.risk = Risk::High;
        t.idempotent = Some(KeySource::Host);
        assert_eq!(
            rules(&t),
            [
                (8, Site::Field(0)),
                (5, Site::FieldType(0)),
                (8, Site::Field(1)),
                (16, Site::FieldType(1))
            ]
        );
        let mut scalar = described("n", Kind::Opaque, Scalar::Integer);
        scalar.max_items = Some(3);
        let mut empty = described("xs", Kind::Opaque, Scalar::Integer);
        empty.collection = Some(Collection::Sequence);
        empty.max_items = Some(0);
        assert_eq!(
            rules(&tool(vec![scalar, empty])),
            [
                (16, Site::FieldOption(0, "max_items")),
                (11, Site::FieldOption(1, "max_items"))
            ]
        );
    }

    #[test]
    fn paths_need_a_real_root_and_only_paths_take_one() {
        let bare = described("file", Kind::Path, Scalar::Path);
        let mut up = described("dir", Kind::Path, Scalar::Text);
        up.root = Some("/srv/../etc".to_owned());
        let mut not_path = described("memo", Kind::Text, Scalar::Text);
        not_path.root = Some("/srv".to_owned());
        let mut fine = described("doc", Kind::Path, Scalar::Path);
        fine.root = Some("/srv/docs".to_owned());
        assert_eq!(
            rules(&tool(vec![bare, up, not_path, fine])),
            [
                (6, Site::FieldType(0)),
                (6, Site::FieldOption(1, "root")),
                (0, Site::FieldOption(2, "root"))
            ]
        );
    }

    #[test]
    fn constraints_fit_the_type_agree_and_patterns_are_portable() {
        let mut n = described("count", Kind::Opaque, Scalar::Integer);
        n.max_len = Some(3);
        n.min = Some(5.0);
        n.max = Some(1.0);
        let mut s = described("code", Kind::Identifier, Scalar::Text);
        s.max = Some(9.0);
        s.min_len = Some(4);
        s.max_len = Some(2);
        s.pattern = Some("^\\d+$".to_owned());
        assert_eq!(
            rules(&tool(vec![n, s])),
            [
                (0, Site::FieldOption(0, "max_len")),
                (0, Site::FieldOption(0, "min")),
                (0, Site::FieldOption(1, "max")),
                (0, Site::FieldOption(1, "min_len")),
                (17, Site::FieldOption(1, "pattern"))
            ]
        );
    }

    #[test]
    fn fixes_are_spelt_as_keys_or_as_the_macro_attributes() {
        let mut t = tool(vec![described("memo", Kind::Text, Scalar::Text)]);
        t.risk = Risk::High;
        t.idempotent = Some(KeySource::Host);
        let keys = &check(&t)[0].message;
        let attrs = &check_with(&t, Syntax::Attributes)[0].message;
        assert!(keys.contains("Add `max_len = N`"), "{keys}");
        assert!(attrs.contains("Add `#[arg(max_len = N)]`"), "{attrs}");
    }

    #[test]
    fn the_added_key_argument_cannot_be_declared_again() {
        let mut t = tool(vec![described(KEY_FIELD, Kind::Identifier, Scalar::Text)]);
        assert_eq!(rules(&t), []);
        t.idempotent = Some(KeySource::Argument);
        assert_eq!(rules(&t), [(0, Site::FieldName(0))]);
    }

    #[test]
    fn the_diagnosis_is_shared_and_only_the_fix_follows_the_syntax() {
        let mut t = tool(vec![
            described("memo", Kind::Text, Scalar::Text),
            described("tenant_id", Kind::Identifier, Scalar::Text),
            described("total", Kind::Opaque, Scalar::Float),
        ]);
        t.risk = Risk::High;
        t.read_only = true;
        let keys = check_with(&t, Syntax::Keys);
        let attrs = check_with(&t, Syntax::Attributes);
        assert_eq!(keys.len(), 3);
        let diagnoses = [
            "unbounded string `memo` on a high-risk tool: a model can send any amount of text \
             here, including injected instructions. ",
            "parameter `tenant_id` looks like identity or authority, which the model must never \
             supply: it comes from the authenticated principal. ",
            "`total` is named like money but has a float type: floats cannot represent most \
             decimal amounts exactly and make limits drift. ",
        ];
        for ((k, a), diagnosis) in keys.iter().zip(&attrs).zip(diagnoses) {
            assert_eq!((k.rule, k.site), (a.rule, a.site));
            assert!(k.message.starts_with(diagnosis), "{}", k.message);
            assert!(a.message.starts_with(diagnosis), "{}", a.message);
        }
        for v in &keys {
            for macro_only in ["#[", "///", "ToolContext<S>", "`u64`", "Money`/`Cents"] {
                assert!(!v.message.contains(macro_only), "{}", v.message);
            }
        }
    }

    #[test]
    fn run_time_options_are_checked_like_the_macro_options() {
        let mut t = tool(vec![]);
        t.read_only = true;
        t.approval = true;
        assert_eq!(rules(&t), [(11, Site::ToolOption("approval"))]);
        t.read_only = false;
        assert_eq!(rules(&t), [(2, Site::ToolOption("approval"))]);
        t.idempotent = Some(KeySource::Host);
        assert_eq!(rules(&t), []);

        let mut t = tool(vec![described("memo", Kind::Text, Scalar::Text)]);
        t.key_field = Some("memo".to_owned());
        assert_eq!(rules(&t), [(11, Site::ToolOption("idempotency_key"))]);
        t.idempotent = Some(KeySource::Argument);
        assert_eq!(rules(&t), [(0, Site::FieldName(0))]);
        assert!(check(&t)[0].message.contains("choose another name"));
        t.key_field = Some("key-1".to_owned());
        assert_eq!(rules(&t), [(0, Site::ToolOption("idempotency_key"))]);
        t.idempotent = Some(KeySource::Host);
        assert_eq!(rules(&t), []);

        let mut url = described("link", Kind::Text, Scalar::Text);
        url.allow_hosts = true;
        let mut mail = described("to", Kind::Url, Scalar::Text);
        mail.allow_domains = true;
        assert_eq!(
            rules(&tool(vec![url, mail])),
            [
                (0, Site::FieldOption(0, "allow_hosts")),
                (0, Site::FieldOption(1, "allow_domains"))
            ]
        );
    }

    #[test]
    fn the_stricter_conditions_hold_for_both_syntaxes() {
        // `max_len = 0` admits nothing.
        let mut empty = described("code", Kind::Text, Scalar::Text);
        empty.max_len = Some(0);
        // A path without a root, whatever its type, unless the type confines it (`SafePath`).
        let other_path = described("files", Kind::Path, Scalar::Other);
        let mut safe = described("doc", Kind::Path, Scalar::Other);
        safe.confined = true;
        // Money is never redacted.
        let mut fee = described("fee", Kind::Money, Scalar::Integer);
        fee.sensitive = true;
        // A `money` or `opaque` string is not bounded by its kind.
        let money_text = described("currency", Kind::Money, Scalar::Text);
        let opaque_text = described("blob", Kind::Opaque, Scalar::Text);
        let mut t = tool(vec![empty, other_path, safe, fee, money_text, opaque_text]);
        t.risk = Risk::High;
        t.read_only = true;
        for syntax in [Syntax::Keys, Syntax::Attributes] {
            let found: Vec<(u8, Site)> = check_with(&t, syntax)
                .into_iter()
                .map(|v| (v.rule, v.site))
                .collect();
            assert_eq!(
                found,
                [
                    (11, Site::FieldOption(0, "max_len")),
                    (6, Site::FieldType(1)),
                    (15, Site::FieldOption(3, "sensitive")),
                    (5, Site::FieldType(4)),
                    (5, Site::FieldType(5)),
                ]
            );
        }
    }

    #[test]
    fn a_scaled_float_amount_is_an_amount_and_scale_and_currency_come_together() {
        let mut t = tool(vec![amount("amount", Kind::Money, Scalar::Float)]);
        t.idempotent = Some(KeySource::Host);
        t.approval_over = Some(100);
        assert_eq!(
            rules(&t),
            [
                (2, Site::ToolOption("approval_over")),
                (3, Site::FieldType(0))
            ]
        );
        t.fields[0].scale = Some(2);
        t.fields[0].currency = Some("USD".to_owned());
        assert_eq!(rules(&t), []);
        t.fields[0].currency = None;
        assert_eq!(rules(&t), [(3, Site::FieldOption(0, "scale"))]);
        t.fields[0].currency = Some("usd".to_owned());
        assert_eq!(rules(&t), [(3, Site::FieldOption(0, "currency"))]);
        t.fields[0].currency = Some("EUR".to_owned());
        t.fields[0].scale = Some(MAX_SCALE + 1);
        assert_eq!(rules(&t), [(3, Site::FieldOption(0, "scale"))]);
        // A scale reads money: on a text field it would read nothing.
        let mut f = described("memo", Kind::Text, Scalar::Text);
        f.scale = Some(2);
        f.currency = Some("USD".to_owned());
        f.max_len = Some(10);
        assert_eq!(rules(&tool(vec![f])), [(3, Site::FieldOption(0, "scale"))]);
    }

    #[test]
    fn a_field_declared_not_identity_is_judged_by_its_declared_kind() {
        let mut f = described("subject", Kind::Text, Scalar::Text);
        f.max_len = Some(100);
        let found = check_with(&tool(vec![f.clone()]), Syntax::Keys);
        assert_eq!(found[0].rule, 4);
        assert!(
            found[0].message.contains("identity = false"),
            "{}",
            found[0].message
        );
        assert!(
            !found[0].message.contains("ToolContext"),
            "{}",
            found[0].message
        );
        // The macro's authors own their parameters: the fix stays the Rust one.
        let found = check_with(&tool(vec![f.clone()]), Syntax::Attributes);
        assert!(
            found[0].message.contains("ToolContext"),
            "{}",
            found[0].message
        );
        f.not_identity = true;
        assert_eq!(
            rules(&tool(vec![f.clone()])),
            [(4, Site::FieldOption(0, "identity"))]
        );
        f.kind_declared = true;
        assert_eq!(rules(&tool(vec![f])), []);
    }

    #[test]
    fn run_time_destination_options_fit_their_kind() {
        let mut url = described("link", Kind::Url, Scalar::Text);
        url.default_scheme = Some("https".to_owned());
        assert_eq!(rules(&tool(vec![url.clone()])), []);
        url.default_scheme = Some("javascript".to_owned());
        assert_eq!(
            rules(&tool(vec![url.clone()])),
            [(0, Site::FieldOption(0, "default_scheme"))]
        );
        url.kind = Kind::Text;
        url.max_len = Some(10);
        url.default_scheme = Some("https".to_owned());
        assert_eq!(
            rules(&tool(vec![url])),
            [(0, Site::FieldOption(0, "default_scheme"))]
        );
        let mut path = described("file", Kind::Path, Scalar::Text);
        assert_eq!(rules(&tool(vec![path.clone()])), [(6, Site::FieldType(0))]);
        path.upstream_namespace = true;
        assert_eq!(rules(&tool(vec![path.clone()])), []);
        path.root = Some("/srv".to_owned());
        assert!(rules(&tool(vec![path])).contains(&(6, Site::FieldOption(0, "namespace"))));
        let mut to = described("participants", Kind::Email, Scalar::Text);
        to.egress_when = true;
        let mut t = tool(vec![to]);
        assert_eq!(rules(&t), [(19, Site::FieldOption(0, "egress"))]);
        t.egress = Some(EgressDecl::Open);
        t.output = Some(OutputTrust::Trusted);
        assert_eq!(rules(&t), []);
    }

    #[test]
    fn a_run_time_amount_is_one_integer_and_the_macro_leaves_that_to_the_compiler() {
        let mut t = tool(vec![amount("sum", Kind::Opaque, Scalar::Other)]);
        t.idempotent = Some(KeySource::Host);
        t.approval_over = Some(100);
        assert_eq!(rules(&t), [(3, Site::FieldType(0))]);
        t.compiler_checks_amount = true;
        assert_eq!(rules(&t), []);
        // A float is reported either way.
        t.fields[0].scalar = Scalar::Float;
        assert_eq!(
            rules(&t),
            [
                (2, Site::ToolOption("approval_over")),
                (3, Site::FieldType(0))
            ]
        );
        // A field named `amount` is the amount only when declared so.
        let mut t = tool(vec![described("amount", Kind::Opaque, Scalar::Integer)]);
        t.idempotent = Some(KeySource::Host);
        t.approval_over = Some(100);
        assert_eq!(rules(&t), [(2, Site::ToolOption("approval_over"))]);
    }

    #[test]
    fn a_declaration_without_its_schema_is_checked_for_what_it_says() {
        // Types and descriptions are unknown: no description, bound or type rule fires.
        let mut bare = FieldDecl::new("body", Kind::Text, Scalar::Other);
        bare.max_items = Some(3);
        let mut path = FieldDecl::new("path", Kind::Path, Scalar::Other);
        path.pattern = Some("(?=x)".to_owned());
        let mut t = ToolDecl::new("write", None);
        t.risk = Risk::High;
        t.idempotent = Some(KeySource::Host);
        t.fields = vec![bare, path];
        let found: Vec<(u8, Site)> = check_declared(&t, Syntax::Keys)
            .into_iter()
            .map(|v| (v.rule, v.site))
            .collect();
        assert_eq!(
            found,
            [
                (6, Site::FieldType(1)),
                (17, Site::FieldOption(1, "pattern"))
            ]
        );
        assert!(check(&t).len() > found.len());
    }
}
