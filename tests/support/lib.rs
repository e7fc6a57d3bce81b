//! Shared fixtures of toolguard's integration tests: a small multi-tenant ledger with tools over
//! it, principals, and helpers to read the audit trail.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolguard::{
    BoxFuture, Owned, Principal, Reconciled, Risk, Tool, ToolContext, ToolError, ToolSpec, tool,
};

/// An account of the test ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Account id.
    pub id: String,
    /// Owning tenant.
    pub tenant: String,
    /// Owning subject.
    pub owner: String,
    /// Balance in cents.
    pub balance: i64,
}

impl Owned for Account {
    fn owner_tenant(&self) -> &str {
        &self.tenant
    }
    fn owner_subject(&self) -> Option<&str> {
        Some(&self.owner)
    }
}

/// The test ledger: accounts plus counters of what the handlers did.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Accounts by id.
    pub accounts: Mutex<HashMap<String, Account>>,
    /// Number of executed transfers.
    pub transfers: AtomicUsize,
    /// Number of executions of every other handler.
    pub runs: AtomicUsize,
    /// Transfers that a reconcile call reports as having happened (by operation id).
    pub landed: Mutex<HashMap<String, i64>>,
}

impl Ledger {
    /// A ledger with acme/alice's `acc-alice-1` (1,000,000,00 cents), `acc-alice-2` (0),
    /// acme/bob's `acc-bob-1` and globex/carol's `acc-carol-1`.
    pub fn seeded() -> Self {
        let l = Ledger::default();
        for (id, tenant, owner, balance) in [
            ("acc-alice-1", "acme", "alice", 100_000_000),
            ("acc-alice-2", "acme", "alice", 0),
            ("acc-bob-1", "acme", "bob", 500_000),
            ("acc-carol-1", "globex", "carol", 500_000),
        ] {
            l.accounts.lock().unwrap().insert(
                id.to_owned(),
                Account {
                    id: id.to_owned(),
                    tenant: tenant.to_owned(),
                    owner: owner.to_owned(),
                    balance,
                },
            );
        }
        l
    }

    /// Balance of `id`.
    pub fn balance(&self, id: &str) -> i64 {
        self.accounts.lock().unwrap()[id].balance
    }

    /// Executed transfers.
    pub fn transfers(&self) -> usize {
        self.transfers.load(Ordering::SeqCst)
    }

    /// Executions of the other handlers.
    pub fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

/// ISO currency of a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Currency {
    /// US dollar.
    USD,
    /// Euro.
    EUR,
}

/// What a transfer returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TransferReceipt {
    /// Transfer number.
    pub transfer: usize,
    /// New balance of the debited account.
    pub balance: i64,
}

async fn source_is_callers(
    ctx: &ToolContext<Ledger>,
    args: &TransferFundsArgs,
) -> Result<(), ToolError> {
    let accounts = ctx.state().accounts.lock().unwrap();
    ctx.resource(accounts.get(&args.from_account))?;
    Ok(())
}

async fn has_funds(ctx: &ToolContext<Ledger>, args: &TransferFundsArgs) -> Result<(), ToolError> {
    let accounts = ctx.state().accounts.lock().unwrap();
    match accounts.get(&args.from_account) {
        Some(a) if a.balance < args.amount as i64 => {
            Err(ToolError::precondition("insufficient funds"))
        }
        _ => Ok(()),
    }
}

/// Moves money from one of the caller's accounts to another account.
#[tool(
    risk = "high",
    idempotent,
    approval_over = 1_000_000,
    preflight = has_funds,
    authorize = source_is_callers
)]
pub async fn transfer_funds(
    ctx: &ToolContext<Ledger>,
    /// Account to debit (one of the caller's).
    #[arg(kind = "identifier", max_len = 64)]
    from_account: String,
    /// Account to credit.
    #[arg(kind = "identifier", max_len = 64)]
    to_account: String,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 100_000_000)]
    amount: u64,
    /// Currency.
    currency: Currency,
    /// Note for the statement.
    #[arg(max_len = 140)]
    memo: Option<String>,
) -> Result<TransferReceipt, ToolError> {
    let _ = (currency, memo);
    let mut accounts = ctx.state().accounts.lock().unwrap();
    let amount = amount as i64;
    let from = accounts
        .get_mut(&from_account)
        .ok_or_else(ToolError::not_found)?;
    from.balance -= amount;
    let balance = from.balance;
    if let Some(to) = accounts.get_mut(&to_account) {
        to.balance += amount;
    }
    let n = ctx.state().transfers.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(TransferReceipt {
        transfer: n,
        balance,
    })
}

