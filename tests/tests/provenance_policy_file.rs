//! The policy file's provenance keys: `[flow] mode`, the rule per role at every risk level and
//! per risk level, a tool's `flow_roles` and `flow_fields`, and a field's `role`. Each key
//! parses, takes effect in the flow policy the dispatcher is built with, and a wrong value is a
//! load error naming its line.

use serde_json::{Value, json};
use toolguard::policy::{Offered, Policy, PolicyError};
use toolguard::provenance::{ArgumentOrigin, FlowAction, FlowMode, FlowPolicy, Origin};
use toolguard::sanitize::Sanitizer;
use toolguard::{Role, ToolSpec};

const PRINCIPAL: &str =
    "[principal]\ntenant = \"acme\"\nsubject = \"agent\"\nroles = [\"agent\"]\n";

/// A mailer (medium risk, open egress) and a transfer (high risk) of the upstream.
const TOOLS: &str = "
[tools.send_mail]
risk = \"medium\"
read_only = false
egress = \"open\"
output = \"trusted\"
fields.\"/to\" = { kind = \"email\" }
fields.\"/body\" = { max_len = 500 }

[tools.pay]
risk = \"high\"
read_only = false
idempotent = true
output = \"trusted\"
amount = \"/amount\"
fields.\"/recipient\" = { kind = \"identifier\", max_len = 40, role = \"destination\" }
";

fn parse(text: &str) -> Result<Policy, PolicyError> {
    Policy::parse("policy.toml", text.to_owned())
}

