//! The demo host: the bank's dispatcher, the console nested at `/console`, a demo sign-in, and
//! two requests proposed by alice's agent that wait for a decision.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::response::Redirect;
use axum::routing::{get, post};
use serde_json::json;
use toolguard::{
    Cents, Currency, Dispatcher, Identifier, MemoryAuditSink, MemoryStore, Principal, RiskPolicy,
    Status, ToolCall, ToolContext, ToolError, tool,
};
use toolguard_console::{Console, History};

use crate::ledger::{Bank, Booking, GetBalance, TransferFunds};
use crate::login::{self, Sessions};
pub use crate::login::{DEMO_PASSWORD, USERS};

/// Sends money to a bank abroad; two distinct approvers must agree (dual control).
#[tool(risk = "critical", idempotent, approvals = 2)]
pub async fn wire_abroad(
    ctx: &ToolContext<Bank>,
    /// Account to debit, like `chk-alice`.
    from_account: Identifier,
    /// The beneficiary's account at the foreign bank.
    beneficiary: Identifier,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 100_000_000)]
    amount: Cents,
    /// Currency of the amount.
    currency: Currency,
) -> Result<usize, ToolError> {
    let _ = currency;
    let bank = ctx.state();
    let mut bookings = bank
        .bookings
        .lock()
        .map_err(|_| ToolError::failed("ledger poisoned"))?;
    bookings.push(Booking {
        from: from_account.into_inner(),
        to: beneficiary.into_inner(),
        cents: amount.get(),
        memo: None,
    });
    Ok(bookings.len())
}

/// The running demo.
pub struct Demo {
    /// Base URL, like `http://127.0.0.1:8088`.
    pub url: String,
    /// The bank's book.
    pub bank: Arc<Bank>,
    /// The dispatcher the console decides through.
    pub desk: Dispatcher<Bank>,
    /// The audit trail.
    pub audit: Arc<MemoryAuditSink>,
    /// Approval ids waiting at start: the $20,000 transfer, then the dual-control wire.
    pub pending: Vec<String>,
}

/// alice, the customer whose agent proposes the transfers.
pub fn alice() -> Principal {
    Principal::new("acme", "alice", "agent-session-1")
}

/// Proposes `tool` with `args` as alice's agent; returns the approval id it waits under.
pub async fn propose(
    desk: &Dispatcher<Bank>,
    call_id: &str,
    tool: &str,
    mut args: serde_json::Value,
) -> Option<String> {
    args["idempotency_key"] = json!(format!("key-{call_id}"));
    let call = ToolCall::new(call_id, tool, args.to_string());
    let out = desk.dispatch(call, &alice()).await;
    if out.status != Status::PendingApproval {
        eprintln!(
            "{tool} was not held for approval: {:?} {:?} {:?}",
            out.status, out.message, out.errors
        );
    }
    out.approval.map(|a| a.approval_id)
}

fn dispatcher(
    bank: Arc<Bank>,
    audit: Arc<MemoryAuditSink>,
    history: History,
    console_url: &str,
) -> Dispatcher<Bank> {
    let policy = RiskPolicy::new()
        .approver_roles(["teller"])
        .tool_approver_roles("wire_abroad", ["teller", "compliance"])
        .approval_ttl(Duration::from_secs(3600));
    let mut builder = Dispatcher::builder_arc(bank)
        .tool(TransferFunds)
        .tool(GetBalance)
        .tool(WireAbroad)
        .audit(audit)
        .store(Arc::new(MemoryStore::new()))
        .policy(policy)
        .notifier(history);
    if let (Ok(url), Ok(secret)) = (
        std::env::var("TOOLGUARD_WEBHOOK_URL"),
        std::env::var("TOOLGUARD_WEBHOOK_SECRET"),
    ) {
        let format = toolguard_console::webhook::Format::Chat {
            console_url: console_url.to_owned(),
        };
        match toolguard_console::webhook::WebhookNotifier::with(
            &url,
            secret,
            format,
            Default::default(),
        ) {
            Ok(hook) => builder = builder.notifier(hook),
            Err(err) => eprintln!("webhook not configured: {err}"),
        }
    }
    builder.build().expect("the demo bank's registry is valid")
}

/// Starts the demo on `addr` (like `127.0.0.1:0`) and seeds two pending requests.
pub async fn start(addr: &str) -> std::io::Result<Demo> {
    let bank = Arc::new(Bank::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let history = History::new();
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let url = format!("http://{}", listener.local_addr()?);
    let console_url = format!("{url}/console");
    let desk = dispatcher(bank.clone(), audit.clone(), history.clone(), &console_url);
    let sessions = Sessions::default();
    let console = Console::new(desk.clone(), sessions.clone())
        .mounted_at("/console")
        .title("Acme Bank · approvals")
        .sign_in_url("/login")
        .sign_out_url("/logout")
        .reviewer_roles(["teller", "compliance"])
        .history(history)
        .router();
    let app = Router::new()
        .route("/", get(|| async { Redirect::to("/console/requests") }))
        .route("/login", get(login::page).post(login::sign_in))
        .route("/logout", post(login::sign_out))
        .with_state(sessions)
        .nest("/console", console);
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, app).await {
            eprintln!("the console server stopped: {err}");
        }
    });
    let mut pending = Vec::new();
    let transfer = json!({
        "from_account": "chk-alice", "to_account": "ext-vendor-7", "amount": 2_000_000,
        "currency": "USD", "memo": "Invoice 2291 <marquee>alert('pwned')</marquee>"
    });
    pending.extend(propose(&desk, "call-transfer-1", "transfer_funds", transfer).await);
    let wire = json!({
        "from_account": "chk-alice", "beneficiary": "de-89370400440532013000",
        "amount": 4_500_000, "currency": "USD"
    });
    pending.extend(propose(&desk, "call-wire-1", "wire_abroad", wire).await);
    Ok(Demo {
        url,
        bank,
        desk,
        audit,
        pending,
    })
}