/// What a balance query returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Balance {
    /// Account id.
    pub account: String,
    /// Balance in cents.
    pub cents: i64,
}

/// The balance of one of the caller's accounts.
#[tool(read_only, risk = "medium", output = "trusted")]
pub async fn get_balance(
    ctx: &ToolContext<Ledger>,
    /// Account id.
    #[arg(kind = "identifier", max_len = 64)]
    account: String,
) -> Result<Balance, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    let accounts = ctx.state().accounts.lock().unwrap();
    let acc = ctx.resource(accounts.get(&account))?;
    Ok(Balance {
        account: acc.id.clone(),
        cents: acc.balance,
    })
}

/// Echoes a note back; low risk, plain function.
#[tool]
pub fn echo_note(
    ctx: &ToolContext<Ledger>,
    /// The note.
    #[arg(min_len = 1, max_len = 200)]
    note: String,
    /// How many times.
    #[arg(min = 1, max = 3)]
    times: Option<u8>,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(note.repeat(times.unwrap_or(1) as usize))
}

/// Always fails.
#[tool]
pub async fn flaky(ctx: &ToolContext<Ledger>) -> Result<u8, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Err(ToolError::failed("downstream said no"))
}

/// A report that takes too long (read-only).
#[tool(read_only, timeout_ms = 50)]
pub async fn slow_report(ctx: &ToolContext<Ledger>) -> Result<u8, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(5)).await;
    Ok(1)
}

/// Arguments of the hand-written `slow_payout` tool.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SlowPayoutArgs {
    /// Amount in cents.
    pub cents: u32,
    /// Milliseconds the downstream takes.
    pub delay_ms: u32,
    /// Idempotency key.
    pub idempotency_key: String,
}

/// A payout whose downstream call can hang past its 50 ms deadline; written by hand (no macro)
/// with a reconcile function that asks the ledger what landed.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlowPayout;

impl Tool<Ledger> for SlowPayout {
    type Args = SlowPayoutArgs;
    type Output = String;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            "slow_payout",
            "Pays out a small amount through a slow downstream.",
            toolguard::__private::schema_for::<SlowPayoutArgs>(),
            toolguard::__private::schema_for::<String>(),
        );
        spec.risk = Risk::Medium;
        spec.idempotent = true;
        spec.idempotency_key_field = Some("idempotency_key".to_owned());
        spec.timeout = Duration::from_millis(50);
        spec
    }

    fn reconcile<'a>(
        &'a self,
        ctx: &'a ToolContext<Ledger>,
        _args: &'a SlowPayoutArgs,
    ) -> BoxFuture<'a, Result<Reconciled<String>, ToolError>> {
        Box::pin(async move {
            let landed = ctx.state().landed.lock().unwrap();
            Ok(match ctx.operation_id().and_then(|op| landed.get(op)) {
                Some(cents) if *cents > 0 => Reconciled::Completed(format!("paid {cents}")),
                Some(_) => Reconciled::NotExecuted,
                None => Reconciled::Unknown,
            })
        })
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext<Ledger>,
        args: SlowPayoutArgs,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            ctx.state().runs.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(args.delay_ms as u64)).await;
            Ok(format!("paid {}", args.cents))
        })
    }
}

/// Credits loyalty points; a reused key returns the first outcome whatever the new arguments.
#[tool(risk = "medium", idempotent, key_wins)]
pub async fn credit_points(
    ctx: &ToolContext<Ledger>,
    /// Points to credit.
    #[arg(min = 1, max = 10_000)]
    points: u32,
) -> Result<u32, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(points)
}

/// Fails on its first execution, succeeds afterwards (a transient downstream error).
#[tool(risk = "medium", idempotent)]
pub async fn flaky_once(
    ctx: &ToolContext<Ledger>,
    /// A label.
    #[arg(max_len = 20)]
    label: String,
) -> Result<String, ToolError> {
    let n = ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    if n == 0 {
        Err(ToolError::failed("transient"))
    } else {
        Ok(label)
    }
}