fn offered() -> Vec<Offered> {
    let tool = |name: &str, schema: Value| Offered {
        name: name.to_owned(),
        description: format!("The upstream's {name}."),
        input_schema: schema,
    };
    vec![
        tool(
            "send_mail",
            json!({"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}, "required": ["to", "body"]}),
        ),
        tool(
            "pay",
            json!({"type": "object", "properties": {
                "recipient": {"type": "string", "description": "Recipient account."},
                "amount": {"type": "integer", "minimum": 1, "maximum": 1000000, "description": "Amount in cents."}},
                "required": ["recipient", "amount"]}),
        ),
    ]
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

fn model(field: &str, role: Role) -> ArgumentOrigin {
    ArgumentOrigin::new(field, role, Origin::Model)
}

/// The policy of `flow` (a `[flow]` section and tool keys) with the specs it declares.
fn load(flow: &str, tool_keys: &str) -> (Policy, Vec<ToolSpec>) {
    let text = format!("{PRINCIPAL}{flow}\n{TOOLS}{tool_keys}");
    let policy = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let specs = policy.declare_offered(&offered()).unwrap();
    (policy, specs)
}

fn action(
    policy: &Policy,
    specs: &[ToolSpec],
    tool: &str,
    origins: &[ArgumentOrigin],
) -> FlowAction {
    let risk = policy.risk_policy(specs);
    let spec = specs.iter().find(|s| s.name == tool).unwrap();
    let flow = risk.current_flow();
    assert!(flow.per_argument_for(spec), "{tool} judged per argument");
    let sends_out = spec.egress != toolguard::Egress::None;
    flow.argument_action(spec, &Sanitizer::new(), origins, sends_out)
        .0
}

#[test]
fn mode_selects_the_precise_or_the_session_mode() {
    let (policy, specs) = load("[flow]\nmode = \"per_argument\"\n", "");
    assert_eq!(
        policy.risk_policy(&specs).current_flow().current_mode(),
        FlowMode::PerArgument
    );
    let (policy, specs) = load("", "");
    assert_eq!(
        policy.risk_policy(&specs).current_flow().current_mode(),
        FlowMode::Session
    );
    // The file's per-argument mode is the library's, defaults included.
    let (policy, specs) = load("[flow]\nmode = \"per_argument\"\n", "");
    assert_eq!(
        policy.risk_policy(&specs).current_flow(),
        &FlowPolicy::per_argument()
    );
    let (policy, specs) = load(
        "[flow]\nmode = \"per_argument\"\nuser_destinations = false\ncopied_content = false\n",
        "",
    );
    assert_eq!(
        policy.risk_policy(&specs).current_flow(),
        &FlowPolicy::per_argument()
            .user_destinations(false)
            .copied_content(false)
    );
    let err = parse(&format!("{PRINCIPAL}[flow]\nmode = \"precise\"\n")).unwrap_err();
    assert_eq!(err.line, Some(6), "{err}");
    assert!(err.to_string().contains("per_argument"), "{err}");
}

#[test]
fn a_role_rule_applies_at_every_risk_level() {
    let (policy, specs) = load(
        "[flow]\nmode = \"per_argument\"\ndestination = \"deny\"\n",
        "",
    );
    let dest = [untrusted("to", Role::Destination)];
    assert_eq!(
        action(&policy, &specs, "send_mail", &dest),
        FlowAction::Deny
    );
    let dest = [untrusted("recipient", Role::Destination)];
    assert_eq!(action(&policy, &specs, "pay", &dest), FlowAction::Deny);
    // The defaults of the other roles stay.
    let amount = [untrusted("amount", Role::Amount)];
    assert_eq!(
        action(&policy, &specs, "pay", &amount),
        FlowAction::RequireApproval
    );
    let err = parse(&format!("{PRINCIPAL}[flow]\ndestinaton = \"deny\"\n")).unwrap_err();
    assert!(
        err.to_string().contains("unknown field `destinaton`"),
        "{err}"
    );
}

#[test]
fn a_risk_level_rule_applies_to_that_level_only() {
    let (policy, specs) = load(
        "[flow]\nmode = \"per_argument\"\nrisk.high = { destination = \"deny\" }\n",
        "",
    );
    let dest = [untrusted("recipient", Role::Destination)];
    assert_eq!(action(&policy, &specs, "pay", &dest), FlowAction::Deny);
    let dest = [untrusted("to", Role::Destination)];
    assert_eq!(
        action(&policy, &specs, "send_mail", &dest),
        FlowAction::RequireApproval
    );
    let err = parse(&format!(
        "{PRINCIPAL}[flow]\nrisk.severe = {{ amount = \"deny\" }}\n"
    ))
    .unwrap_err();
    assert!(err.to_string().contains("critical"), "{err}");
}

#[test]
fn a_tools_flow_roles_override_the_defaults_for_that_tool() {
    let (policy, specs) = load(
        "[flow]\nmode = \"per_argument\"\n",
        "flow_roles = { destination = \"allow\" }\n",
    );
    // The key belongs to the last table, `[tools.pay]`.
    let dest = [untrusted("recipient", Role::Destination)];
    assert_eq!(action(&policy, &specs, "pay", &dest), FlowAction::Allow);
    let dest = [untrusted("to", Role::Destination)];
    assert_eq!(
        action(&policy, &specs, "send_mail", &dest),
        FlowAction::RequireApproval
    );
    // Content carrying read data to a made-up recipient: egress, held by default.
    let (policy, specs) = load("[flow]\nmode = \"per_argument\"\n", "");
    let body = [
        model("to", Role::Destination),
        untrusted("body", Role::Content),
    ];
    assert_eq!(
        action(&policy, &specs, "send_mail", &body),
        FlowAction::RequireApproval
    );
}

#[test]
fn a_tools_flow_fields_set_the_rule_of_one_field() {
    let (policy, specs) = load(
        "[flow]\nmode = \"per_argument\"\n",
        "flow_fields = { \"/amount\" = \"deny\" }\n",
    );
    let amount = [untrusted("amount", Role::Amount)];
    assert_eq!(action(&policy, &specs, "pay", &amount), FlowAction::Deny);
    let err = parse(&format!(
        "{PRINCIPAL}{TOOLS}flow_fields = {{ \"amount\" = \"deny\" }}\n"
    ))
    .unwrap_err();
    assert!(err.to_string().contains("flow_fields"), "{err}");
}

#[test]
fn a_fields_role_is_declared_in_the_spec() {
    let (_, specs) = load("", "");
    let pay = specs.iter().find(|s| s.name == "pay").unwrap();
    assert_eq!(
        pay.field("recipient").unwrap().role,
        Some(Role::Destination)
    );
    assert_eq!(pay.field("recipient").unwrap().role(), Role::Destination);
    let mail = specs.iter().find(|s| s.name == "send_mail").unwrap();
    assert_eq!(mail.field("body").unwrap().role(), Role::Content);
    let err = parse(&format!(
        "{PRINCIPAL}[tools.t]\nrisk = \"low\"\nread_only = false\noutput = \"trusted\"\nfields.\"/x\" = {{ role = \"recipient\" }}\n"
    ))
    .unwrap_err();
    assert!(
        err.to_string().contains("unknown variant `recipient`"),
        "{err}"
    );
    assert!(err.to_string().contains("destination"), "{err}");
}
