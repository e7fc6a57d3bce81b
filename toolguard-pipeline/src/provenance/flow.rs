//! The flow policy: what a session that has read untrusted content may still do unattended.

use serde_json::Value;
use std::collections::HashMap;

use super::{ArgumentOrigin, Origin, Source};
use crate::outcome::Status;
use crate::outcome::Stop;
use crate::sanitize::Sanitizer;
use crate::spec::{Egress, FieldKind, FieldSpec, Risk, Role, ToolSpec};

/// What a rule of the flow policy does to a call in a session with sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FlowAction {
    /// The call goes on as in a clean session.
    Allow,
    /// The call waits for a human (`pending_approval`, cause `provenance`).
    RequireApproval,
    /// The call is refused (`policy_denied`, reason `provenance`).
    Deny,
}

/// How the flow policy judges a call in a session with sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum FlowMode {
    /// Session-level taint (the strict mode, the default): once any source is in context, every
    /// state change of the configured risk and every egress beyond the allowlists is judged by
    /// the session rules ([`FlowPolicy::state_change`], [`FlowPolicy::egress`]).
    #[default]
    Session,
    /// Per argument (the precise mode): each field of a state-changing or egress call has an
    /// [`Origin`]; only a field whose value came from untrusted content is judged, by its
    /// [`Role`] ([`FlowPolicy::role`]). Needs host keys to be precise across replicas (see
    /// [`ValueKey`](super::ValueKey)).
    PerArgument,
}

/// What an untrusted value does in a field of each role (the precise mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RoleRules([FlowAction; 4]);

impl RoleRules {
    const DEFAULT: RoleRules = RoleRules([
        FlowAction::RequireApproval, // destination
        FlowAction::RequireApproval, // amount
        FlowAction::RequireApproval, // content leaving to a destination that is not trusted
        FlowAction::Allow,           // selector
    ]);

    fn index(role: Role) -> usize {
        match role {
            Role::Destination => 0,
            Role::Amount => 1,
            Role::Content => 2,
            _ => 3,
        }
    }

    fn get(&self, role: Role) -> FlowAction {
        self.0[Self::index(role)]
    }

    fn set(&mut self, role: Role, action: FlowAction) {
        self.0[Self::index(role)] = action;
    }
}

/// The flow rules of one tool, overriding the per-risk defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlowRule {
    /// For a state-changing call (a tool that is not `read_only`).
    pub state_change: FlowAction,
    /// For an `egress` call whose destinations are not all allowlisted.
    pub egress: FlowAction,
}

/// What a session with provenance sources may do unattended. Part of the
/// [`RiskPolicy`](crate::RiskPolicy) ([`RiskPolicy::flow`](crate::RiskPolicy::flow)); its rules
/// only apply to calls in a session with at least one source in context.
///
/// Defaults: a state-changing tool of risk `high` or `critical` needs approval (below that:
/// allowed); an `egress` tool whose destination fields (`kind = "email"`/`"url"`) are not all
/// restricted by a sanitizer allowlist ([`Sanitizer::allow_email_domains`],
/// [`Sanitizer::allow_url_hosts`]) needs approval. Where several rules apply, the strictest wins.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct FlowPolicy {
    state_change: [FlowAction; 4],
    egress: FlowAction,
    tools: HashMap<String, FlowRule>,
    mode: FlowMode,
    roles: [RoleRules; 4],
    tool_roles: HashMap<String, [Option<FlowAction>; 4]>,
    fields: HashMap<(String, String), FlowAction>,
    user_destinations: bool,
    copied_content: bool,
}

impl Default for FlowPolicy {
    fn default() -> Self {
        FlowPolicy {
            state_change: [
                FlowAction::Allow,
                FlowAction::Allow,
                FlowAction::RequireApproval,
                FlowAction::RequireApproval,
            ],
            egress: FlowAction::RequireApproval,
            tools: HashMap::new(),
            mode: FlowMode::Session,
            roles: [RoleRules::DEFAULT; 4],
            tool_roles: HashMap::new(),
            fields: HashMap::new(),
            user_destinations: false,
            copied_content: false,
        }
    }
}

