//! Policy files: every class of error names the file, the line and the fix; a valid file turns
//! into the dispatcher's authorizer, risk policy and tightened tool specs.

use serde_json::{Value, json};
use toolguard::policy::{Offered, Policy, PolicyError};
use toolguard::{FieldKind, Principal};

fn parse(text: &str) -> Result<Policy, PolicyError> {
    Policy::parse("policy.toml", text.to_owned())
}

/// Parses `text`, expects an error on `line` whose message contains every `needle`.
fn refused(text: &str, line: usize, needles: &[&str]) -> PolicyError {
    let err = parse(text).expect_err("the file is refused");
    check(&err, line, needles);
    err
}

fn check(err: &PolicyError, line: usize, needles: &[&str]) {
    assert_eq!(err.line, Some(line), "{err}");
    let shown = err.to_string();
    assert!(
        shown.starts_with(&format!("policy.toml:{line}: ")),
        "{shown}"
    );
    for needle in needles {
        assert!(shown.contains(needle), "`{needle}` missing in: {shown}");
    }
}

const PRINCIPAL: &str =
    "[principal]\ntenant = \"acme\"\nsubject = \"agent\"\nroles = [\"agent\"]\n";

#[test]
fn toml_syntax_errors_name_the_line() {
    refused("[principal]\ntenant = \"acme\nsubject = \"x\"\n", 2, &[]);
}

#[test]
fn unknown_sections_and_keys_are_errors_with_their_line() {
    refused(
        &format!("{PRINCIPAL}\n[proxi]\nname = \"x\"\n"),
        6,
        &["unknown field `proxi`"],
    );
    let misspelt = format!(
        "{PRINCIPAL}\n[tools.transfer]\nrisk = \"low\"\nread_only = false\naproval_over = 5\n"
    );
    refused(
        &misspelt,
        9,
        &["unknown field `aproval_over`", "approval_over"],
    );
    let field_key = format!(
        "{PRINCIPAL}\n[tools.read]\nrisk = \"low\"\nread_only = true\nfields.\"/path\" = {{ kind = \"path\", root = \"/srv\", max_length = 3 }}\n"
    );
    refused(&field_key, 9, &["unknown field `max_length`", "max_len"]);
}

#[test]
fn wrong_values_and_missing_keys_are_errors() {
    refused(
        &format!("{PRINCIPAL}[tools.t]\nrisk = \"extreme\"\nread_only = true\n"),
        6,
        &["unknown variant `extreme`", "critical"],
    );
    refused(
        &format!("{PRINCIPAL}[tools.t]\nrisk = \"low\"\n"),
        5,
        &["missing field `read_only`"],
    );
    refused(
        &format!(
            "{PRINCIPAL}[tools.t]\nrisk = \"low\"\nread_only = true\nfields.\"/cmd\" = {{ kind = \"shell\" }}\n"
        ),
        8,
        &["unknown variant `shell`"],
    );
}

#[test]
fn declaration_rules_are_errors_on_the_tool_line() {
    let cases: [(&str, &[&str]); 9] = [
        (
            "[tools.pay]\nrisk = \"high\"\nread_only = false\n",
            &["tool `pay`", "idempotent = true"],
        ),
        (
            "[tools.read]\nrisk = \"low\"\nread_only = true\napproval = true\n",
            &["`approval` on a `read_only` tool", "read_only = false"],
        ),
        (
            "[tools.pay]\nrisk = \"high\"\nread_only = false\nidempotent = true\napproval_over = 100\n",
            &["amount = "],
        ),
        (
            "[tools.pay]\nrisk = \"low\"\nread_only = false\nmax_per_call = 100\n",
            &["add `amount"],
        ),
        (
            "[tools.read]\nrisk = \"low\"\nread_only = true\nfields.\"/path\" = { kind = \"path\" }\n",
            &["field `/path`", "root = "],
        ),
        (
            "[tools.read]\nrisk = \"low\"\nread_only = true\nfields.\"/path\" = { kind = \"path\", root = \"/\" }\n",
            &["file-system root"],
        ),
        (
            "[tools.read]\nrisk = \"low\"\nread_only = true\nfields.\"/path\" = { kind = \"path\", root = \"data\" }\n",
            &["not an absolute path"],
        ),
        (
            "[tools.find]\nrisk = \"low\"\nread_only = true\nfields.\"/q\" = { pattern = \"(?=x)\" }\n",
            &[
                "field `/q`",
                "does not mean the same in Rust's regex",
                "lookaround",
            ],
        ),
        (
            "[tools.\"bad.name\"]\nrisk = \"low\"\nread_only = true\n",
            &["tool `bad.name`", "^[a-zA-Z]"],
        ),
    ];
    for (tool, needles) in cases {
        let text = format!("{PRINCIPAL}\n{tool}");
        refused(&text, 6, needles);
    }
}

