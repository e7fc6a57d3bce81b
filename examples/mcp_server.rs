//! An MCP server over stdio serving five guarded tools:
//!
//! * `get_balance` — read-only, always runs (arguments are validated: `account` is an
//!   identifier of 3 to 34 ASCII letters, digits, `_` or `-`, so a shorter one or one with a
//!   space is `invalid_arguments`);
//! * `transfer_funds` — high risk; amounts over 10,000 minor units wait for a human approval
//!   (`pending_approval`);
//! * `reset_ledger` — reserved to the `admin` role (`forbidden` for everyone else);
//! * `add_note` — free text, checked by the sanitizer (an injection attempt is `blocked`);
//! * `schedule_payment` — optional, enum, nested, collection and untyped (any JSON) arguments,
//!   as hosts meet them in real tool sets.
//!
//! Account arguments are declared as identifiers (`FieldKind::Identifier` and the identifier
//! pattern in the schema), so the sanitizer applies identifier rules to them, not free-text ones.
//!
//! The host authenticates the connection; here the principal comes from `TOOLGUARD_TENANT`,
//! `TOOLGUARD_SUBJECT` and `TOOLGUARD_ROLES` (comma separated), as an auth layer would supply it.
//!
//! Run: `cargo run --example mcp_server --features mcp`

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolguard::dispatcher::Dispatcher;
use toolguard::kinds::Identifier;
use toolguard::provider::mcp::McpServer;
use toolguard::stage::authorize::RoleAuthorizer;
use toolguard::{
    BoxFuture, FieldKind, FieldSpec, Principal, Risk, Tool, ToolContext, ToolError, ToolSpec,
};

fn schema<T: JsonSchema>() -> serde_json::Value {
    toolguard::__private::schema_for::<T>()
}

/// The rules of an account argument: an identifier, not free text.
fn account_field(name: &str) -> FieldSpec {
    FieldSpec {
        kind: FieldKind::Identifier,
        min_len: Some(3),
        max_len: Some(34),
        pattern: Some(Identifier::PATTERN.to_owned()),
        ..FieldSpec::new(name)
    }
}

/// Arguments of `get_balance`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct BalanceArgs {
    /// The account id.
    #[schemars(length(min = 3, max = 34), pattern(r"^[A-Za-z0-9_-]+$"))]
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
        spec.fields = vec![account_field("account")];
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
    #[schemars(length(min = 3, max = 34), pattern(r"^[A-Za-z0-9_-]+$"))]
    from_account: String,
    /// Account to credit.
    #[schemars(length(min = 3, max = 34), pattern(r"^[A-Za-z0-9_-]+$"))]
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
        spec.fields = vec![
            account_field("from_account"),
            account_field("to_account"),
            FieldSpec {
                amount: true,
                ..FieldSpec::new("amount")
            },
        ];
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
    #[schemars(length(min = 3, max = 34), pattern(r"^[A-Za-z0-9_-]+$"))]
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
        let mut spec = ToolSpec::new(
            "add_note",
            "Attach a short note to one of the caller's accounts.",
            schema::<NoteArgs>(),
            schema::<Note>(),
        );
        spec.fields = vec![account_field("account"), FieldSpec::new("note")];
        spec
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

/// How often a scheduled payment repeats.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Frequency {
    /// Once, on the start day.
    Once,
    /// Every week from the start day.
    Weekly,
    /// Every month from the start day.
    Monthly,
}

/// Who receives a scheduled payment.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Payee {
    /// The payee's name as shown on statements.
    #[schemars(length(min = 1, max = 70))]
    name: String,
    /// The payee's account id.
    #[schemars(length(min = 3, max = 34), pattern(r"^[A-Za-z0-9_-]+$"))]
    account: String,
}

/// Arguments of `schedule_payment`.
#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ScheduleArgs {
    /// Account to debit.
    #[schemars(length(min = 3, max = 34), pattern(r"^[A-Za-z0-9_-]+$"))]
    from_account: String,
    /// Who receives the payment.
    payee: Payee,
    /// Amount in minor units.
    #[schemars(range(min = 1, max = 10_000))]
    amount: u32,
    /// How often the payment repeats.
    frequency: Frequency,
    /// Days from today until the first payment (today when absent).
    #[schemars(range(max = 365))]
    start_in_days: Option<u16>,
    /// Labels for the caller's own records.
    #[schemars(length(max = 5))]
    tags: Vec<String>,
    // The host's own record for this payment, any JSON. Deliberately without a doc comment:
    // schemars then writes the bare schema `true`, which MCP clients refuse as a property schema;
    // the export turns it into an object schema that says it accepts any JSON value.
    metadata: Option<serde_json::Value>,
}

/// A scheduled payment.
#[derive(Serialize, JsonSchema)]
struct Scheduled {
    /// Schedule reference.
    reference: String,
    /// Payments scheduled in the first year.
    payments_per_year: u32,
}

struct SchedulePayment;

impl Tool<()> for SchedulePayment {
    type Args = ScheduleArgs;
    type Output = Scheduled;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            "schedule_payment",
            "Schedule a small payment from one of the caller's accounts.",
            schema::<ScheduleArgs>(),
            schema::<Scheduled>(),
        );
        spec.risk = Risk::Medium;
        spec.fields = vec![
            account_field("from_account"),
            FieldSpec {
                amount: true,
                ..FieldSpec::new("amount")
            },
        ];
        spec
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext<()>,
        args: ScheduleArgs,
    ) -> BoxFuture<'a, Result<Scheduled, ToolError>> {
        Box::pin(async move {
            let payments_per_year = match args.frequency {
                Frequency::Once => 1,
                Frequency::Weekly => 52,
                Frequency::Monthly => 12,
            };
            Ok(Scheduled {
                reference: format!("sp-{}", ctx.call_id()),
                payments_per_year,
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
        .tool(SchedulePayment)
        .authorizer(RoleAuthorizer::new().require("reset_ledger", ["admin"]))
        .build()?;
    McpServer::new(dispatcher, principal_from_env())?
        .with_name("toolguard-demo")
        .serve_stdio()
        .await?;
    Ok(())
}