fn risk_index(risk: Risk) -> usize {
    match risk {
        Risk::Low => 0,
        Risk::Medium => 1,
        Risk::High => 2,
        Risk::Critical => 3,
    }
}

impl FlowPolicy {
    /// A policy that allows everything (provenance is recorded and audited, never acted on).
    pub fn allow_all() -> Self {
        FlowPolicy {
            state_change: [FlowAction::Allow; 4],
            egress: FlowAction::Allow,
            roles: [RoleRules([FlowAction::Allow; 4]); 4],
            ..FlowPolicy::default()
        }
    }

    /// The precise mode ([`FlowMode::PerArgument`]) with its defaults. In a session with
    /// sources, a call waits for a human when:
    ///
    /// - a destination or an amount came from untrusted content (any risk);
    /// - a selector came from untrusted content, in a state change of high or critical risk
    ///   (which account, file or member an irreversible change works on);
    /// - content carries untrusted values to a destination that is not trusted (egress), or, in
    ///   any state change, content copies a whole value from untrusted content or carries an
    ///   address, URL, account or phone number from it ([`copied_content`](Self::copied_content):
    ///   a password or a link an injection dictated; quoting facts one read runs);
    /// - a destination of an egress call or of a high- or critical-risk change was seen only in
    ///   a trusted tool's output, never in the user's own input
    ///   ([`user_destinations`](Self::user_destinations): untrusted content can make the agent
    ///   look a destination up before using it; an e-mail address whose local part spells a
    ///   name the user typed counts as theirs).
    ///
    /// A destination field restricted by a sanitizer allowlist is never held for its origin
    /// (the host vouched for every value it admits), and a call whose every judged argument is
    /// trusted or the model's own runs.
    pub fn per_argument() -> Self {
        FlowPolicy::default()
            .mode(FlowMode::PerArgument)
            .role(Risk::High, Role::Selector, FlowAction::RequireApproval)
            .role(Risk::Critical, Role::Selector, FlowAction::RequireApproval)
            .user_destinations(true)
            .copied_content(true)
    }

    /// In the precise mode: whether a destination of an egress call or of a state change of
    /// high or critical risk must be seen in the user's own input
    /// ([`Dispatcher::add_trusted_input`](crate::Dispatcher::add_trusted_input)); when `true`,
    /// one seen only in a trusted tool's output is judged by the destination rule as if it came
    /// from untrusted content. An e-mail address whose local part spells a name the user typed
    /// (`david.smith@…` after `Reply to David's e-mail`) was named by the user. On in
    /// [`per_argument`](Self::per_argument).
    pub fn user_destinations(mut self, on: bool) -> Self {
        self.user_destinations = on;
        self
    }

    /// In the precise mode: whether content of a state change that copies a whole value from
    /// untrusted content, or carries an address, URL, account or phone number from it, is judged
    /// by the content rule even when the call sends nothing out. On in
    /// [`per_argument`](Self::per_argument).
    pub fn copied_content(mut self, on: bool) -> Self {
        self.copied_content = on;
        self
    }

    /// Sets the mode.
    pub fn mode(mut self, mode: FlowMode) -> Self {
        self.mode = mode;
        self
    }

    /// The mode.
    pub fn current_mode(&self) -> FlowMode {
        self.mode
    }

    /// In the precise mode: what a call of a tool of `risk` does when a field of `role` carries
    /// a value from untrusted content (for `content`: when it leaves through an egress tool to
    /// a destination that is not trusted).
    pub fn role(mut self, risk: Risk, role: Role, action: FlowAction) -> Self {
        self.roles[risk_index(risk)].set(role, action);
        self
    }