/// Closes one of the caller's accounts; always needs a human.
#[tool(risk = "critical", idempotent)]
pub async fn close_account(
    ctx: &ToolContext<Ledger>,
    /// Account to close.
    #[arg(kind = "identifier", max_len = 64)]
    account: String,
) -> Result<bool, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(ctx
        .state()
        .accounts
        .lock()
        .unwrap()
        .remove(&account)
        .is_some())
}

/// Wires money out; needs two distinct approvers.
#[tool(risk = "critical", idempotent, approvals = 2)]
pub async fn wire_out(
    ctx: &ToolContext<Ledger>,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 100_000_000)]
    amount: u64,
) -> Result<u64, ToolError> {
    ctx.state().transfers.fetch_add(1, Ordering::SeqCst);
    Ok(amount)
}

/// Panics inside the handler (a bug in a tool must not take the dispatcher down).
#[tool(risk = "medium", idempotent)]
pub async fn buggy_export(
    ctx: &ToolContext<Ledger>,
    /// Rows to export.
    #[arg(min = 0, max = 10)]
    rows: u8,
) -> Result<u8, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    let rows_left: Vec<u8> = Vec::new();
    Ok(rows_left[rows as usize])
}

/// Sends a payment whose idempotency key the host supplies.
#[tool(risk = "high", idempotent(key = "host"))]
pub async fn host_keyed_payment(
    ctx: &ToolContext<Ledger>,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 1_000)]
    amount: u64,
) -> Result<u64, ToolError> {
    ctx.state().transfers.fetch_add(1, Ordering::SeqCst);
    Ok(amount)
}

/// acme/alice, authenticated now.
pub fn alice() -> Principal {
    Principal::new("acme", "alice", "sess-alice")
}

/// acme/bob with the approver role.
pub fn bob_approver() -> Principal {
    Principal::new("acme", "bob", "sess-bob").with_role("approver")
}

/// acme/dave with the approver role.
pub fn dave_approver() -> Principal {
    Principal::new("acme", "dave", "sess-dave").with_role("approver")
}

/// globex/carol with the approver role.
pub fn carol_foreign_approver() -> Principal {
    Principal::new("globex", "carol", "sess-carol").with_role("approver")
}

/// Arguments of the hand-written `hanging_payout` tool.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HangingPayoutArgs {
    /// Amount in cents.
    pub cents: u32,
    /// Idempotency key.
    pub idempotency_key: String,
}

/// A payout whose downstream never answers within the test (30 s deadline): it counts its
/// execution in `Ledger::transfers` and then hangs, so that a test can kill the executing task
/// after the reservation and before completion.
#[derive(Debug, Clone, Copy, Default)]
pub struct HangingPayout;

impl Tool<Ledger> for HangingPayout {
    type Args = HangingPayoutArgs;
    type Output = String;

    fn spec(&self) -> ToolSpec {
        let mut spec = ToolSpec::new(
            "hanging_payout",
            "Pays out through a downstream that hangs.",
            toolguard::__private::schema_for::<HangingPayoutArgs>(),
            toolguard::__private::schema_for::<String>(),
        );
        spec.risk = Risk::Medium;
        spec.idempotent = true;
        spec.idempotency_key_field = Some("idempotency_key".to_owned());
        spec.timeout = Duration::from_secs(30);
        spec
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext<Ledger>,
        args: HangingPayoutArgs,
    ) -> BoxFuture<'a, Result<String, ToolError>> {
        Box::pin(async move {
            ctx.state().transfers.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(format!("paid {}", args.cents))
        })
    }
}

async fn explode_in_preflight(
    _ctx: &ToolContext<Ledger>,
    _args: &PanickyPreflightArgs,
) -> Result<(), ToolError> {
    panic!("a bug in the preflight hook")
}

/// A tool whose preflight hook panics (a bug in a hook must not take the dispatcher down).
#[tool(preflight = explode_in_preflight)]
pub async fn panicky_preflight(
    ctx: &ToolContext<Ledger>,
    /// A label.
    #[arg(max_len = 20)]
    label: String,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(label)
}

