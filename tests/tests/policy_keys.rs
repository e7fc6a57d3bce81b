//! Every key of the policy file format takes effect: the list of keys comes from the parser
//! (`Policy::format_keys`), and each key has a case here that changes one setting and shows that
//! what the proxy does changes — the dispatcher built from the file (calls, replays, limits,
//! approvals, flow) or what the proxy reads from its sections. A key added to the format without
//! a case fails `every_key_of_the_format_has_a_case`. The tool settings are given in
//! `[default_tool]` for a tool the file does not name: each applies to it.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use toolguard::policy::{Offered, Policy};
use toolguard::{Dispatcher, HostKeys, ManualClock, Principal, ToolCall, ToolOutcome};
use toolguard_tests::*;

const TOKEN: &str = "reviewer-token-0123456789";

/// The tool the upstream offers: strings bounded, so the declaration rules hold.
fn offered() -> Offered {
    Offered {
        name: "pay".to_owned(),
        description: "Pays.".to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "amount": {"type": "integer", "description": "Amount in cents."},
                "note": {"type": "string", "maxLength": 100, "description": "A note."},
                "to": {"type": "string", "maxLength": 100, "description": "Where to."},
                "items": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 5, "description": "Items."}
            },
            "required": ["amount"]
        }),
    }
}

/// One case: the key, the settings of the reference file, and the setting that differs.
struct Case {
    key: &'static str,
    /// Lines of `[default_tool]` (or a whole section with `[`) both files share.
    reference: &'static str,
    /// The lines that differ.
    changed: &'static str,
}

const fn case(key: &'static str, reference: &'static str, changed: &'static str) -> Case {
    Case {
        key,
        reference,
        changed,
    }
}