    /// [`role`](Self::role) for every risk level.
    pub fn every_risk_role(mut self, role: Role, action: FlowAction) -> Self {
        for rules in &mut self.roles {
            rules.set(role, action);
        }
        self
    }

    /// In the precise mode: [`role`](Self::role) for the calls of `tool` only.
    pub fn tool_role(mut self, tool: &str, role: Role, action: FlowAction) -> Self {
        self.tool_roles.entry(tool.to_owned()).or_default()[RoleRules::index(role)] = Some(action);
        self
    }

    /// In the precise mode: what a call of `tool` does when its field `field` carries a value
    /// from untrusted content, whatever the field's role.
    pub fn field(mut self, tool: &str, field: &str, action: FlowAction) -> Self {
        self.fields
            .insert((tool.to_owned(), field.to_owned()), action);
        self
    }

    /// The fields with rules of their own, as (tool, field) (checked against the registry at
    /// build).
    pub(crate) fn configured_fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.keys().map(|(t, f)| (t.as_str(), f.as_str()))
    }

    /// Whether calls of `spec` are judged per argument: the precise mode, and no session-level
    /// rule of the tool's own ([`tool`](Self::tool) keeps a tool strict in either mode).
    pub fn per_argument_for(&self, spec: &ToolSpec) -> bool {
        self.mode == FlowMode::PerArgument && !self.tools.contains_key(&spec.name)
    }

    /// The action for an untrusted value in `field` (of `role`) of a call of `spec`.
    fn field_action(&self, spec: &ToolSpec, field: &str, role: Role) -> FlowAction {
        if let Some(a) = self.fields.get(&(spec.name.clone(), field.to_owned())) {
            return *a;
        }
        self.tool_roles
            .get(&spec.name)
            .and_then(|own| own[RoleRules::index(role)])
            .unwrap_or_else(|| self.roles[risk_index(spec.risk)].get(role))
    }

    /// The precise mode's action for a call of `spec` whose arguments have `origins`: the
    /// strictest over its judged fields, with the field that decided it. `sends_out`: this call
    /// sends data out (see [`FlowPolicy::action_for_call`]: an egress tool whose `egress_when`
    /// fields are unset, or name only internal addresses, does not).
    pub fn argument_action<'o>(
        &self,
        spec: &ToolSpec,
        sanitizer: &Sanitizer,
        origins: &'o [ArgumentOrigin],
        sends_out: bool,
    ) -> (FlowAction, Option<&'o ArgumentOrigin>) {
        // Content leaves to a destination that is not trusted: an egress tool whose destinations
        // are neither allowlisted nor all of them the user's own (a tool with no destination
        // field cannot show where data goes).
        let mut destinations = origins.iter().filter(|o| o.role == Role::Destination);
        let trusted_destinations = destinations.clone().next().is_some()
            && destinations.all(|o| o.origin == Origin::Trusted);
        let egress_out =
            sends_out && !trusted_destinations && !destinations_allowlisted(spec, sanitizer);
        let mut worst = (FlowAction::Allow, None);
        for o in origins {
            if !self.judged(spec, sanitizer, o, sends_out, egress_out) {
                continue;
            }
            let action = self.field_action(spec, &o.field, o.role);
            if action > worst.0 {
                worst = (action, Some(o));
            }
        }
        worst
    }

    /// Whether the precise mode judges the field `o` of a call of `spec` (which sends data out
    /// when `sends_out`, to a destination that is not trusted when `egress_out`).
    fn judged(
        &self,
        spec: &ToolSpec,
        sanitizer: &Sanitizer,
        o: &ArgumentOrigin,
        sends_out: bool,
        egress_out: bool,
    ) -> bool {
        let own = self
            .fields
            .contains_key(&(spec.name.clone(), o.field.clone()));
        if o.role == Role::Destination && sanitizer.destination_allowlisted(&spec.name, &o.field) {
            // Only the values the host allowlisted get through the sanitizer.
            return own && o.origin.is_untrusted();
        }
        if o.origin == Origin::Trusted || (o.unplaced && o.origin == Origin::Model) {
            // An unplaced `model` value may be one only a trusted tool's output named.
            return self.user_destinations
                && o.output_only
                && o.role == Role::Destination
                && (sends_out || spec.risk >= Risk::High);
        }
        if !o.origin.is_untrusted() {
            return false;
        }
        match o.role {
            _ if own => true,
            Role::Content => egress_out || (self.copied_content && !spec.read_only && !o.inner),
            Role::Selector => !spec.read_only,
            _ => true,
        }
    }

    /// What a state-changing call of a tool of `risk` does in a session with sources.
    pub fn state_change(mut self, risk: Risk, action: FlowAction) -> Self {
        self.state_change[risk_index(risk)] = action;
        self
    }

    /// What an `egress` call to a destination that is not allowlisted does in a session with
    /// sources.
    pub fn egress(mut self, action: FlowAction) -> Self {
        self.egress = action;
        self
    }

    /// Both rules of `tool` (state change and egress) in a session with sources.
    pub fn tool(self, tool: &str, action: FlowAction) -> Self {
        self.tool_rule(
            tool,
            FlowRule {
                state_change: action,
                egress: action,
            },
        )
    }

    /// The rules of `tool`, one per concern.
    pub fn tool_rule(mut self, tool: &str, rule: FlowRule) -> Self {
        self.tools.insert(tool.to_owned(), rule);
        self
    }

    /// The tool names with rules of their own (checked against the registry at build).
    pub(crate) fn configured_tools(&self) -> impl Iterator<Item = &str> {
        self.tools
            .keys()
            .chain(self.tool_roles.keys())
            .map(String::as_str)
    }

    /// The action for a call of `spec` in a session with sources: the strictest of the rules
    /// that apply (state change, egress beyond the allowlists).
    pub fn action(&self, spec: &ToolSpec, sanitizer: &Sanitizer) -> FlowAction {
        self.decide(spec, sanitizer, spec.egress != Egress::None)
    }

    /// The action for this call of `spec`, with `args`: as [`action`](Self::action), but a
    /// tool that sends data out only when one of its `egress_when` fields is set is egress only
    /// for the calls that set one.
    pub fn action_for_call(
        &self,
        spec: &ToolSpec,
        sanitizer: &Sanitizer,
        args: &Value,
    ) -> FlowAction {
        self.decide(spec, sanitizer, sends_out(spec, args))
    }

    fn decide(&self, spec: &ToolSpec, sanitizer: &Sanitizer, egress: bool) -> FlowAction {
        let own = self.tools.get(&spec.name);
        let mut action = FlowAction::Allow;
        if !spec.read_only {
            let rule = own.map_or(self.state_change[risk_index(spec.risk)], |r| r.state_change);
            action = action.max(rule);
        }
        if egress && !destinations_allowlisted(spec, sanitizer) {
            action = action.max(own.map_or(self.egress, |r| r.egress));
        }
        action
    }
}

