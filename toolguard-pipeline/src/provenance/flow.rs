//! The flow policy: what a session that has read untrusted content may still do unattended.

use serde_json::Value;
use std::collections::HashMap;

use super::Source;
use crate::outcome::Status;
use crate::outcome::Stop;
use crate::sanitize::Sanitizer;
use crate::spec::{Egress, FieldKind, Risk, ToolSpec};

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
            tools: HashMap::new(),
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
        self.tools.keys().map(String::as_str)
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
/// event's participants), one of them is set (present, not null, not empty).
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
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    })
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
/// holds the call) and a denial stops it, each naming the latest source.
pub(crate) fn judge(
    policy: &FlowPolicy,
    sanitizer: &Sanitizer,
    spec: &ToolSpec,
    args: &Value,
    sources: &[Source],
    approval_cause: &mut Option<String>,
) -> Result<(), Stop> {
    let Some(latest) = sources.iter().max_by_key(|s| s.at_ms) else {
        return Ok(());
    };
    match policy.action_for_call(spec, sanitizer, args) {
        FlowAction::Allow => Ok(()),
        FlowAction::RequireApproval => {
            approval_cause.get_or_insert_with(|| CAUSE.to_owned());
            Ok(())
        }
        FlowAction::Deny => Err(Stop::new(
            Status::PolicyDenied,
            CAUSE,
            format!(
                "this call follows untrusted content ({}) and the flow policy refuses it in such \
                 a session; nothing was done",
                latest.describe()
            ),
        )),
    }
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

    #[test]
    fn judging_a_clean_session_changes_nothing() {
        let mut cause = None;
        let p = FlowPolicy::default().state_change(Risk::High, FlowAction::Deny);
        let s = spec("t", Risk::High, false);
        judge(&p, &Sanitizer::new(), &s, &Value::Null, &[], &mut cause).unwrap();
        assert_eq!(cause, None);
        let src = Source::tool_result("read_email", "c-1", None, 3, None);
        let stop = judge(&p, &Sanitizer::new(), &s, &Value::Null, &[src], &mut cause).unwrap_err();
        assert_eq!(stop.reason.as_deref(), Some(CAUSE));
        assert!(stop.message.unwrap().contains("read_email call c-1"));
    }
}