/// Every case; `reference` and `changed` are added to `[default_tool]` unless they start with
/// `@` (then they are whole sections after the tool).
const CASES: &[Case] = &[
    case("proxy.name", "", "@[proxy]\nname = \"gateway\""),
    case("proxy.store", "", "@[proxy]\nstore = \"other.sqlite\""),
    case(
        "proxy.reviewer_listen",
        "",
        "@[proxy]\nreviewer_listen = \"127.0.0.1:7411\"",
    ),
    case(
        "proxy.reload_poll_secs",
        "",
        "@[proxy]\nreload_poll_secs = 0",
    ),
    case(
        "proxy.upstream_token_env",
        "",
        "@[proxy]\nupstream_token_env = \"UPSTREAM_TOKEN\"",
    ),
    case(
        "proxy.upstream_timeout_secs",
        "",
        "@[proxy]\nupstream_timeout_secs = 5",
    ),
    case(
        "proxy.derive_idempotency_key",
        "",
        "@[proxy]\nderive_idempotency_key = true",
    ),
    case("proxy.session_idle", "", "@[proxy]\nsession_idle = \"30m\""),
    case(
        "principal.tenant",
        "",
        "@[principal]\ntenant = \"globex\"\nsubject = \"agent\"\nroles = [\"agent\"]",
    ),
    case(
        "principal.subject",
        "",
        "@[principal]\ntenant = \"acme\"\nsubject = \"bot\"\nroles = [\"agent\"]",
    ),
    case(
        "principal.roles",
        "",
        "@[principal]\ntenant = \"acme\"\nsubject = \"agent\"\nroles = [\"reader\"]",
    ),
    case(
        "principal.session",
        "",
        "@[principal]\ntenant = \"acme\"\nsubject = \"agent\"\nroles = [\"agent\"]\nsession = \"fixed\"",
    ),
    case(
        "tokens.token",
        "",
        "@[[tokens]]\ntoken = \"another-token-0123456789\"\ntenant = \"acme\"\nsubject = \"bob\"\nroles = [\"approver\"]",
    ),
    case(
        "tokens.tenant",
        "",
        "@[[tokens]]\ntoken = \"reviewer-token-0123456789\"\ntenant = \"globex\"\nsubject = \"bob\"\nroles = [\"approver\"]",
    ),
    case(
        "tokens.subject",
        "",
        "@[[tokens]]\ntoken = \"reviewer-token-0123456789\"\ntenant = \"acme\"\nsubject = \"eve\"\nroles = [\"approver\"]",
    ),
    case(
        "tokens.roles",
        "",
        "@[[tokens]]\ntoken = \"reviewer-token-0123456789\"\ntenant = \"acme\"\nsubject = \"bob\"\nroles = [\"auditor\"]",
    ),
    case(
        "approvals.roles",
        "approval = true",
        "@[approvals]\nroles = [\"auditor\"]",
    ),
    case(
        "approvals.ttl_secs",
        "approval = true",
        "@[approvals]\nttl_secs = 60",
    ),
    case("keys.file", "", "@[keys]\nfile = \"host.keys\""),
    case(
        "keys.env",
        "",
        "@[keys]\nenv = \"TOOLGUARD_TEST_KEYS_NOT_SET\"",
    ),
    case(
        "keys.checkpoints",
        "",
        "@[keys]\ncheckpoints = \"elsewhere.checkpoints\"",
    ),
    case(
        "default_tool.description",
        "",
        "description = \"Pays a supplier.\"",
    ),
    case("default_tool.risk", "", "risk = \"high\""),
    case(
        "default_tool.read_only",
        "idempotent = false",
        "read_only = true",
    ),
    case("default_tool.idempotent", "", "idempotent = false"),
    case(
        "default_tool.idempotency_key",
        "",
        "idempotency_key = { field = \"request_id\" }",
    ),
    case("default_tool.key_reuse", "", "key_reuse = \"key_wins\""),
    case("default_tool.approval", "", "approval = true"),
    case(
        "default_tool.approval_over",
        "amount = \"/amount\"",
        "approval_over = 100",
    ),
    case("default_tool.approvals", "approval = true", "approvals = 2"),
    case("default_tool.amount", "", "amount = \"/amount\""),
    case("default_tool.timeout_ms", "", "timeout_ms = 1000"),
    case(
        "default_tool.fields",
        "",
        "fields.\"/note\" = { max_len = 5 }",
    ),
    case("default_tool.tenants", "", "tenants = [\"globex\"]"),
    case("default_tool.roles", "", "roles = [\"admin\"]"),
    case(
        "default_tool.approver_roles",
        "approval = true",
        "approver_roles = [\"auditor\"]",
    ),
    case(
        "default_tool.session_rate",
        "",
        "session_rate = { calls = 1, window_secs = 3600 }",
    ),
    case(
        "default_tool.session_limit",
        "amount = \"/amount\"",
        "session_limit = { amount = 600, window_secs = 3600 }",
    ),
    case(
        "default_tool.max_per_call",
        "amount = \"/amount\"",
        "max_per_call = 100",
    ),
    case("default_tool.output", "", "output = \"trusted\""),
    case(
        "default_tool.untrusted_fields",
        "",
        "untrusted_fields = [\"/paid\"]",
    ),
    case(
        "default_tool.egress",
        "fields.\"/to\" = { kind = \"url\", allow_hosts = [\"example.com\"] }",
        "egress = \"allowlisted\"",
    ),
    case("default_tool.flow", "", "flow = \"deny\""),
    case(
        "default_tool.session_rate.calls",
        "session_rate = { calls = 1, window_secs = 3600 }",
        "session_rate = { calls = 3, window_secs = 3600 }",
    ),
    case(
        "default_tool.session_rate.window_secs",
        "session_rate = { calls = 1, window_secs = 3600 }",
        "session_rate = { calls = 1, window_secs = 5 }",
    ),
    case(
        "default_tool.session_limit.amount",
        "amount = \"/amount\"\nsession_limit = { amount = 600, window_secs = 3600 }",
        "session_limit = { amount = 1000, window_secs = 3600 }",
    ),
    case(
        "default_tool.session_limit.window_secs",
        "amount = \"/amount\"\nsession_limit = { amount = 600, window_secs = 3600 }",
        "session_limit = { amount = 600, window_secs = 5 }",
    ),
    case(
        "default_tool.session_limit.on_exceed",
        "amount = \"/amount\"\nsession_limit = { amount = 600, window_secs = 3600 }",
        "session_limit = { amount = 600, window_secs = 3600, on_exceed = \"approval\" }",
    ),
    case(
        "default_tool.fields.*.kind",
        "",
        "fields.\"/to\" = { kind = \"email\" }",
    ),
    case(
        "default_tool.fields.*.description",
        "",
        "fields.\"/note\" = { description = \"The memo line.\" }",
    ),
    case(
        "default_tool.fields.*.sensitive",
        "",
        "fields.\"/note\" = { sensitive = true }",
    ),
    case(
        "default_tool.fields.*.min_len",
        "",
        "fields.\"/note\" = { min_len = 50 }",
    ),
    case(
        "default_tool.fields.*.max_len",
        "",
        "fields.\"/note\" = { max_len = 5 }",
    ),
    case(
        "default_tool.fields.*.max_items",
        "",
        "fields.\"/items\" = { max_items = 1 }",
    ),
    case(
        "default_tool.fields.*.pattern",
        "",
        "fields.\"/note\" = { pattern = \"^[0-9]+$\" }",
    ),
    case(
        "default_tool.fields.*.root",
        "fields.\"/note\" = { kind = \"path\", root = \"/srv/a\" }",
        "fields.\"/note\" = { kind = \"path\", root = \"/srv/b\" }",
    ),
    case(
        "default_tool.fields.*.allow_domains",
        "fields.\"/to\" = { kind = \"email\" }",
        "fields.\"/to\" = { kind = \"email\", allow_domains = [\"corp.example\"] }",
    ),
    case(
        "default_tool.fields.*.allow_hosts",
        "fields.\"/to\" = { kind = \"url\" }",
        "fields.\"/to\" = { kind = \"url\", allow_hosts = [\"example.com\"] }",
    ),
    case(
        "default_tool.fields.*.allow_schemes",
        "fields.\"/to\" = { kind = \"url\" }",
        "fields.\"/to\" = { kind = \"url\", allow_schemes = [\"https\"] }",
    ),
    case(
        "default_tool.fields.*.role",
        "",
        "fields.\"/note\" = { role = \"destination\" }",
    ),
    case(
        "default_tool.fields.*.identity",
        "fields.\"/note\" = { kind = \"text\" }",
        "fields.\"/note\" = { kind = \"text\", identity = false }",
    ),
    case(
        "default_tool.fields.*.scale",
        "amount = \"/amount\"\nfields.\"/amount\" = { kind = \"money\", scale = 2, currency = \"USD\" }",
        "fields.\"/amount\" = { kind = \"money\", scale = 0, currency = \"USD\" }",
    ),
    case(
        "default_tool.fields.*.currency",
        "amount = \"/amount\"\nfields.\"/amount\" = { kind = \"money\", scale = 2, currency = \"USD\" }",
        "fields.\"/amount\" = { kind = \"money\", scale = 2, currency = \"EUR\" }",
    ),
    case(
        "default_tool.fields.*.default_scheme",
        "fields.\"/to\" = { kind = \"url\" }",
        "fields.\"/to\" = { kind = \"url\", default_scheme = \"https\" }",
    ),
    case(
        "default_tool.fields.*.namespace",
        "",
        "fields.\"/note\" = { kind = \"path\", namespace = \"upstream\" }",
    ),
    case(
        "default_tool.fields.*.egress",
        "egress = \"open\"\noutput = \"trusted\"\nfields.\"/to\" = { kind = \"url\" }",
        "fields.\"/to\" = { kind = \"url\", egress = true }",
    ),
    case(
        "default_tool.fields.*.internal",
        "egress = \"open\"\noutput = \"trusted\"\nfields.\"/to\" = { kind = \"url\", egress = \"outside\", internal = [\"example.com\"] }",
        "fields.\"/to\" = { kind = \"url\", egress = \"outside\", internal = [\"*.example.com\"] }",
    ),
    case(
        "default_tool.flow_roles",
        "",
        "flow_roles = { destination = \"deny\" }",
    ),
    case(
        "default_tool.flow_fields",
        "",
        "flow_fields = { \"/to\" = \"deny\" }",
    ),
    case("flow.mode", "", "@[flow]\nmode = \"per_argument\""),
    case("flow.destination", "", "@[flow]\ndestination = \"deny\""),
    case("flow.amount", "", "@[flow]\namount = \"deny\""),
    case("flow.content", "", "@[flow]\ncontent = \"deny\""),
    case("flow.selector", "", "@[flow]\nselector = \"deny\""),
    case(
        "flow.user_destinations",
        "",
        "@[flow]\nuser_destinations = true",
    ),
    case("flow.copied_content", "", "@[flow]\ncopied_content = true"),
    case(
        "flow.risk",
        "",
        "@[flow]\nrisk = { medium = { destination = \"deny\" } }",
    ),
    case(
        "resources.expose",
        "",
        "@[resources]\nexpose = [\"file:///docs/*\"]",
    ),
    case(
        "resources.hide",
        "",
        "@[resources]\nexpose = [\"file:///docs/*\"]\nhide = [\"file:///docs/a.md\"]",
    ),
    case("resources.trust", "", "@[resources]\ntrust = \"trusted\""),
    case("prompts.expose", "", "@[prompts]\nexpose = [\"summ*\"]"),
    case(
        "prompts.hide",
        "",
        "@[prompts]\nexpose = [\"*\"]\nhide = [\"summarize\"]",
    ),
    case("prompts.trust", "", "@[prompts]\ntrust = \"trusted\""),
    case("sampling.action", "", "@[sampling]\naction = \"allow\""),
    case(
        "elicitation.action",
        "",
        "@[elicitation]\naction = \"approval\"",
    ),
];