/// Whether a call of `spec` with `args` sends data out: the tool declares egress and, when
/// some of its fields are marked `egress_when` (data leaves only through them: a calendar
/// event's participants), one of them is set (present, not null, not empty) or, for a field
/// with internal addresses (`egress = "outside"`), carries an address outside them.
pub(crate) fn sends_out(spec: &ToolSpec, args: &Value) -> bool {
    if spec.egress == Egress::None {
        return false;
    }
    let mut when = spec.fields.iter().filter(|f| f.egress_when).peekable();
    if when.peek().is_none() {
        return true;
    }
    when.any(|f| match args.get(&f.name) {
        None | Some(Value::Null) => false,
        Some(value) if !f.egress_internal.is_empty() => names_outside(f, value),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    })
}

/// Whether `value` of field `f` (a string, or strings nested in arrays and objects) names an
/// address outside the field's internal hosts and domains; anything but such strings, or an
/// address that cannot be read, counts as outside.
fn names_outside(f: &FieldSpec, value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::String(s) => {
            !s.is_empty()
                && !toolguard_sanitize::destination::is_inside(f.kind, s, &f.egress_internal)
        }
        Value::Array(items) => items.iter().any(|v| names_outside(f, v)),
        Value::Object(map) => map.values().any(|v| names_outside(f, v)),
        _ => true,
    }
}

