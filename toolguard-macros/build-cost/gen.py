import os
import sys

# usage: gen.py OUT_DIR: writes OUT_DIR/bench_macro (100 #[tool] functions) and
# OUT_DIR/bench_hand (the same 100 tools with hand-written Tool impls).
out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/tgbench"
runtime = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "toolguard"))
N = 100
common_toml = '''[package]
name = "{name}"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
toolguard = {{ path = "{runtime}" }}
serde = {{ version = "1", features = ["derive"] }}
schemars = "1.2"
serde_json = "1"

[workspace]
'''
header = '''#![allow(dead_code)]
use schemars::JsonSchema;
#[allow(unused_imports)]
use serde::{Deserialize, Serialize};
use toolguard::{ToolContext, ToolError};

pub struct State { pub fee: u64 }

#[derive(Debug, Serialize, JsonSchema)]
pub struct Out { pub id: String, pub amount: u64 }
'''
def macro_tool(i):
    return f'''
/// Tool {i}: moves money between the caller's accounts.
#[toolguard::tool(risk = "medium", idempotent, approval_over = 10_000)]
pub async fn tool_{i}(
    ctx: &ToolContext<State>,
    /// Account to credit.
    #[arg(kind = "identifier", max_len = 34)]
    account: String,
    /// Amount in cents.
    #[arg(min = 1, max = 1_000_000)]
    amount: u64,
    /// Note on the statement.
    #[arg(max_len = 140)]
    memo: Option<String>,
) -> Result<Out, ToolError> {{
    let _ = memo;
    Ok(Out {{ id: account, amount: amount + ctx.state().fee }})
}}
'''
def hand_tool(i):
    return f'''
/// Arguments of tool {i}.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tool{i}Args {{
    /// Account to credit.
    #[schemars(extend("maxLength" = 34))]
    pub account: String,
    /// Amount in cents.
    #[schemars(extend("minimum" = 1, "maximum" = 1_000_000))]
    pub amount: u64,
    /// Note on the statement.
    #[schemars(extend("maxLength" = 140))]
    pub memo: Option<String>,
    /// Stable key for this operation; reuse it when retrying the same action
    #[schemars(extend("pattern" = "^[A-Za-z0-9_-]{{8,128}}$"))]
    pub idempotency_key: String,
}}

/// Tool {i}: moves money between the caller's accounts.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tool{i};

impl toolguard::Tool<State> for Tool{i} {{
    type Args = Tool{i}Args;
    type Output = Out;

    fn spec(&self) -> toolguard::ToolSpec {{
        let mut spec = toolguard::ToolSpec::new(
            "tool_{i}",
            "Tool {i}: moves money between the caller's accounts.",
            toolguard::__private::schema_for::<Tool{i}Args>(),
            toolguard::__private::schema_for::<Out>(),
        );
        spec.risk = toolguard::Risk::Medium;
        spec.idempotent = true;
        spec.approval_over = Some(10_000);
        spec.idempotency_key_field = Some("idempotency_key".into());
        spec.fields = vec![
            toolguard::FieldSpec {{ kind: toolguard::FieldKind::Identifier, description: Some("Account to credit.".into()), max_len: Some(34), ..toolguard::FieldSpec::new("account") }},
            toolguard::FieldSpec {{ kind: toolguard::FieldKind::Opaque, description: Some("Amount in cents.".into()), amount: true, min: Some(1.0), max: Some(1_000_000.0), ..toolguard::FieldSpec::new("amount") }},
            toolguard::FieldSpec {{ kind: toolguard::FieldKind::Text, description: Some("Note on the statement.".into()), optional: true, max_len: Some(140), ..toolguard::FieldSpec::new("memo") }},
            toolguard::FieldSpec {{ kind: toolguard::FieldKind::Identifier, description: Some("Stable key for this operation; reuse it when retrying the same action".into()), pattern: Some("^[A-Za-z0-9_-]{{8,128}}$".into()), ..toolguard::FieldSpec::new("idempotency_key") }},
        ];
        spec
    }}

    fn call<'a>(&'a self, ctx: &'a ToolContext<State>, args: Tool{i}Args) -> toolguard::BoxFuture<'a, Result<Out, ToolError>> {{
        Box::pin(async move {{
            let _ = args.memo;
            Ok(Out {{ id: args.account, amount: args.amount + ctx.state().fee }})
        }})
    }}
}}
'''
for name, f in [("bench_macro", macro_tool), ("bench_hand", hand_tool)]:
    os.makedirs(f"{out}/{name}/src", exist_ok=True)
    open(f"{out}/{name}/Cargo.toml", "w").write(common_toml.format(name=name, runtime=runtime))
    body = header + "".join(f(i) for i in range(N))
    body += "\npub fn handles() -> Vec<toolguard::ToolHandle<State>> { vec![" + ", ".join(f"toolguard::ToolHandle::new(Tool{i})" for i in range(N)) + "] }\n"
    open(f"{out}/{name}/src/lib.rs", "w").write(body)
    # Pin the dependency versions of the workspace.
    lock = os.path.join(os.path.dirname(runtime), "Cargo.lock")
    if os.path.exists(lock):
        open(f"{out}/{name}/Cargo.lock", "w").write(open(lock).read())