/// The policy file: the base `[default_tool]` with `lines` (tool lines and `@` sections).
fn policy_text(lines: &[&str]) -> String {
    let mut tool = String::from("risk = \"medium\"\nread_only = false\nidempotent = true\n");
    let mut sections = String::new();
    let has = |name: &str| lines.iter().any(|l| l.starts_with(&format!("@[{name}")));
    let principal = !has("principal");
    let tokens = !has("[tokens");
    for l in lines.iter().filter(|l| !l.is_empty()) {
        match l.strip_prefix('@') {
            Some(section) => {
                sections.push_str(section);
                sections.push('\n');
            }
            None => {
                // A later line for the same key replaces the earlier one.
                let key = l.split('=').next().unwrap_or("").trim().to_owned();
                tool = tool
                    .lines()
                    .filter(|t| t.split('=').next().unwrap_or("").trim() != key)
                    .map(|t| format!("{t}\n"))
                    .collect();
                tool.push_str(l);
                tool.push('\n');
            }
        }
    }
    let mut text = String::new();
    if principal {
        text.push_str(
            "[principal]\ntenant = \"acme\"\nsubject = \"agent\"\nroles = [\"agent\"]\n\n",
        );
    }
    if tokens {
        text.push_str(&format!(
            "[[tokens]]\ntoken = \"{TOKEN}\"\ntenant = \"acme\"\nsubject = \"bob\"\nroles = [\"approver\"]\n\n"
        ));
    }
    text.push_str(&format!("[default_tool]\n{tool}\n{sections}"));
    if !sections.contains("[approvals]") {
        text.push_str("\n[approvals]\nroles = [\"approver\"]\n");
    }
    text
}