/// Whether every destination field of `spec` (kind `email` or `url`) admits only allowlisted
/// values. A tool with no destination field cannot show where its data goes: not allowlisted.
pub(crate) fn destinations_allowlisted(spec: &ToolSpec, sanitizer: &Sanitizer) -> bool {
    let mut destinations = destination_fields(spec).peekable();
    destinations.peek().is_some()
        && destinations.all(|f| sanitizer.destination_allowlisted(&spec.name, f))
}

/// The fields of `spec` that name where data goes (kind `email` or `url`).
pub(crate) fn destination_fields(spec: &ToolSpec) -> impl Iterator<Item = &str> {
    spec.fields
        .iter()
        .filter(|f| matches!(f.kind, FieldKind::Email | FieldKind::Url))
        .map(|f| f.name.as_str())
}

/// Applies the flow policy to a call whose other rules allowed it: with no source in context,
/// nothing changes; otherwise a hold adds the cause `provenance` (unless another cause already
/// holds the call) and a denial stops it. In the session mode the message names the latest
/// source; in the precise mode it names the field, its origin and its source.
pub(crate) fn judge(
    policy: &FlowPolicy,
    sanitizer: &Sanitizer,
    spec: &ToolSpec,
    args: &Value,
    sources: &[Source],
    origins: &[ArgumentOrigin],
    approval_cause: &mut Option<String>,
) -> Result<(), Stop> {
    let Some(latest) = sources.iter().max_by_key(|s| s.at_ms) else {
        return Ok(());
    };
    let (action, why) = if policy.per_argument_for(spec) {
        let (action, field) =
            policy.argument_action(spec, sanitizer, origins, sends_out(spec, args));
        (
            action,
            field.map(|f| field_reason(f, sources)).unwrap_or_default(),
        )
    } else {
        let why = format!(
            "this call follows untrusted content ({})",
            latest.describe()
        );
        (policy.action_for_call(spec, sanitizer, args), why)
    };
    match action {
        FlowAction::Allow => Ok(()),
        FlowAction::RequireApproval => {
            approval_cause.get_or_insert_with(|| CAUSE.to_owned());
            Ok(())
        }
        FlowAction::Deny => Err(Stop::new(
            Status::PolicyDenied,
            CAUSE,
            format!("{why}; the flow policy refuses it; nothing was done"),
        )),
    }
}

/// `field `to` (destination): untrusted (…) came from untrusted content: the result of …`, or,
/// for a destination only a tool's output holds, that the user did not name it; for a value
/// placed nowhere in a session that no longer holds all of its content, that it may.
fn field_reason(field: &ArgumentOrigin, sources: &[Source]) -> String {
    let source = match &field.origin {
        Origin::Untrusted { .. } if field.unplaced => {
            return format!(
                "field {}, and is judged as untrusted content",
                field.describe()
            );
        }
        Origin::Untrusted { source, .. } => sources
            .iter()
            .find(|s| &s.id == source)
            .map_or_else(|| format!("source {source}"), Source::describe),
        _ if field.unplaced => {
            return format!(
                "field `{}` ({}) may be a destination the user did not name (seen in no input \
                 this session still holds, which is incomplete), in a session that read \
                 untrusted content",
                field.field,
                field.role.name()
            );
        }
        _ => {
            return format!(
                "field `{}` ({}) is a destination the user did not name (seen only in a trusted \
                 tool's output), in a session that read untrusted content",
                field.field,
                field.role.name()
            );
        }
    };
    format!(
        "field {} came from untrusted content: {source}",
        field.describe()
    )
}

