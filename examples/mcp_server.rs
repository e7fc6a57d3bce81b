//! An MCP server over stdio serving three guarded tools:
//!
//! * `get_balance` — read-only, always runs (arguments are validated: `account` needs 3 to 34
//!   characters, so a shorter one is `invalid_arguments`);
//! * `transfer_funds` — high risk; amounts over 10,000 minor units wait for a human approval
//!   (`pending_approval`);
//! * `reset_ledger` — reserved to the `admin` role (`forbidden` for everyone else);
//! * `add_note` — free text, checked by the sanitizer (an injection attempt is `blocked`).
//!
//! The host authenticates the connection; here the principal comes from `TOOLGUARD_TENANT`,
//! `TOOLGUARD_SUBJECT` and `TOOLGUARD_ROLES` (comma separated), as an auth layer would supply it.
//!
//! Run: `cargo run --example mcp_server --features mcp`

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolguard::dispatcher::Dispatcher;
use toolguard::provider::mcp::McpServer;
use toolguard::stage::authorize::RoleAuthorizer;
use toolguard::{BoxFuture, FieldSpec, Principal, Risk, Tool, ToolContext, ToolError, ToolSpec};

fn schema<T: JsonSchema>() -> serde_json::Value {
    toolguard::__private::schema_for::<T>()
}

/// Arguments of `get_balance`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BalanceArgs {
    /// The account id.
    #[schemars(length(min = 3, max = 34))]
    account: String,
}

/// A balance.
#[derive(Serialize, JsonSchema)]
struct Balance {
    /// Balance in minor units.
    minor_units: i64,
    /// ISO currency code.
    currency: String,
}

struct GetBalance;

impl Tool<()> for GetBalance {
    type Args = BalanceArgs;
    type Output = Balance;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            "get_balance",
            "Current balance of one of the caller's accounts.",
            schema::<BalanceArgs>(),
            schema::<Balance>(),
        );
        spec.read_only = true;
        spec
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext<()>,
        args: BalanceArgs,
    ) -> BoxFuture<'a, Result<Balance, ToolError>> {
        Box::pin(async move {
            match args.account.as_str() {
                "ACC001" => Ok(Balance {
                    minor_units: 125_000,
                    currency: "EUR".to_owned(),
                }),
                _ => Err(ToolError::not_found()),
            }
        })
    }
}

/// Arguments of `transfer_funds`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TransferArgs {
    /// Account to debit.
    #[schemars(length(min = 3, max = 34))]
    from_account: String,
    /// Account to credit.
    #[schemars(length(min = 3, max = 34))]
    to_account: String,
    /// Amount in minor units.
    #[schemars(range(min = 1, max = 1_000_000))]
    amount: u64,
    /// A fresh key per intended transfer; a retry reuses it.
    #[schemars(length(min = 8, max = 64))]
    idempotency_key: String,
}

/// A completed transfer.
#[derive(Serialize, JsonSchema)]
struct Receipt {
    /// Transfer reference.
    reference: String,
}

struct TransferFunds;

impl Tool<()> for TransferFunds {
    type Args = TransferArgs;
    type Output = Receipt;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            "transfer_funds",
            "Move money between two of the caller's accounts.",
            schema::<TransferArgs>(),
            schema::<Receipt>(),
        );
        spec.risk = Risk::High;
        spec.idempotent = true;
        spec.idempotency_key_field = Some("idempotency_key".to_owned());
        spec.approval_over = Some(10_000);
        spec.fields = vec![FieldSpec {
            amount: true,
            ..FieldSpec::new("amount")
        }];
        spec
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext<()>,
        _args: TransferArgs,
    ) -> BoxFuture<'a, Result<Receipt, ToolError>> {
        Box::pin(async move {
            Ok(Receipt {
                reference: format!("tr-{}", ctx.call_id()),
            })
        })
    }
}

/// Arguments of `reset_ledger`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ResetArgs {
    /// A fresh key per reset.
    #[schemars(length(min = 8, max = 64))]
    idempotency_key: String,
}

/// Result of a reset.
#[derive(Serialize, JsonSchema)]
struct Reset {
    /// Whether the ledger was reset.
    reset: bool,
}

struct ResetLedger;

impl Tool<()> for ResetLedger {
    type Args = ResetArgs;
    type Output = Reset;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            "reset_ledger",
            "Reset the demo ledger (administrators only).",
            schema::<ResetArgs>(),
            schema::<Reset>(),
        );
        spec.risk = Risk::Medium;
        spec.idempotent = true;
        spec.idempotency_key_field = Some("idempotency_key".to_owned());
        spec
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext<()>,
        _args: ResetArgs,
    ) -> BoxFuture<'a, Result<Reset, ToolError>> {
        Box::pin(async { Ok(Reset { reset: true }) })
    }
}

/// Arguments of `add_note`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoteArgs {
    /// The account the note is about.
    #[schemars(length(min = 3, max = 34))]
    account: String,
    /// The note, free text.
    #[schemars(length(min = 1, max = 500))]
    note: String,
}

/// A stored note.
#[derive(Serialize, JsonSchema)]
struct Note {
    /// Characters stored.
    stored_chars: usize,
}

struct AddNote;

impl Tool<()> for AddNote {
    type Args = NoteArgs;
    type Output = Note;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new(
            "add_note",
            "Attach a short note to one of the caller's accounts.",
            schema::<NoteArgs>(),
            schema::<Note>(),
        )
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext<()>,
        args: NoteArgs,
    ) -> BoxFuture<'a, Result<Note, ToolError>> {
        Box::pin(async move {
            Ok(Note {
                stored_chars: args.note.chars().count(),
            })
        })
    }
}

fn principal_from_env() -> Principal {
    let var =
        |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let mut principal = Principal::new(
        var("TOOLGUARD_TENANT", "tenant-demo"),
        var("TOOLGUARD_SUBJECT", "alice"),
        format!("mcp-{}", std::process::id()),
    );
    for role in var("TOOLGUARD_ROLES", "")
        .split(',')
        .filter(|r| !r.is_empty())
    {
        principal = principal.with_role(role.trim());
    }
    principal
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dispatcher = Dispatcher::builder(())
        .tool(GetBalance)
        .tool(TransferFunds)
        .tool(ResetLedger)
        .tool(AddNote)
        .authorizer(RoleAuthorizer::new().require("reset_ledger", ["admin"]))
        .build()?;
    McpServer::new(dispatcher, principal_from_env())?
        .with_name("toolguard-demo")
        .serve_stdio()
        .await?;
    Ok(())
}