fn outcome_line(o: &ToolOutcome) -> String {
    format!(
        "{}/{}/replayed={}/expires={:?}",
        o.status.as_str(),
        o.reason
            .as_ref()
            .map(|r| r.as_str().to_owned())
            .unwrap_or_default(),
        o.replayed,
        o.approval.as_ref().map(|a| a.expires_at_ms)
    )
}

fn person(tenant: &str, subject: &str, role: &str, session: &str, at: SystemTime) -> Principal {
    let mut p = Principal::new(tenant, subject, session);
    p.roles = vec![role.to_owned()].into();
    p.authenticated_at = at;
    p
}

/// What the proxy would do with the policy `text`: what it reads from its sections, and the
/// outcomes of a fixed script of calls through a dispatcher built from the file.
async fn observe(dir: &std::path::Path, text: &str) -> Vec<String> {
    let policy = match Policy::parse(dir.join("policy.toml"), text.to_owned()) {
        Ok(p) => p,
        Err(e) => return vec![format!("load error: {e}")],
    };
    let ids = |k: HostKeys| k.ids().map(str::to_owned).collect::<Vec<_>>();
    let mut seen = vec![
        format!("store {:?}", policy.store_path()),
        format!("checkpoints {:?}", policy.checkpoints_path()),
        format!("upstream timeout {:?}", policy.proxy.upstream_timeout()),
        format!("proxy {:?}", policy.proxy),
        format!(
            "principal {:?}",
            policy.local_principal("s-default").map(|p| (
                p.tenant.to_string(),
                p.subject.to_string(),
                p.roles.to_vec(),
                p.session_id.to_string()
            ))
        ),
        format!(
            "token {:?}",
            policy.token_principal(TOKEN, "s-http").map(|p| (
                p.tenant.to_string(),
                p.subject.to_string(),
                p.roles.to_vec()
            ))
        ),
        format!("approver roles {:?}", policy.approver_roles()),
        format!(
            "keys {:?}",
            policy
                .host_keys()
                .map(|k| k.map(ids))
                .map_err(|e| e.message)
        ),
    ];
    let specs = match policy.declare_offered(&[offered()]) {
        Ok(specs) => specs,
        Err(e) => {
            seen.push(format!("declare error: {e}"));
            return seen;
        }
    };
    seen.push(format!("specs {specs:?}"));
    seen.push(format!(
        "flow {:?}",
        policy.risk_policy(&specs).current_flow()
    ));
    seen.push(format!(
        "resources {:?}, file:///docs/a.md exposed: {}",
        policy.resources,
        policy.resources.exposes("file:///docs/a.md")
    ));
    seen.push(format!(
        "prompts {:?}, summarize exposed: {}",
        policy.prompts,
        policy.prompts.exposes("summarize")
    ));
    seen.push(format!("sampling {:?}", policy.sampling));
    seen.push(format!("elicitation {:?}", policy.elicitation));
    seen.push(format!("sanitizer {:?}", policy.sanitizer(&specs)));
    let Some(spec) = specs.first().cloned() else {
        return seen;
    };
    let mut tool = SpecTool::new("pay", json!(true), json!({"paid": true}));
    tool.spec = spec;
    let start = SystemTime::now();
    let clock = Arc::new(ManualClock::new(start));
    let built = Dispatcher::builder(Ledger::seeded())
        .tool(tool)
        .authorizer(policy.authorizer())
        .sanitizer(policy.sanitizer(&specs))
        .policy(policy.risk_policy(&specs))
        .host_keys(HostKeys::ephemeral())
        .clock(clock.clone())
        .build();
    let d = match built {
        Ok(d) => d,
        Err(e) => {
            seen.push(format!("build error: {e}"));
            return seen;
        }
    };
    let agent = person("acme", "agent", "agent", "s1", start);
    let args = |amount: u64| json!({"amount": amount, "note": "hello there", "to": "https://example.com/a", "items": ["x", "y"]});
    let call =
        |key: &str, a: Value| ToolCall::new(format!("c-{key}"), "pay", a).with_idempotency_key(key);
    let mut outcomes = Vec::new();
    outcomes.push(d.dispatch(call("k1", args(500)), &agent).await);
    outcomes.push(d.dispatch(call("k1", args(500)), &agent).await);
    outcomes.push(d.dispatch(call("k1", args(600)), &agent).await);
    outcomes.push(d.dispatch(call("k2", args(500)), &agent).await);
    clock.advance(Duration::from_secs(10));
    outcomes.push(d.dispatch(call("k3", args(500)), &agent).await);
    d.add_source(&agent, "a retrieved page")
        .await
        .expect("source");
    outcomes.push(d.dispatch(call("k4", args(500)), &agent).await);
    let stranger = person("globex", "agent", "agent", "s2", start);
    outcomes.push(d.dispatch(call("k5", args(500)), &stranger).await);
    seen.extend(outcomes.iter().map(outcome_line));
    // Every pending request: an `approver`, then an `auditor`, decide it.
    let bob = person("acme", "bob", "approver", "s-bob", start);
    let carol = person("acme", "carol", "auditor", "s-carol", start);
    for o in &outcomes {
        if let Some(ticket) = &o.approval {
            for who in [&bob, &carol] {
                let decided = d.approvals().approve(who, &ticket.approval_id).await;
                seen.push(format!(
                    "decision by {}: {}",
                    who.subject,
                    outcome_line(&decided)
                ));
            }
        }
    }
    seen
}

