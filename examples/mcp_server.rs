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
//! Account arguments have the type `Identifier` (kind `identifier`, with the identifier pattern in
//! the schema), so the sanitizer applies identifier rules to them, not free-text ones.
//!
//! The host authenticates the connection; here the principal comes from `TOOLGUARD_TENANT`,
//! `TOOLGUARD_SUBJECT` and `TOOLGUARD_ROLES` (comma separated), as an auth layer would supply it.
//!
//! Run: `cargo run --example mcp_server --features mcp`

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolguard::RoleAuthorizer;
use toolguard::kinds::Identifier;
use toolguard::mcp::McpServer;
use toolguard::{Dispatcher, Principal, ToolContext, ToolError, tool};

/// A balance.
#[derive(Serialize, JsonSchema)]
struct Balance {
    /// Balance in minor units.
    minor_units: i64,
    /// ISO currency code.
    currency: String,
}

/// Current balance of one of the caller's accounts.
#[tool(read_only, output = "trusted")]
async fn get_balance(
    _ctx: &ToolContext<()>,
    /// The account id.
    #[arg(min_len = 3, max_len = 34)]
    account: Identifier,
) -> Result<Balance, ToolError> {
    match account.as_str() {
        "ACC001" => Ok(Balance {
            minor_units: 125_000,
            currency: "EUR".to_owned(),
        }),
        _ => Err(ToolError::not_found()),
    }
}

/// A completed transfer.
#[derive(Serialize, JsonSchema)]
struct Receipt {
    /// Transfer reference.
    reference: String,
}

/// Move money between two of the caller's accounts.
#[tool(risk = "high", idempotent, approval_over = 10_000)]
async fn transfer_funds(
    ctx: &ToolContext<()>,
    /// Account to debit.
    #[arg(min_len = 3, max_len = 34)]
    from_account: Identifier,
    /// Account to credit.
    #[arg(min_len = 3, max_len = 34)]
    to_account: Identifier,
    /// Amount in minor units.
    #[arg(amount, min = 1, max = 1_000_000)]
    amount: u64,
) -> Result<Receipt, ToolError> {
    let _ = (from_account, to_account, amount);
    Ok(Receipt {
        reference: format!("tr-{}", ctx.call_id()),
    })
}

/// Result of a reset.
#[derive(Serialize, JsonSchema)]
struct Reset {
    /// Whether the ledger was reset.
    reset: bool,
}

/// Reset the demo ledger (administrators only).
#[tool(risk = "medium", idempotent)]
async fn reset_ledger(_ctx: &ToolContext<()>) -> Result<Reset, ToolError> {
    Ok(Reset { reset: true })
}

/// A stored note.
#[derive(Serialize, JsonSchema)]
struct Note {
    /// Characters stored.
    stored_chars: usize,
}

/// Attach a short note to one of the caller's accounts.
#[tool]
async fn add_note(
    _ctx: &ToolContext<()>,
    /// The account the note is about.
    #[arg(min_len = 3, max_len = 34)]
    account: Identifier,
    /// The note, free text.
    #[arg(min_len = 1, max_len = 500)]
    note: String,
) -> Result<Note, ToolError> {
    let _ = account;
    Ok(Note {
        stored_chars: note.chars().count(),
    })
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

/// A scheduled payment.
#[derive(Serialize, JsonSchema)]
struct Scheduled {
    /// Schedule reference.
    reference: String,
    /// Payments scheduled in the first year.
    payments_per_year: u32,
}

/// Schedule a small payment from one of the caller's accounts.
#[tool(risk = "medium")]
#[allow(clippy::too_many_arguments)]
async fn schedule_payment(
    ctx: &ToolContext<()>,
    /// Account to debit.
    #[arg(min_len = 3, max_len = 34)]
    from_account: Identifier,
    /// Who receives the payment.
    payee: Payee,
    /// Amount in minor units.
    #[arg(amount, min = 1, max = 10_000)]
    amount: u32,
    /// How often the payment repeats.
    frequency: Frequency,
    /// Days from today until the first payment (today when absent).
    #[arg(max = 365)]
    start_in_days: Option<u16>,
    /// Labels for the caller's own records.
    #[arg(max_items = 5)]
    tags: Vec<String>,
    // The host's own record for this payment, any JSON. Deliberately without a doc comment:
    // schemars then writes the bare schema `true`, which MCP clients refuse as a property schema;
    // the export turns it into an object schema that says it accepts any JSON value.
    metadata: Option<serde_json::Value>,
) -> Result<Scheduled, ToolError> {
    let _ = (from_account, payee, amount, start_in_days, tags, metadata);
    let payments_per_year = match frequency {
        Frequency::Once => 1,
        Frequency::Weekly => 52,
        Frequency::Monthly => 12,
    };
    Ok(Scheduled {
        reference: format!("sp-{}", ctx.call_id()),
        payments_per_year,
    })
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
        .authorizer(RoleAuthorizer::new().require(ResetLedger::NAME, ["admin"]))
        .build()?;
    McpServer::new(dispatcher, principal_from_env())?
        .with_name("toolguard-demo")
        .serve_stdio()
        .await?;
    Ok(())
}