async fn explode_in_authorize(
    _ctx: &ToolContext<Ledger>,
    _args: &PanickyAuthorizeArgs,
) -> Result<(), ToolError> {
    panic!("a bug in the authorize hook")
}

/// A tool whose resource-authorization hook panics.
#[tool(authorize = explode_in_authorize)]
pub async fn panicky_authorize(
    ctx: &ToolContext<Ledger>,
    /// A label.
    #[arg(max_len = 20)]
    label: String,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    Ok(label)
}

/// Stores an API token; the token is `sensitive` and must never reach the audit trail.
#[tool]
pub async fn save_token(
    ctx: &ToolContext<Ledger>,
    /// Service name.
    #[arg(kind = "identifier", max_len = 32)]
    service: String,
    /// The token.
    #[arg(sensitive, max_len = 64)]
    token: String,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    let _ = token;
    Ok(format!("saved for {service}"))
}

/// Closes an account after approval, but its downstream fails on the first execution.
#[tool(risk = "critical", idempotent)]
pub async fn shaky_close(
    ctx: &ToolContext<Ledger>,
    /// Account to close.
    #[arg(kind = "identifier", max_len = 64)]
    account: String,
) -> Result<String, ToolError> {
    let n = ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    if n == 0 {
        Err(ToolError::failed("downstream unavailable"))
    } else {
        Ok(account)
    }
}

/// Registers a webhook after approval; the handler needs the sanitizer's checked address.
#[tool(risk = "critical", idempotent)]
pub async fn register_webhook(
    ctx: &ToolContext<Ledger>,
    /// Webhook address.
    #[arg(kind = "url", max_len = 200)]
    target: String,
) -> Result<String, ToolError> {
    ctx.state().runs.fetch_add(1, Ordering::SeqCst);
    let checked = ctx
        .resolved_url("/target")
        .ok_or_else(|| ToolError::failed("unchecked url"))?;
    let _ = target;
    Ok(format!("{} via {:?}", checked.host, checked.addrs))
}

/// A hand-written tool whose declaration a test sets freely (schemas, risk, fields), taking
/// any JSON arguments and returning a fixed output; counts its executions in `Ledger::runs`.
#[derive(Debug, Clone)]
pub struct SpecTool {
    /// The declaration.
    pub spec: ToolSpec,
    /// What the handler returns.
    pub output: serde_json::Value,
}

impl SpecTool {
    /// A low-risk tool `name` accepting any object and returning `output` under `output_schema`.
    pub fn new(name: &str, output_schema: serde_json::Value, output: serde_json::Value) -> Self {
        SpecTool {
            spec: ToolSpec::new(
                name,
                "A tool declared by a test.",
                serde_json::json!({"type": "object"}),
                output_schema,
            ),
            output,
        }
    }
}

impl Tool<Ledger> for SpecTool {
    type Args = serde_json::Value;
    type Output = serde_json::Value;

    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext<Ledger>,
        _args: serde_json::Value,
    ) -> BoxFuture<'a, Result<serde_json::Value, ToolError>> {
        Box::pin(async move {
            ctx.state().runs.fetch_add(1, Ordering::SeqCst);
            Ok(self.output.clone())
        })
    }
}

/// The multi-domain agent benchmark for provenance (`tests/agentbench/`).
#[path = "../agentbench/mod.rs"]
pub mod agentbench;
pub mod delegate;

/// An object schema whose property `field` is `levels` levels of `width` `anyOf` branches, each
/// a `$ref` to the next level: one value there is checked against `width^levels` subschemas
/// (refused at build and at declaration).
pub fn multiplying_schema(field: &str, levels: usize, width: usize) -> serde_json::Value {
    let mut defs = serde_json::Map::new();
    for level in 0..levels {
        let next = serde_json::json!({"$ref": format!("#/$defs/L{}", level + 1)});
        let branches: Vec<_> = (0..width).map(|_| next.clone()).collect();
        defs.insert(
            format!("L{level}"),
            serde_json::json!({"type": "array", "anyOf": branches}),
        );
    }
    defs.insert(format!("L{levels}"), serde_json::json!({"type": "integer"}));
    serde_json::json!({"type": "object", "properties": {field: {"$ref": "#/$defs/L0"}},
                       "$defs": defs})
}
