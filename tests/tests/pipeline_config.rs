//! Configuration is checked when the dispatcher is built: every tool or field name a builder
//! option mentions must be registered, and `build()` names the unknown one and the nearest
//! registered name. A typo would otherwise silently disable a limit or an allowlist.

use std::time::Duration;

use toolguard::sanitize::Sanitizer;
use toolguard::{
    BuildError, Dispatcher, Email, OnExceed, RiskPolicy, RoleAuthorizer, ToolContext, ToolError,
    tool,
};
use toolguard_tests::{Ledger, TransferFunds};

/// Sends a short message to an address.
#[tool]
async fn send_email_like(
    _ctx: &ToolContext<Ledger>,
    /// Recipient address.
    to: Email,
    /// The message.
    #[arg(max_len = 200)]
    body: String,
) -> Result<String, ToolError> {
    Ok(format!("{} characters to {}", body.len(), to.as_str()))
}

fn builder() -> toolguard::DispatcherBuilder<Ledger> {
    Dispatcher::builder(Ledger::seeded())
        .tool(TransferFunds)
        .tool(SendEmailLike)
}

fn refused(b: toolguard::DispatcherBuilder<Ledger>) -> BuildError {
    match b.build() {
        Ok(_) => panic!("build() accepted an unknown name"),
        Err(e) => e,
    }
}

fn unknown_tool(option: &'static str, tool: &str, nearest: Option<&str>) -> BuildError {
    BuildError::UnknownTool {
        option,
        tool: tool.to_owned(),
        nearest: nearest.map(str::to_owned),
    }
}

#[test]
fn every_risk_policy_rule_with_an_unknown_tool_fails_build() {
    let hour = Duration::from_secs(3600);
    let rules: Vec<RiskPolicy> = vec![
        RiskPolicy::new().max_per_call("transferfunds", 10),
        RiskPolicy::new().session_limit("transfer_fund", 10, hour, OnExceed::Deny),
        RiskPolicy::new().subject_limit("transfer_funds_", 10, hour, OnExceed::Deny),
        RiskPolicy::new().session_rate("tranfser_funds", 3, hour),
        RiskPolicy::new().tool_approver_roles("transfer-funds", ["cfo"]),
    ];
    for policy in rules {
        let err = refused(builder().policy(policy));
        let BuildError::UnknownTool {
            option, nearest, ..
        } = &err
        else {
            panic!("not an unknown-tool error: {err:?}");
        };
        assert_eq!(*option, "RiskPolicy");
        assert_eq!(nearest.as_deref(), Some("transfer_funds"), "{err}");
        assert!(
            err.to_string().contains("did you mean `transfer_funds`"),
            "{err}"
        );
    }
    // The correct name builds.
    let ok = RiskPolicy::new().max_per_call("transfer_funds", 10);
    assert!(builder().policy(ok).build().is_ok());
}

#[test]
fn sanitizer_rules_with_an_unknown_tool_or_field_fail_build() {
    let err = refused(builder().sanitizer(Sanitizer::new().allow_email_domains(
        "send_emial_like",
        "to",
        ["example.com"],
    )));
    assert_eq!(
        err,
        unknown_tool("Sanitizer", "send_emial_like", Some("send_email_like"))
    );

    let err = refused(builder().sanitizer(Sanitizer::new().allow_email_domains(
        "send_email_like",
        "too",
        ["example.com"],
    )));
    assert_eq!(
        err,
        BuildError::UnknownField {
            option: "Sanitizer",
            tool: "send_email_like".to_owned(),
            field: "too".to_owned(),
            nearest: Some("to".to_owned()),
        }
    );
    assert!(
        err.to_string()
            .contains("field `too` of tool `send_email_like`"),
        "{err}"
    );

    for s in [
        Sanitizer::new().allow_url_schemes("send_email_like", "hook", ["https"]),
        Sanitizer::new().allow_url_hosts("send_email_like", "hook", ["example.com"]),
        Sanitizer::new().path_root("send_email_like", "attachment", "/srv"),
    ] {
        assert!(matches!(
            refused(builder().sanitizer(s)),
            BuildError::UnknownField { .. }
        ));
    }
    let ok = Sanitizer::new().allow_email_domains("send_email_like", "to", ["example.com"]);
    assert!(builder().sanitizer(ok).build().is_ok());
}

#[test]
fn idempotency_ttl_and_authorizer_with_an_unknown_tool_fail_build() {
    let err = refused(builder().idempotency_ttl("transfer", Duration::from_secs(60)));
    assert_eq!(err, unknown_tool("idempotency_ttl", "transfer", None));
    assert!(
        err.to_string().contains("register it or correct the name"),
        "{err}"
    );

    let err =
        refused(builder().authorizer(RoleAuthorizer::new().require("sendemail_like", ["ops"])));
    assert_eq!(
        err,
        unknown_tool("Authorizer", "sendemail_like", Some("send_email_like"))
    );

    let ok = builder()
        .idempotency_ttl("transfer_funds", Duration::from_secs(60))
        .authorizer(RoleAuthorizer::new().require("transfer_funds", ["ops"]));
    assert!(ok.build().is_ok());
}

