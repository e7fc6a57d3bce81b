//! The three guarded calls every dispatch bench measures, on one dispatcher with memory stores
//! and a memory audit sink (no metrics recorder, no tracing subscriber):
//!
//! - `low`: a low-risk read with one identifier argument (`get_balance`);
//! - `high`: a high-risk idempotent transfer with a fresh key, under every threshold
//!   (`transfer`);
//! - `replay`: the same transfer sent again with a key that already has a stored outcome.
//!
//! Budgets are the targets per call in a release build; the benches print them beside what they
//! measure.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use toolguard::{
    Dispatcher, MemoryAuditSink, Principal, ToolCall, ToolContext, ToolError, ToolOutcome, tool,
};

/// Shared state of the bench tools: a balance moved by transfers.
#[derive(Default)]
pub struct Ledger {
    /// Sum of every amount moved.
    pub moved: AtomicU64,
}

/// Reads an account's balance.
#[tool(risk = "low", read_only)]
pub async fn get_balance(
    ctx: &ToolContext<Ledger>,
    /// The account to read.
    #[arg(kind = "identifier", max_len = 64)]
    account: String,
) -> Result<u64, ToolError> {
    let _ = account;
    Ok(ctx.state().moved.load(Ordering::Relaxed))
}

/// Moves money from one account to another; high risk, idempotent.
#[tool(risk = "high", idempotent)]
pub async fn transfer(
    ctx: &ToolContext<Ledger>,
    /// Account to debit.
    #[arg(kind = "identifier", max_len = 64)]
    from_account: String,
    /// Account to credit.
    #[arg(kind = "identifier", max_len = 64)]
    to_account: String,
    /// Amount in cents.
    #[arg(amount, min = 1, max = 100_000_000)]
    amount: u64,
) -> Result<u64, ToolError> {
    let _ = (from_account, to_account);
    Ok(ctx.state().moved.fetch_add(amount, Ordering::Relaxed) + amount)
}

/// Arguments of the low-risk read.
pub const LOW_ARGS: &str = r#"{"account":"acct_1029384756"}"#;

/// Arguments of the replayed transfer (its key has a stored outcome after [`Fixture::new`]).
pub const REPLAY_ARGS: &str = r#"{"from_account":"acct_1029384756","to_account":"acct-5647382910","amount":250000,"idempotency_key":"bench-replay-key-0001"}"#;

/// Arguments of a transfer with the fresh key number `n`.
pub fn high_args(n: u64) -> String {
    format!(
        r#"{{"from_account":"acct_1029384756","to_account":"acct-5647382910","amount":250000,"idempotency_key":"bench-key-{n:012}"}}"#
    )
}

/// Per-call budgets: (call, instructions under callgrind, allocations).
pub const BUDGETS: [(&str, u64, u64); 3] = [
    ("low", 30_000, 15),
    ("high", 60_000, 40),
    ("replay", 40_000, 40),
];

/// A dispatcher with both tools, memory stores and a memory audit sink, warmed by one call of
/// each kind (lazily built tables, the replayed key's stored outcome).
pub struct Fixture {
    /// The dispatcher under test.
    pub dispatcher: Dispatcher<Ledger>,
    /// The caller.
    pub principal: Principal,
    /// The dispatcher's audit trail.
    pub trail: Arc<MemoryAuditSink>,
    /// A context for calling the handler directly.
    pub context: ToolContext<Ledger>,
    next_key: AtomicU64,
}

impl Fixture {
    /// Builds and warms the fixture on `rt`.
    pub fn new(rt: &tokio::runtime::Runtime) -> Self {
        let state = Arc::new(Ledger::default());
        let trail = Arc::new(MemoryAuditSink::new());
        let dispatcher = Dispatcher::builder_arc(state.clone())
            .tool(GetBalance)
            .tool(Transfer)
            .audit(trail.clone())
            .build()
            .expect("the bench dispatcher builds");
        let principal = Principal::new("acme", "alice", "bench-session");
        let context = ToolContext::new(Arc::new(principal.clone()), state, "call", None);
        let fixture = Fixture {
            dispatcher,
            principal,
            trail,
            context,
            next_key: AtomicU64::new(0),
        };
        rt.block_on(async {
            for outcome in [
                fixture.low().await,
                fixture.high().await,
                fixture.replay().await,
            ] {
                assert_eq!(outcome.status, toolguard::Status::Ok, "{outcome:?}");
            }
            assert!(fixture.replay().await.replayed);
            // A fifth entry: the trail's vector then has room for three more, so the call a
            // count measures does not land on one of its doublings (a copy that appends pay
            // once in a while, not per call).
            assert_eq!(fixture.low().await.status, toolguard::Status::Ok);
        });
        fixture
    }

    /// The low-risk read.
    pub async fn low(&self) -> ToolOutcome {
        self.low_as(&self.principal).await
    }

    /// The low-risk read by `principal`.
    pub async fn low_as(&self, principal: &Principal) -> ToolOutcome {
        let call = ToolCall::new("call-low", "get_balance", LOW_ARGS);
        self.dispatcher.dispatch(call, principal).await
    }

    /// The call of a transfer with a fresh key (the arguments are built before the call).
    pub fn high_call(&self) -> ToolCall {
        let n = self.next_key.fetch_add(1, Ordering::Relaxed);
        ToolCall::new("call-high", "transfer", high_args(n))
    }

    /// A transfer with a fresh key.
    pub async fn high(&self) -> ToolOutcome {
        let call = self.high_call();
        self.dispatcher.dispatch(call, &self.principal).await
    }

    /// The replayed transfer.
    pub async fn replay(&self) -> ToolOutcome {
        let call = ToolCall::new("call-replay", "transfer", REPLAY_ARGS);
        self.dispatcher.dispatch(call, &self.principal).await
    }

    /// The handler alone, called as plain Rust.
    pub async fn direct(&self) -> u64 {
        get_balance(&self.context, "acct_1029384756".to_owned())
            .await
            .unwrap_or_default()
    }
}

/// A current-thread runtime, as the instruction and allocation counts use.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
