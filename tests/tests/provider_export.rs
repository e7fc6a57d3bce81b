//! Golden tests of every dialect's tool export. Files under `tests/golden/` are compared exactly;
//! run with `TOOLGUARD_BLESS=1` to rewrite them.

mod provider_specs;

use std::path::PathBuf;

use serde_json::{Value, json};
use toolguard::ToolSpec;
use toolguard::providers::ExportTools as _;
use toolguard::providers::{
    ExportError, ExportOptions, Exported, LowerError, anthropic, gemini, mcp, openai,
};

fn golden(name: &str, actual: &Value) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join(name);
    let mut text = serde_json::to_string_pretty(actual).expect("serializable");
    text.push('\n');
    if std::env::var_os("TOOLGUARD_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &text).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with TOOLGUARD_BLESS=1)", path.display()));
    assert!(
        expected == text,
        "{} differs from the export (run with TOOLGUARD_BLESS=1 to accept):\n{text}",
        path.display()
    );
}

/// Every spec through `export`, as one JSON document: the tool and its report, or the error.
fn export_each(export: impl Fn(&ToolSpec) -> Result<Exported, ExportError>) -> Value {
    let rows: Vec<Value> = provider_specs::specs()
        .iter()
        .map(|spec| match export(spec) {
            Ok(e) => json!({"tool": e.tool, "report": e.report}),
            Err(error) => json!({"name": spec.name, "error": error.to_string()}),
        })
        .collect();
    Value::Array(rows)
}

fn options() -> ExportOptions {
    ExportOptions::default()
}

#[test]
fn openai_chat() {
    let opts = ExportOptions {
        allow_non_strict: true,
        ..options()
    };
    golden(
        "openai_chat.json",
        &export_each(|s| openai::chat_tool(s, &opts)),
    );
}

#[test]
fn openai_responses() {
    golden(
        "openai_responses.json",
        &export_each(|s| openai::responses_tool(s, &options())),
    );
}

#[test]
fn anthropic_messages() {
    golden(
        "anthropic.json",
        &export_each(|s| anthropic::tool(s, &options())),
    );
}

#[test]
fn anthropic_strict() {
    let opts = ExportOptions {
        anthropic_strict: true,
        allow_non_strict: true,
        ..options()
    };
    golden(
        "anthropic_strict.json",
        &export_each(|s| anthropic::tool(s, &opts)),
    );
}

#[test]
fn gemini_json_schema() {
    golden(
        "gemini_json_schema.json",
        &export_each(|s| gemini::function_declaration(s, &options())),
    );
}

#[test]
fn gemini_openapi() {
    let opts = ExportOptions {
        gemini_openapi: true,
        ..options()
    };
    golden(
        "gemini_openapi.json",
        &export_each(|s| gemini::function_declaration(s, &opts)),
    );
}

/// The `#[arg]` options that are rules rather than schema keywords (`kind`, `sensitive`, `amount`,
/// `root`, and the bounds the dispatcher checks itself) of the tool declared with all of them.
#[test]
fn arg_rules_of_the_declared_tool() {
    let spec = provider_specs::spec("file_expense");
    golden(
        "arg_rules.json",
        &json!({
            "tool": spec.name,
            "idempotent": spec.idempotent,
            "idempotency_key_field": spec.idempotency_key_field,
            "fields": serde_json::to_value(&spec.fields).expect("serializable"),
        }),
    );
}

#[test]
fn mcp_tools() {
    golden("mcp.json", &export_each(|s| mcp::tool(s, &options())));
}

#[test]
fn strict_is_always_explicit() {
    let opts = ExportOptions {
        allow_non_strict: true,
        ..options()
    };
    let set = openai::chat_tools(&provider_specs::specs(), &opts).unwrap();
    for tool in set.tools.as_array().unwrap() {
        assert!(tool["function"]["strict"].is_boolean(), "{tool}");
    }
    let set = openai::responses_tools(&provider_specs::specs(), &opts).unwrap();
    for tool in set.tools.as_array().unwrap() {
        assert!(tool["strict"].is_boolean(), "{tool}");
    }
}

#[test]
fn non_strict_needs_consent() {
    let labels = provider_specs::spec("set_labels");
    let err = openai::chat_tool(&labels, &options()).unwrap_err();
    assert!(
        matches!(&err, ExportError::Schema { error: LowerError::NotStrict { pointer, .. }, .. }
            if pointer == "/properties/labels/additionalProperties"),
        "{err}"
    );
    let set = openai::chat_tools(&provider_specs::specs(), &options());
    assert!(
        set.is_err(),
        "a set with one non-strict tool fails without consent"
    );

    let opts = ExportOptions {
        allow_non_strict: true,
        ..options()
    };
    let exported = openai::chat_tool(&labels, &opts).unwrap();
    assert_eq!(exported.tool["function"]["strict"], false);
    assert!(exported.report.not_strict_reason.is_some());
}