/// The macro's message for a mistake: the `error: ...` line of its compile-fail case that starts
/// with `start` (trybuild keeps these snapshots equal to what the compiler prints).
fn macro_message(case: &str, start: &str) -> String {
    let file = format!(
        "{}/../toolguard-macros/ui-tests/fail/{case}.stderr",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
    text.lines()
        .filter_map(|l| l.strip_prefix("error: "))
        .find(|m| m.starts_with(start))
        .unwrap_or_else(|| panic!("no `{start}` error in {file}"))
        .to_owned()
}

/// What is wrong, without the fix: the message up to the end of its first sentence.
fn diagnosis(message: &str) -> &str {
    let end = message.find(". ").expect("a diagnosis, then a fix");
    &message[..=end]
}

/// The same mistake, made in a `#[tool]` signature or in a run-time declaration, gets the same
/// diagnosis from the one rule that checks it (`toolguard-rules`); only the fix is spelt for where
/// the declaration is written (`#[arg(max_len = N)]` against `max_len = N`).
#[test]
fn the_macro_and_a_run_time_declaration_give_one_message_per_mistake() {
    use serde_json::json;
    use toolguard::Risk;
    use toolguard::declare::{Declaration, declare};

    let mut high = Declaration::new(Risk::High, false);
    high.idempotent = true;
    let unbounded = json!({"type": "object", "properties": {
        "body": {"type": "string", "description": "Message body."}
    }});
    let identity = json!({"type": "object", "properties": {
        "tenant_id": {"type": "string", "description": "Tenant to list."}
    }});
    let float_amount = json!({"type": "object", "properties": {
        "amount": {"type": ["number", "null"], "description": "Amount to refund."}
    }});
    let mut refund = Declaration::new(Risk::Medium, false);
    refund.idempotent = true;
    refund.amount = Some("/amount".to_owned());
    let float_money = json!({"type": "object", "properties": {
        "price": {"type": "number", "description": "Unit price."}
    }});
    let cases = [
        (
            ("unbounded_string_high_risk", "unbounded string `body`"),
            declare("send_mail", "Sends a mail.", &unbounded, &high),
            "/body",
            "unbounded string `body` on a high-risk tool: a model can send any amount of text \
             here, including injected instructions. Add `max_len = N`, or use a bounded kind \
             (`kind = \"identifier\"`, `\"email\"` or `\"url\"`)",
        ),
        (
            ("trusted_identity_param", "parameter `tenant_id`"),
            declare(
                "list_invoices",
                "Lists invoices.",
                &identity,
                &Declaration::new(Risk::Low, true),
            ),
            "/tenant_id",
            "parameter `tenant_id` looks like identity or authority, which the model must never \
             supply: it comes from the authenticated principal. If it is not the caller's \
             identity (an e-mail's subject, a third party's user name), say what it holds: \
             `fields.\"/tenant_id\" = { kind = \"text\", identity = false }` (or `kind = \
             \"identifier\"`/`\"name\"`/`\"email\"`) and it is judged by that kind; if it is the \
             caller's identity, the upstream must take it from its own authentication, not from \
             the model",
        ),
        (
            ("float_money", "`amount` is an amount"),
            declare("refund", "Refunds an order.", &float_amount, &refund),
            "/amount",
            "`amount` is an amount but has a float type: floats cannot represent most decimal \
             amounts exactly and make limits drift. Declare how to read it exactly: \
             `kind = \"money\", scale = 2, currency = \"USD\"` (decimal places and currency; the \
             number's text is read as minor units, never as a float), or use an integer in minor \
             units (`\"type\": \"integer\"`, e.g. cents)",
        ),
        (
            ("float_money", "`price` is named like money"),
            declare(
                "quote",
                "Quotes prices.",
                &float_money,
                &Declaration::new(Risk::Low, true),
            ),
            "/price",
            "`price` is named like money but has a float type: floats cannot represent most \
             decimal amounts exactly and make limits drift. Declare how to read it exactly: \
             `kind = \"money\", scale = 2, currency = \"USD\"` (decimal places and currency; the \
             number's text is read as minor units, never as a float), or use an integer in minor \
             units (`\"type\": \"integer\"`, e.g. cents)",
        ),
    ];
    for ((case, start), declared, field, expected) in cases {
        let err = declared.expect_err(start);
        assert_eq!(err.field.as_deref(), Some(field), "{err}");
        assert_eq!(err.message, expected);
        let compiled = macro_message(case, start);
        assert_eq!(diagnosis(&compiled), diagnosis(&err.message), "{compiled}");
        assert_ne!(
            compiled, err.message,
            "the fixes are spelt for their syntax"
        );
    }
}
