//! `toolguard mcp-proxy` as a transparent gateway in front of the reference "everything" MCP
//! server (`@modelcontextprotocol/server-everything` from npm, installed by `.ci/run` under
//! `TOOLGUARD_NPM_PREFIX`), compared with a direct connection to the same server: resources and
//! prompts pass unchanged as far as `[resources]` / `[prompts]` expose them, completion and
//! logging levels pass through, and the protocol version is the latest stable one. Its tools are
//! named as MCP servers often name them (`get-sum`, `get-tiny-image`): declared by those names,
//! they are guarded and their results pass unchanged (image content stays an image). Logging,
//! progress, sampling, elicitation and provenance are tested against the conformance fixture server
//! (`tests/conformance/server.py`) in `conformance.rs`.

#![allow(deprecated)] // rmcp marks logging (and sampling) deprecated for a draft protocol

mod proxy_support;

use proxy_support::{Host, Scratch, connect, npm_server, proxy_command};
use rmcp::RoleClient;
use rmcp::model::{
    ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ProtocolVersion,
    ReadResourceRequestParams, Reference, SetLevelRequestParams,
};
use rmcp::service::RunningService;
use serde_json::{Map, Value, json};

fn policy(resources_extra: &str) -> String {
    format!(
        r#"[proxy]
store = "audit.sqlite"

[principal]
tenant = "acme"
subject = "agent"
roles = ["agent"]

[resources]
expose = ["demo://resource/*"]
hide = ["demo://resource/static/document/features.md"]
{resources_extra}

[prompts]
expose = ["*"]
hide = ["args-prompt"]
"#
    )
}

fn everything() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(npm_server("server-everything")).arg("stdio");
    cmd
}

async fn through_gateway(dir: &Scratch, resources_extra: &str) -> RunningService<RoleClient, Host> {
    gateway_with(dir, &policy(resources_extra)).await
}

/// The gateway with the policy file `text`, in front of the server.
async fn gateway_with(dir: &Scratch, text: &str) -> RunningService<RoleClient, Host> {
    std::fs::write(dir.join("policy.toml"), text).expect("policy");
    let mut cmd = proxy_command(&dir.join("policy.toml"));
    cmd.arg("--")
        .arg("node")
        .arg(npm_server("server-everything"))
        .arg("stdio");
    connect(cmd, Host::default()).await
}