#[test]
fn every_key_of_the_format_has_a_case() {
    let format: BTreeSet<String> = Policy::format_keys().into_iter().collect();
    let cases: BTreeSet<String> = CASES.iter().map(|c| c.key.to_owned()).collect();
    let missing: Vec<&String> = format.difference(&cases).collect();
    let unknown: Vec<&String> = cases.difference(&format).collect();
    assert!(
        missing.is_empty(),
        "keys of the policy format without a case: {missing:?}"
    );
    assert!(
        unknown.is_empty(),
        "cases for keys the format does not have: {unknown:?}"
    );
    assert!(format.len() > 50, "{format:?}");
}

#[tokio::test]
async fn every_key_of_the_format_changes_behaviour() {
    let dir =
        std::env::temp_dir().join(format!("tg-policy-keys-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    toolguard::keys::generate_key_file(dir.join("host.keys"), "k1").unwrap();
    let mut unchanged = Vec::new();
    let mut invalid_cases = Vec::new();
    for c in CASES {
        let reference: Vec<&str> = c.reference.split('\n').collect();
        let mut changed = reference.clone();
        changed.push(c.changed);
        let before = observe(&dir, &policy_text(&reference)).await;
        let after = observe(&dir, &policy_text(&changed)).await;
        let invalid = |side: &[String]| {
            side.iter()
                .find(|l| {
                    l.starts_with("load error")
                        || l.starts_with("declare error")
                        || l.starts_with("build error")
                })
                .cloned()
        };
        if let Some(error) = invalid(&before).or_else(|| invalid(&after)) {
            invalid_cases.push(format!("{}: {error}", c.key));
            continue;
        }
        if before == after {
            unchanged.push(c.key);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        invalid_cases.is_empty(),
        "each case must be a valid policy: {invalid_cases:#?}"
    );
    assert!(
        unchanged.is_empty(),
        "keys whose setting changed nothing: {unchanged:?}"
    );
}