/// The hold message of a call the flow policy sent to a human: the precise mode names the
/// field that decided, its origin and its source; the session mode the latest source.
pub(crate) fn hold_message(
    policy: &FlowPolicy,
    sanitizer: &Sanitizer,
    spec: &ToolSpec,
    args: Option<&Value>,
    sources: &[Source],
    origins: &[ArgumentOrigin],
) -> Option<String> {
    hold_reason(policy, sanitizer, spec, args, sources, origins)
        .map(|why| format!("a human must approve this action: {why}"))
}

/// Why the flow policy sent a call to a human, as a sentence (the reviewer's "why it waits"):
/// the field that decided with its origin and source, or the latest source. `args`: the call's
/// arguments, when known (without them, an egress tool is taken to send data out).
pub(crate) fn hold_reason(
    policy: &FlowPolicy,
    sanitizer: &Sanitizer,
    spec: &ToolSpec,
    args: Option<&Value>,
    sources: &[Source],
    origins: &[ArgumentOrigin],
) -> Option<String> {
    let latest = sources.iter().max_by_key(|s| s.at_ms)?;
    let out = args.map_or(spec.egress != Egress::None, |a| sends_out(spec, a));
    if policy.per_argument_for(spec)
        && let (_, Some(field)) = policy.argument_action(spec, sanitizer, origins, out)
    {
        return Some(field_reason(field, sources));
    }
    Some(format!(
        "it follows untrusted content ({})",
        latest.describe()
    ))
}

/// The approval cause and denial reason of the flow policy.
pub const CAUSE: &str = "provenance";