fn args(value: Value) -> Map<String, Value> {
    value.as_object().cloned().expect("object")
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn resources_prompts_and_completion_pass_as_the_policy_exposes_them() {
    let dir = Scratch::new("tg-everything");
    let direct = connect(everything(), Host::default()).await;
    let gateway = through_gateway(&dir, "").await;

    let listed: Vec<String> = gateway
        .list_all_resources()
        .await
        .expect("resources/list")
        .iter()
        .map(|r| r.uri.clone())
        .collect();
    assert!(
        listed.iter().any(|u| u.ends_with("architecture.md")),
        "{listed:?}"
    );
    assert!(
        !listed.iter().any(|u| u.ends_with("features.md")),
        "hidden: {listed:?}"
    );
    let templates = gateway
        .list_all_resource_templates()
        .await
        .expect("templates");
    assert_eq!(templates.len(), 2, "{templates:?}");

    let uri = "demo://resource/static/document/architecture.md";
    let read = gateway
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .expect("an exposed resource is read");
    let want = direct
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .expect("direct read");
    assert_eq!(
        serde_json::to_value(&read).unwrap(),
        serde_json::to_value(&want).unwrap()
    );
    let hidden = gateway
        .read_resource(ReadResourceRequestParams::new(
            "demo://resource/static/document/features.md",
        ))
        .await
        .expect_err("a hidden resource is refused");
    assert!(hidden.to_string().contains("not exposed"), "{hidden}");

    let prompts: Vec<String> = gateway
        .list_all_prompts()
        .await
        .expect("prompts/list")
        .iter()
        .map(|p| p.name.clone())
        .collect();
    assert!(prompts.contains(&"simple-prompt".to_owned()), "{prompts:?}");
    assert!(
        !prompts.contains(&"args-prompt".to_owned()),
        "hidden: {prompts:?}"
    );
    let prompt = gateway
        .get_prompt(GetPromptRequestParams::new("simple-prompt"))
        .await
        .expect("prompts/get");
    let want = direct
        .get_prompt(GetPromptRequestParams::new("simple-prompt"))
        .await
        .expect("direct prompts/get");
    assert_eq!(
        serde_json::to_value(&prompt).unwrap(),
        serde_json::to_value(&want).unwrap()
    );
    let mut hidden_prompt = GetPromptRequestParams::new("args-prompt");
    hidden_prompt.arguments = Some(args(json!({"city": "Paris"})));
    assert!(gateway.get_prompt(hidden_prompt).await.is_err());

    // Completion of an exposed prompt's argument passes through.
    let complete = CompleteRequestParams::new(
        Reference::for_prompt("completable-prompt"),
        serde_json::from_value::<ArgumentInfo>(json!({"name": "department", "value": "Eng"}))
            .expect("argument"),
    );
    let completed = gateway
        .complete(complete)
        .await
        .expect("completion/complete");
    let values = serde_json::to_value(&completed).unwrap();
    assert!(values.to_string().contains("Engineering"), "{values}");

    // Logging levels pass through; the protocol version is the latest stable one, though
    // rmcp's client offers a newer draft.
    let level: SetLevelRequestParams =
        serde_json::from_value(json!({"level": "debug"})).expect("level");
    gateway.set_level(level).await.expect("logging/setLevel");
    let info = gateway.peer_info().expect("initialized");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2025_11_25);
    direct.cancel().await.ok();
    gateway.cancel().await.ok();
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn without_sections_no_resource_or_prompt_is_exposed() {
    let dir = Scratch::new("tg-everything");
    let text = policy("")
        .replace("[resources]", "[unused_resources]")
        .replace("[prompts]", "[unused_prompts]");
    let text: String = text.split("[unused_resources]").next().unwrap().to_owned();
    let gateway = gateway_with(&dir, &text).await;
    let info = gateway.peer_info().expect("initialized");
    assert!(
        info.capabilities.resources.is_none(),
        "{:?}",
        info.capabilities
    );
    assert!(
        info.capabilities.prompts.is_none(),
        "{:?}",
        info.capabilities
    );
    let read = gateway
        .read_resource(ReadResourceRequestParams::new(
            "demo://resource/static/document/architecture.md",
        ))
        .await;
    assert!(read.is_err(), "{read:?}");
    assert!(
        gateway
            .get_prompt(GetPromptRequestParams::new("simple-prompt"))
            .await
            .is_err()
    );
    gateway.cancel().await.ok();
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn tools_named_with_hyphens_are_declared_guarded_and_pass_unchanged() {
    use rmcp::model::CallToolRequestParams;
    let dir = Scratch::new("tg-everything");
    let text = format!(
        "{}\n[tools.get-sum]\nrisk = \"low\"\nread_only = true\n\n\
         [tools.get-tiny-image]\nrisk = \"low\"\nread_only = true\n",
        policy("")
    );
    let gateway = gateway_with(&dir, &text).await;
    let direct = connect(everything(), Host::default()).await;
    let names: Vec<String> = gateway
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .map(|t| t.name.to_string())
        .collect();
    assert!(names.contains(&"get-sum".to_owned()), "{names:?}");
    assert!(names.contains(&"get-tiny-image".to_owned()), "{names:?}");
    // Undeclared tools stay hidden.
    assert!(!names.contains(&"get-env".to_owned()), "{names:?}");

    let sum = gateway
        .call_tool(
            CallToolRequestParams::new("get-sum").with_arguments(args(json!({"a": 2, "b": 3}))),
        )
        .await
        .expect("get-sum answers");
    let text = serde_json::to_string(&sum.content).unwrap();
    assert!(text.contains('5'), "{text}");
    // The upstream's schema is enforced before the call leaves: a string where it wants a
    // number never reaches it.
    let wrong = gateway
        .call_tool(
            CallToolRequestParams::new("get-sum").with_arguments(args(json!({"a": "2", "b": 3}))),
        )
        .await;
    let refused = match &wrong {
        Ok(result) => result.is_error == Some(true),
        Err(_) => true,
    };
    assert!(refused, "{wrong:?}");
    // An undeclared tool cannot be called, whatever its name.
    assert!(
        gateway
            .call_tool(CallToolRequestParams::new("get-env"))
            .await
            .is_err()
    );

    // Content passes unchanged: the image is an image, as the upstream sent it.
    let image = gateway
        .call_tool(CallToolRequestParams::new("get-tiny-image"))
        .await
        .expect("get-tiny-image answers");
    let want = direct
        .call_tool(CallToolRequestParams::new("get-tiny-image"))
        .await
        .expect("direct call");
    assert_eq!(
        serde_json::to_value(&image.content).unwrap(),
        serde_json::to_value(&want.content).unwrap()
    );
    assert!(
        image.content.iter().any(|c| c.as_image().is_some()),
        "{:?}",
        image.content
    );
    gateway.cancel().await.ok();
    direct.cancel().await.ok();
}

#[tokio::test]
#[cfg_attr(
    not(toolguard_npm),
    ignore = "needs TOOLGUARD_NPM_PREFIX (set by .ci/run)"
)]
async fn a_value_from_an_untrusted_resource_is_traced_per_argument() {
    use rmcp::model::CallToolRequestParams;
    // The precise flow mode judges each argument by where its value came from: the resource's
    // values are kept with its source, so a link copied from it waits for a human while a
    // message of the model's own runs in the same session. An image cannot be read for values
    // (a model can read the text in it): after one, a value seen nowhere waits too.
    let dir = Scratch::new("tg-everything");
    let text = format!(
        "{}\n[flow]\nmode = \"per_argument\"\n\n[tools.echo]\nrisk = \"medium\"\nread_only = false\n\
         fields.\"/message\" = {{ role = \"destination\" }}\n\n\
         [tools.get-tiny-image]\nrisk = \"low\"\nread_only = true\n",
        policy("")
    );
    let gateway = gateway_with(&dir, &text).await;
    let read = gateway
        .read_resource(ReadResourceRequestParams::new(
            "demo://resource/static/document/structure.md",
        ))
        .await
        .expect("an exposed resource is read");
    let link = "https://modelcontextprotocol.io";
    assert!(
        serde_json::to_string(&read).unwrap().contains(link),
        "the document links {link}"
    );
    // The client application sends an idempotency key with each call, so that a hold can wait
    // for a human.
    let echo = |message: &str, key: &str| {
        let mut params =
            CallToolRequestParams::new("echo").with_arguments(args(json!({ "message": message })));
        let meta = args(json!({ "toolguard/idempotencyKey": key }));
        params.meta = Some(rmcp::model::RequestMetaObject(rmcp::model::MetaObject(
            meta,
        )));
        params
    };
    let copied = gateway
        .call_tool(echo(link, "echo-0001"))
        .await
        .expect("echo answers");
    let copied = proxy_support::payload(&copied);
    assert_eq!(copied["status"], "pending_approval", "{copied}");
    assert_eq!(copied["reason"], "provenance", "{copied}");
    let said = copied.to_string();
    assert!(
        said.contains("`message` (destination): untrusted"),
        "{said}"
    );
    let own = gateway
        .call_tool(echo("hello from the agent", "echo-0002"))
        .await
        .expect("echo answers");
    let own = proxy_support::payload(&own);
    assert_eq!(own["status"], "ok", "{own}");

    let image = gateway
        .call_tool(CallToolRequestParams::new("get-tiny-image"))
        .await
        .expect("get-tiny-image answers");
    assert!(image.content.iter().any(|c| c.as_image().is_some()));
    let after = gateway
        .call_tool(echo("hello again from the agent", "echo-0003"))
        .await
        .expect("echo answers");
    let after = proxy_support::payload(&after);
    assert_eq!(after["status"], "pending_approval", "{after}");
    let said = after.to_string();
    assert!(
        said.contains("`message` (destination): untrusted (seen in no content"),
        "{said}"
    );
    gateway.cancel().await.ok();
}