#[test]
fn the_rules_of_the_macro_apply_to_a_declaration_on_load() {
    let cases: [(&str, &[&str]); 6] = [
        (
            "[tools.pay]\nrisk = \"low\"\nread_only = false\nidempotent = true\nfields.\"/fee\" = { kind = \"money\", sensitive = true }\n",
            &[
                "field `/fee`",
                "`fee` is money and cannot be `sensitive`",
                "Remove `sensitive = true`",
            ],
        ),
        (
            "[tools.fetch]\nrisk = \"low\"\nread_only = true\nfields.\"/link\" = { allow_hosts = [\"example.com\"] }\n",
            &["field `/link`", "not a URL field", "`kind = \"url\"`"],
        ),
        (
            "[tools.pay]\nrisk = \"low\"\nread_only = false\nidempotency_key = { field = \"key\" }\n",
            &[
                "`idempotency_key = { field = \"key\" }`",
                "add `idempotent = true`",
            ],
        ),
        (
            "[tools.pay]\nrisk = \"low\"\nread_only = false\nidempotent = true\nfields.\"/memo\" = { max_len = 0 }\n",
            &["field `/memo`", "`max_len = 0` only admits an empty string"],
        ),
        (
            "[tools.pay]\nrisk = \"low\"\nread_only = false\napproval = true\n",
            &["`approval` needs `idempotent`", "Add `idempotent = true`"],
        ),
        (
            "[tools.list]\nrisk = \"low\"\nread_only = true\nfields.\"/tenant_id\" = { max_len = 9 }\n",
            &["field `/tenant_id`", "looks like identity or authority"],
        ),
    ];
    for (tool, needles) in cases {
        refused(&format!("{PRINCIPAL}\n{tool}"), 6, needles);
    }
}

#[test]
fn proxy_settings_are_checked() {
    refused(
        &format!("[proxy]\nreviewer_listen = \"0.0.0.0:7411\"\n{PRINCIPAL}"),
        2,
        &["loopback"],
    );
    refused(
        &format!("{PRINCIPAL}\n[[tokens]]\ntoken = \"short\"\ntenant = \"a\"\nsubject = \"b\"\n"),
        6,
        &["16 characters"],
    );
}

fn offered(name: &str, schema: Value) -> Offered {
    Offered {
        name: name.to_owned(),
        description: format!("The upstream's {name}."),
        input_schema: schema,
    }
}