#[test]
fn gemini_refuses_recursion_and_bad_keys() {
    let opts = ExportOptions {
        gemini_openapi: true,
        ..options()
    };
    let tree = provider_specs::spec("create_tree");
    let err = gemini::function_declaration(&tree, &opts).unwrap_err();
    assert!(
        matches!(
            err,
            ExportError::Schema {
                error: LowerError::Recursive { .. },
                ..
            }
        ),
        "{err}"
    );

    let schema = json!({"type": "object", "properties": {"bad-key": {"type": "string"}}});
    let spec = ToolSpec::new("t", "d", schema, json!({}));
    let err = gemini::function_declaration(&spec, &opts).unwrap_err();
    assert!(
        matches!(
            err,
            ExportError::Schema {
                error: LowerError::Unsupported { .. },
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn gemini_openapi_omits_parameters_of_a_tool_without_arguments() {
    let opts = ExportOptions {
        gemini_openapi: true,
        ..options()
    };
    for schema in [
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
        json!({"type": "object"}),
    ] {
        let spec = ToolSpec::new("ping", "Ping.", schema, json!({}));
        let exported = gemini::function_declaration(&spec, &opts).unwrap();
        assert_eq!(
            exported.tool,
            json!({"name": "ping", "description": "Ping."})
        );
        // The JSON Schema field keeps the schema as it is.
        let plain = gemini::function_declaration(&spec, &options()).unwrap();
        assert!(plain.tool.get("parametersJsonSchema").is_some());
    }
    // A map at the root is refused, not exported as a tool without arguments.
    let map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    let spec = ToolSpec::new("tags", "Tags.", map, json!({}));
    let err = gemini::function_declaration(&spec, &opts).unwrap_err();
    assert!(err.to_string().contains("a map"), "{err}");
}

#[test]
fn tool_names_follow_the_portable_rule() {
    use toolguard::providers::is_valid_tool_name;
    let longest = format!("a{}", "b".repeat(63));
    for good in [
        "a",
        "Z",
        "get_balance",
        "get-balance",
        "a1_B2",
        longest.as_str(),
    ] {
        assert!(is_valid_tool_name(good), "{good:?}");
    }
    let too_long = format!("a{}", "b".repeat(64));
    for bad in [
        "",
        "1abc",
        "_private",
        "-balance",
        "get balance",
        "émoji",
        "a.b",
        too_long.as_str(),
    ] {
        assert!(!is_valid_tool_name(bad), "{bad:?}");
        let mut spec = provider_specs::spec("get_balance");
        spec.name = bad.to_owned();
        let err = anthropic::tool(&spec, &options()).unwrap_err();
        assert!(matches!(err, ExportError::InvalidName { .. }), "{err}");
        assert!(
            err.to_string().contains("^[a-zA-Z][a-zA-Z0-9_-]{0,63}$"),
            "{err}"
        );
    }
}

#[test]
fn dispatcher_exports_its_tools_in_every_dialect() {
    use toolguard::providers::{Dialect, export};
    let dispatcher = toolguard::Dispatcher::builder(toolguard_tests::Ledger::seeded())
        .tool(toolguard_tests::GetBalance)
        .tool(toolguard_tests::TransferFunds)
        .build()
        .expect("dispatcher");
    let specs: Vec<ToolSpec> = dispatcher.specs().cloned().collect();
    let opts = ExportOptions {
        allow_non_strict: true,
        ..options()
    };
    let cases = [
        (Dialect::OpenAiChat, openai::chat_tools(&specs, &opts)),
        (
            Dialect::OpenAiResponses,
            openai::responses_tools(&specs, &opts),
        ),
        (Dialect::Anthropic, anthropic::tools(&specs, &opts)),
        (
            Dialect::Gemini,
            gemini::function_declarations(&specs, &opts),
        ),
        (Dialect::Mcp, mcp::tools(&specs, &opts)),
    ];
    for (dialect, expected) in cases {
        let exported = dispatcher.export(dialect, &opts);
        assert_eq!(exported, expected, "{dialect:?}");
        assert_eq!(export(&specs, dialect, &opts), exported, "{dialect:?}");
        let reports: Vec<String> = exported
            .unwrap()
            .reports
            .into_iter()
            .map(|r| r.tool)
            .collect();
        assert_eq!(reports, ["get_balance", "transfer_funds"], "{dialect:?}");
    }
}

#[test]
fn invalid_tool_names_are_refused() {
    let mut spec = provider_specs::spec("get_balance");
    spec.name = "get balance".into();
    assert!(matches!(
        openai::chat_tool(&spec, &options()),
        Err(ExportError::InvalidName { .. })
    ));
    assert!(matches!(
        mcp::tool(&spec, &options()),
        Err(ExportError::InvalidName { .. })
    ));
}

#[test]
fn mcp_annotations_never_claim_more_than_declared() {
    for spec in provider_specs::specs() {
        let hints = mcp::annotations(&spec);
        assert_eq!(hints["readOnlyHint"], spec.read_only);
        assert_eq!(hints["destructiveHint"], !spec.read_only);
        // Only where the key can reach the dispatcher from the client: read-only tools and tools
        // whose key is a model-supplied argument.
        assert_eq!(
            hints.get("idempotentHint").is_some(),
            spec.read_only || (spec.idempotent && spec.idempotency_key_field.is_some())
        );
        assert!(hints.get("openWorldHint").is_none());
    }
    let mut host_keyed = provider_specs::spec("transfer_funds");
    assert!(host_keyed.idempotent && host_keyed.idempotency_key_field.is_none());
    assert!(
        mcp::annotations(&host_keyed)
            .get("idempotentHint")
            .is_none()
    );
    host_keyed.idempotency_key_field = Some("idempotency_key".to_owned());
    assert_eq!(mcp::annotations(&host_keyed)["idempotentHint"], true);
}

/// Every schema position under `schema` whose value is not an object schema (booleans are
/// allowed only as `additionalProperties` / `unevaluated*`), and every `format` outside
/// `formats`.
fn non_portable(schema: &Value, at: &str, formats: &[&str], out: &mut Vec<String>) {
    let Some(map) = schema.as_object() else {
        out.push(format!("{at}: {schema}"));
        return;
    };
    if let Some(format) = map.get("format").and_then(Value::as_str)
        && !formats.contains(&format)
    {
        out.push(format!("{at}/format: {format}"));
    }
    for (key, value) in map {
        let here = format!("{at}/{key}");
        match key.as_str() {
            "additionalProperties" | "unevaluatedProperties" | "unevaluatedItems"
                if value.is_boolean() => {}
            "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas" => {
                for (name, child) in value.as_object().into_iter().flatten() {
                    non_portable(child, &format!("{here}/{name}"), formats, out);
                }
            }
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                for (i, child) in value.as_array().into_iter().flatten().enumerate() {
                    non_portable(child, &format!("{here}/{i}"), formats, out);
                }
            }
            "items"
            | "additionalItems"
            | "contains"
            | "not"
            | "if"
            | "then"
            | "else"
            | "propertyNames"
            | "additionalProperties"
            | "unevaluatedProperties"
            | "unevaluatedItems" => non_portable(value, &here, formats, out),
            _ => {}
        }
    }
}

/// JSON Schema 2020-12's formats.
const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

#[test]
fn every_export_has_object_schemas_and_standard_formats_at_every_position() {
    let lenient = ExportOptions {
        allow_non_strict: true,
        ..options()
    };
    let anthropic_strict = ExportOptions {
        anthropic_strict: true,
        ..lenient
    };
    let gemini_openapi = ExportOptions {
        gemini_openapi: true,
        ..lenient
    };
    let openapi_formats = ["enum", "date-time", "int32", "int64", "float", "double"];
    let mut checked = 0;
    for spec in provider_specs::specs() {
        let mut schemas: Vec<(&str, Value, &[&str])> = vec![
            (
                "openai",
                openai::chat_tool(&spec, &lenient).unwrap().tool["function"]["parameters"].clone(),
                STANDARD_FORMATS,
            ),
            (
                "anthropic",
                anthropic::tool(&spec, &options()).unwrap().tool["input_schema"].clone(),
                STANDARD_FORMATS,
            ),
            (
                "anthropic strict",
                anthropic::tool(&spec, &anthropic_strict).unwrap().tool["input_schema"].clone(),
                STANDARD_FORMATS,
            ),
            (
                "gemini",
                gemini::function_declaration(&spec, &options())
                    .unwrap()
                    .tool["parametersJsonSchema"]
                    .clone(),
                STANDARD_FORMATS,
            ),
        ];
        let mcp_tool = mcp::tool(&spec, &options()).unwrap().tool;
        schemas.push((
            "mcp input",
            mcp_tool["inputSchema"].clone(),
            STANDARD_FORMATS,
        ));
        if let Some(output) = mcp_tool.get("outputSchema") {
            schemas.push(("mcp output", output.clone(), STANDARD_FORMATS));
        }
        // Gemini's OpenAPI subset refuses what it cannot express (the untyped tool): an error,
        // never a non-object schema.
        if let Ok(exported) = gemini::function_declaration(&spec, &gemini_openapi)
            && let Some(parameters) = exported.tool.get("parameters")
        {
            schemas.push(("gemini openapi", parameters.clone(), &openapi_formats));
        }
        for (dialect, schema, formats) in schemas {
            let mut found = Vec::new();
            non_portable(&schema, "", formats, &mut found);
            assert!(found.is_empty(), "{dialect} {}: {found:?}", spec.name);
            checked += 1;
        }
    }
    assert!(checked >= 40, "{checked}");
    // The untyped arguments say what they accept, in every JSON-Schema export.
    let event = provider_specs::spec("record_event");
    let mcp_schema = &mcp::tool(&event, &options()).unwrap().tool["inputSchema"];
    for name in ["payload", "extra"] {
        assert_eq!(
            mcp_schema["properties"][name]["description"],
            toolguard::providers::ANY_VALUE
        );
    }
    assert_eq!(
        mcp_schema["properties"]["sequence"]["maximum"],
        4_294_967_295_u64
    );
    assert!(event.input_schema["properties"]["payload"] == json!(true));
}