/// The build-time check of an `egress = "allowlisted"` tool: it has destination fields, and the
/// sanitizer restricts each of them to an allowlist. Anything else would let data out to any
/// destination while the declaration claims otherwise.
pub(crate) fn check_egress(spec: &ToolSpec, sanitizer: &Sanitizer) -> Result<(), String> {
    if spec.egress != Egress::Allowlisted {
        return Ok(());
    }
    let fields: Vec<&str> = destination_fields(spec).collect();
    if fields.is_empty() {
        return Err(
            "`egress = \"allowlisted\"` needs a destination field (`kind = \"email\"` or \
             `kind = \"url\"`) whose values the sanitizer restricts"
                .to_owned(),
        );
    }
    for field in fields {
        if !sanitizer.destination_allowlisted(&spec.name, field) {
            return Err(format!(
                "`egress = \"allowlisted\"`, but destination field `{field}` has no allowlist: \
                 configure `Sanitizer::allow_email_domains` or `Sanitizer::allow_url_hosts` for \
                 (`{}`, `{field}`), or declare `egress` (open, held for approval after untrusted \
                 content)",
                spec.name
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::spec::FieldSpec;

    fn spec(name: &str, risk: Risk, read_only: bool) -> ToolSpec {
        let mut s = ToolSpec::new(name, "d", json!({"type": "object"}), json!({}));
        s.risk = risk;
        s.read_only = read_only;
        s
    }

    fn mailer() -> ToolSpec {
        let mut s = spec("send_email", Risk::Medium, false);
        s.egress = Egress::Open;
        let mut to = FieldSpec::new("to");
        to.kind = FieldKind::Email;
        s.fields.push(to);
        s
    }

    #[test]
    fn a_tool_with_egress_fields_sends_out_only_when_one_is_set() {
        let mut s = mailer();
        s.fields[0].egress_when = true;
        let p = FlowPolicy::default();
        let none = Sanitizer::new();
        for unset in [
            json!({}),
            json!({"to": null}),
            json!({"to": []}),
            json!({"to": ""}),
        ] {
            assert!(!sends_out(&s, &unset), "{unset}");
            assert_eq!(p.action_for_call(&s, &none, &unset), FlowAction::Allow);
        }
        let set = json!({"to": ["eve@example.org"]});
        assert!(sends_out(&s, &set));
        assert_eq!(
            p.action_for_call(&s, &none, &set),
            FlowAction::RequireApproval
        );
        // Without egress fields, every call of an egress tool sends out.
        assert!(sends_out(&mailer(), &json!({})));
        s.egress = Egress::None;
        assert!(!sends_out(&s, &set));
    }

    #[test]
    fn an_outside_egress_field_sends_out_only_to_addresses_outside_the_internal_set() {
        let mut s = mailer();
        s.fields[0].egress_when = true;
        s.fields[0].egress_internal = vec!["example.com".into(), "*.example.com".into()];
        for inside in [
            json!({"to": []}),
            json!({"to": ["ann@example.com", "bob@mail.example.com"]}),
            json!({"to": "ANN@Example.COM"}),
        ] {
            assert!(!sends_out(&s, &inside), "{inside}");
        }
        for outside in [
            json!({"to": ["ann@example.com", "eve@example.org"]}),
            json!({"to": ["eve@notexample.com"]}),
            json!({"to": ["no address"]}),
            json!({"to": [7]}),
        ] {
            assert!(sends_out(&s, &outside), "{outside}");
        }
    }

    #[test]
    fn the_precise_mode_reads_egress_fields_too() {
        // A calendar event: data leaves only through participants outside the organization.
        let mut s = spec("create_calendar_event", Risk::Medium, false);
        s.egress = Egress::Open;
        let mut participants = FieldSpec::new("participants");
        participants.kind = FieldKind::Email;
        participants.egress_when = true;
        participants.egress_internal = vec!["example.com".into()];
        s.fields.push(participants);
        s.fields.push(FieldSpec::new("description"));
        let p = FlowPolicy::per_argument();
        let none = Sanitizer::new();
        // The description carries a fact read in untrusted content.
        let mut quoted = untrusted("description", Role::Content);
        quoted.inner = true;
        let origins = [
            quoted,
            ArgumentOrigin::new("participants", Role::Destination, Origin::Model),
        ];
        let inside = json!({"participants": ["ann@example.com"], "description": "x"});
        let outside = json!({"participants": ["eve@example.org"], "description": "x"});
        let act = |args: &Value| {
            p.argument_action(&s, &none, &origins, sends_out(&s, args))
                .0
        };
        assert_eq!(act(&inside), FlowAction::Allow);
        assert!(act(&outside) > FlowAction::Allow, "{:?}", act(&outside));
    }

    #[test]
    fn defaults_hold_high_state_changes_and_unlisted_egress() {
        let p = FlowPolicy::default();
        let s = Sanitizer::new();
        assert_eq!(
            p.action(&spec("t", Risk::High, false), &s),
            FlowAction::RequireApproval
        );
        assert_eq!(
            p.action(&spec("t", Risk::Medium, false), &s),
            FlowAction::Allow
        );
        assert_eq!(
            p.action(&spec("t", Risk::Critical, true), &s),
            FlowAction::Allow
        );
        assert_eq!(p.action(&mailer(), &s), FlowAction::RequireApproval);
        let listed = Sanitizer::new().allow_email_domains("send_email", "to", ["example.com"]);
        assert_eq!(p.action(&mailer(), &listed), FlowAction::Allow);
    }

    #[test]
    fn tool_rules_override_risk_defaults_and_strictest_wins() {
        let p = FlowPolicy::default()
            .tool("t", FlowAction::Allow)
            .egress(FlowAction::Deny);
        let s = Sanitizer::new();
        assert_eq!(
            p.action(&spec("t", Risk::High, false), &s),
            FlowAction::Allow
        );
        assert_eq!(p.action(&mailer(), &s), FlowAction::Deny);
        let p = p.state_change(Risk::Medium, FlowAction::RequireApproval);
        assert_eq!(
            p.action(&spec("u", Risk::Medium, false), &s),
            FlowAction::RequireApproval
        );
    }

    fn untrusted(field: &str, role: Role) -> ArgumentOrigin {
        ArgumentOrigin::new(
            field,
            role,
            Origin::Untrusted {
                source: "src_1".into(),
                call_id: None,
            },
        )
    }

    #[test]
    fn per_argument_defaults_hold_what_untrusted_content_steers() {
        let p = FlowPolicy::per_argument();
        let none = Sanitizer::new();
        let act = |spec: &ToolSpec, o: ArgumentOrigin| {
            p.argument_action(spec, &none, &[o], spec.egress != Egress::None)
                .0
        };
        let high = spec("delete_file", Risk::High, false);
        let medium = spec("append", Risk::Medium, false);
        // A selector: only an irreversible change waits.
        let selector = untrusted("file_id", Role::Selector);
        assert_eq!(act(&high, selector.clone()), FlowAction::RequireApproval);
        assert_eq!(act(&medium, selector), FlowAction::Allow);
        // Content of a state change: a copied value or an address waits, a fact quoted runs.
        let copied = untrusted("content", Role::Content);
        assert_eq!(act(&medium, copied.clone()), FlowAction::RequireApproval);
        let mut quoted = copied.clone();
        quoted.inner = true;
        assert_eq!(act(&medium, quoted), FlowAction::Allow);
        let lenient = p.clone().copied_content(false);
        assert_eq!(
            lenient.argument_action(&medium, &none, &[copied], false).0,
            FlowAction::Allow
        );
        // A destination only a tool's output named: waits on a high-risk change or egress.
        let mut looked_up = ArgumentOrigin::new("to", Role::Destination, Origin::Trusted);
        looked_up.output_only = true;
        assert_eq!(act(&high, looked_up.clone()), FlowAction::RequireApproval);
        assert_eq!(
            act(&mailer(), looked_up.clone()),
            FlowAction::RequireApproval
        );
        assert_eq!(act(&medium, looked_up.clone()), FlowAction::Allow);
        let (_, field) = p.argument_action(&high, &none, std::slice::from_ref(&looked_up), false);
        assert!(field_reason(field.unwrap(), &[]).contains("the user did not name"));
        let named = ArgumentOrigin::new("to", Role::Destination, Origin::Trusted);
        assert_eq!(act(&high, named), FlowAction::Allow);
        assert_eq!(
            p.clone()
                .user_destinations(false)
                .argument_action(&high, &none, &[looked_up], false)
                .0,
            FlowAction::Allow
        );
        // An allowlisted destination is the host's word, whatever its origin.
        let listed = Sanitizer::new().allow_email_domains("send_email", "to", ["example.com"]);
        assert_eq!(
            p.argument_action(
                &mailer(),
                &listed,
                &[untrusted("to", Role::Destination)],
                true
            )
            .0,
            FlowAction::Allow
        );
        assert_eq!(
            act(&mailer(), untrusted("to", Role::Destination)),
            FlowAction::RequireApproval
        );
    }

    #[test]
    fn judging_a_clean_session_changes_nothing() {
        let mut cause = None;
        let p = FlowPolicy::default().state_change(Risk::High, FlowAction::Deny);
        let s = spec("t", Risk::High, false);
        judge(
            &p,
            &Sanitizer::new(),
            &s,
            &Value::Null,
            &[],
            &[],
            &mut cause,
        )
        .unwrap();
        assert_eq!(cause, None);
        let src = Source::tool_result("read_email", "c-1", None, 3, None);
        let stop = judge(
            &p,
            &Sanitizer::new(),
            &s,
            &Value::Null,
            &[src],
            &[],
            &mut cause,
        )
        .unwrap_err();
        assert_eq!(stop.reason.as_deref(), Some(CAUSE));
        assert!(stop.message.unwrap().contains("read_email call c-1"));
    }
}