fn fs_tools() -> Vec<Offered> {
    vec![
        offered(
            "read_text_file",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        offered(
            "write_file",
            json!({"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        ),
        offered(
            "move_file",
            json!({"type": "object", "properties": {
            "source": {"type": "string"}, "destination": {"type": "string"}}}),
        ),
    ]
}

#[test]
fn tools_the_upstream_does_not_offer_are_errors_with_their_line() {
    let text = format!(
        "{PRINCIPAL}\n[tools.read_text_file]\nrisk = \"low\"\nread_only = true\nfields.\"/path\" = {{ kind = \"path\", root = \"/srv/data\" }}\n\n[tools.wirte_file]\nrisk = \"low\"\nread_only = true\n"
    );
    let policy = parse(&text).expect("valid on its own");
    let err = policy
        .declare_offered(&fs_tools())
        .expect_err("unknown tool");
    check(
        &err,
        11,
        &["tool `wirte_file` is not offered", "write_file"],
    );
}

#[test]
fn rules_that_need_the_schema_are_errors_with_their_line() {
    let cases: [(&str, &str, &[&str]); 3] = [
        (
            "[tools.write_file]\nrisk = \"high\"\nread_only = false\nidempotent = true\nfields.\"/path\" = { kind = \"path\", root = \"/srv/data\", max_len = 9, description = \"p\" }\n",
            "unbounded",
            &["field `/content`", "description"],
        ),
        (
            "[tools.write_file]\nrisk = \"high\"\nread_only = false\nidempotent = true\nfields.\"/path\" = { kind = \"path\", root = \"/srv/data\", max_len = 9, description = \"p\" }\nfields.\"/content\" = { description = \"c\" }\n",
            "unbounded",
            &["field `/content`", "max_len"],
        ),
        (
            "[tools.write_file]\nrisk = \"low\"\nread_only = false\nfields.\"/body\" = { max_len = 3 }\n",
            "missing",
            &["field `/body`", "no property `body`", "`/content`"],
        ),
    ];
    for (tool, _, needles) in cases {
        let policy = parse(&format!("{PRINCIPAL}\n{tool}")).expect("valid on its own");
        let err = policy
            .declare_offered(&fs_tools())
            .expect_err("a rule is broken");
        check(&err, 6, needles);
    }
    let identity = vec![offered(
        "share",
        json!({"type": "object", "properties": {"tenant_id": {"type": "string"}}}),
    )];
    let policy = parse(&format!(
        "{PRINCIPAL}\n[tools.share]\nrisk = \"low\"\nread_only = true\n"
    ))
    .expect("valid");
    check(
        &policy.declare_offered(&identity).expect_err("identity"),
        6,
        &["`tenant_id`", "principal"],
    );
    let money = vec![offered(
        "refund",
        json!({"type": "object", "properties": {"amount": {"type": "number", "description": "a"}}}),
    )];
    let policy = parse(&format!(
        "{PRINCIPAL}\n[tools.refund]\nrisk = \"medium\"\nread_only = false\n"
    ))
    .expect("valid");
    check(
        &policy.declare_offered(&money).expect_err("float money"),
        6,
        &["field `/amount`", "integer"],
    );
}

#[test]
fn a_valid_file_declares_tightened_tools_and_hides_the_rest() {
    let text = format!(
        "{PRINCIPAL}\n[tools.read_text_file]\nrisk = \"low\"\nread_only = true\nroles = [\"agent\"]\nfields.\"/path\" = {{ kind = \"path\", root = \"/srv/data\", max_len = 200 }}\n\n[tools.write_file]\nrisk = \"high\"\nread_only = false\nidempotent = true\napproval = true\ntenants = [\"acme\"]\nfields.\"/path\" = {{ kind = \"path\", root = \"/srv/data\", max_len = 200, description = \"p\" }}\nfields.\"/content\" = {{ max_len = 1000, description = \"c\" }}\n"
    );
    let policy = parse(&text).expect("valid");
    let specs = policy.declare_offered(&fs_tools()).expect("declared");
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["read_text_file", "write_file"],
        "move_file is hidden by default"
    );
    let write = &specs[1];
    assert!(write.idempotent && !write.read_only);
    assert_eq!(
        write.input_schema["properties"]["content"]["maxLength"],
        1000
    );
    assert_eq!(write.input_schema["additionalProperties"], false);
    assert_eq!(write.field("path").map(|f| f.kind), Some(FieldKind::Path));
    assert_eq!(
        write.field("path").and_then(|f| f.root.clone()).as_deref(),
        Some("/srv/data")
    );

    let authorizer = policy.authorizer();
    let agent = policy.local_principal("s1").expect("principal");
    assert_eq!(granted(&authorizer, &agent, &specs[0]), Ok(()));
    let stranger = Principal::new("acme", "bob", "s2");
    assert_eq!(
        granted(&authorizer, &stranger, &specs[0]),
        Err("missing_role".to_owned())
    );
    let foreign = Principal::new("other", "eve", "s3");
    assert_eq!(
        granted(&authorizer, &foreign, write),
        Err("tenant_not_granted".to_owned())
    );
    let mut unnamed = write.clone();
    unnamed.name = "move_file".to_owned();
    assert_eq!(
        granted(&authorizer, &agent, &unnamed),
        Err("tool_not_granted".to_owned())
    );

    // The revision follows the contents: any change gives another one.
    let changed = parse(&text.replace("max_len = 1000", "max_len = 999")).expect("valid");
    assert_ne!(policy.revision(), changed.revision());
    assert_eq!(
        policy.risk_policy(&[]).current_revision(),
        policy.revision()
    );
}

#[test]
fn a_default_tool_exposes_unnamed_tools_under_the_same_rules() {
    let text = format!(
        "{PRINCIPAL}\n[default_tool]\nrisk = \"high\"\nread_only = false\nidempotent = true\n"
    );
    let policy = parse(&text).expect("valid");
    // The upstream's unbounded strings break rule 5 for every tool the default exposes.
    let err = policy
        .declare_offered(&fs_tools())
        .expect_err("unbounded strings");
    check(&err, 6, &["tool `read_text_file`"]);
}

#[test]
fn the_example_policies_are_valid() {
    for file in [
        "../examples/policies/filesystem.toml",
        "../examples/policies/memory.toml",
        "../examples/policies/everything.toml",
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        Policy::load(&path).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// The authorizer's answer for `principal` and `spec`, with a refusal as its reason code.
fn granted(
    authorizer: &impl toolguard::Authorizer,
    principal: &Principal,
    spec: &toolguard::ToolSpec,
) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime
        .block_on(authorizer.authorize(principal, spec))
        .map_err(|err| match err {
            toolguard::AuthorizeError::Refused(reason) => reason,
            other => other.to_string(),
        })
}

#[test]
fn upstream_settings_name_a_variable_and_a_usable_deadline() {
    let ok =
        parse("[proxy]\nupstream_token_env = \"UPSTREAM_MCP_TOKEN\"\nupstream_timeout_secs = 5\n")
            .expect("valid");
    assert_eq!(
        ok.proxy.upstream_timeout(),
        std::time::Duration::from_secs(5)
    );
    assert_eq!(
        parse("").expect("valid").proxy.upstream_timeout(),
        std::time::Duration::from_secs(30)
    );
    // A token pasted where the variable's name belongs.
    refused(
        "[proxy]\nname = \"x\"\nupstream_token_env = \"sk-live-0123456789abcdef\"\n",
        3,
        &[
            "`upstream_token_env` names the environment variable",
            "never the token itself",
        ],
    );
    refused(
        "[proxy]\nupstream_timeout_secs = 0\n",
        2,
        &["`upstream_timeout_secs = 0`"],
    );
}

#[test]
fn untrusted_output_with_open_egress_is_refused_at_load() {
    // Upstream results are untrusted by default: open egress needs an allowlist or `critical`.
    let open = format!(
        "{PRINCIPAL}\n[tools.fetch]\nrisk = \"medium\"\nread_only = true\negress = \"open\"\n"
    );
    refused(
        &open,
        6,
        &["fetch", "egress = \"allowlisted\"", "risk = \"critical\""],
    );
    let no_destination = format!(
        "{PRINCIPAL}\n[tools.fetch]\nrisk = \"medium\"\nread_only = true\negress = \"allowlisted\"\n"
    );
    refused(&no_destination, 6, &["no destination field"]);
    // Declared trusted, or restricted to allowlisted destinations: accepted.
    let trusted = format!(
        "{PRINCIPAL}\n[tools.fetch]\nrisk = \"medium\"\nread_only = true\negress = \"open\"\noutput = \"trusted\"\n"
    );
    assert!(parse(&trusted).is_ok());
    let listed = format!(
        "{PRINCIPAL}\n[tools.fetch]\nrisk = \"medium\"\nread_only = true\negress = \"allowlisted\"\nflow = \"deny\"\nfields.\"/url\" = {{ kind = \"url\", allow_hosts = [\"docs.example.com\"] }}\n"
    );
    let policy = parse(&listed).expect("accepted");
    let fetch = toolguard::ToolSpec::new("fetch", "", json!({"type": "object"}), json!({}));
    let flow = policy.risk_policy(&[fetch]);
    assert!(format!("{:?}", flow.current_flow()).contains("fetch"));
}

#[test]
fn untrusted_fields_are_checked_at_load() {
    // Not a JSON pointer, and beside `output = "trusted"`: load errors on the tool's line.
    let relative = format!(
        "{PRINCIPAL}\n[tools.history]\nrisk = \"low\"\nread_only = true\nuntrusted_fields = [\"items/*/subject\"]\n"
    );
    refused(&relative, 6, &["history", "`/items/*/subject`"]);
    let both = format!(
        "{PRINCIPAL}\n[tools.history]\nrisk = \"low\"\nread_only = true\noutput = \"trusted\"\nuntrusted_fields = [\"/items/*/subject\"]\n"
    );
    refused(&both, 6, &["history", "output = \"trusted\""]);
    // Listed alone: the tool's output is untrusted in those places only.
    let listed = format!(
        "{PRINCIPAL}\n[tools.history]\nrisk = \"low\"\nread_only = true\nuntrusted_fields = [\"/items/*/subject\"]\n"
    );
    assert!(parse(&listed).is_ok());
}

#[test]
fn run_time_declarations_default_to_untrusted_output() {
    use toolguard::declare::{Declaration, OutputTrust, declare};
    use toolguard::{Egress, Risk};
    let schema = json!({"type": "object", "properties": {"q": {"type": "string"}}});
    let spec = declare(
        "search",
        "Searches.",
        &schema,
        &Declaration::new(Risk::Low, true),
    )
    .unwrap();
    assert!(spec.untrusted_output);
    let mut decl = Declaration::new(Risk::Low, true);
    decl.egress = Egress::Open;
    let err = declare("search", "Searches.", &schema, &decl).unwrap_err();
    assert!(err.message.contains("egress"), "{err}");
    decl.output = Some(OutputTrust::Trusted);
    let spec = declare("search", "Searches.", &schema, &decl).unwrap();
    assert!(!spec.untrusted_output);
    assert_eq!(spec.egress, Egress::Open);
    // Untrusted in places: the spec lists them, and the output is untrusted there.
    let mut decl = Declaration::new(Risk::Low, true);
    decl.untrusted_fields = vec!["/items/*/subject".to_owned()];
    let spec = declare("history", "History.", &schema, &decl).unwrap();
    assert!(spec.untrusted_output && spec.output_declared);
    assert_eq!(spec.untrusted_fields, ["/items/*/subject"]);
    decl.untrusted_fields = vec!["/items//subject".to_owned()];
    let err = declare("history", "History.", &schema, &decl).unwrap_err();
    assert!(err.message.contains("empty segment"), "{err}");
}
