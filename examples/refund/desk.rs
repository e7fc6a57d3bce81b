//! The refund desk: orders in two tenants, one `refund_order` tool, and the checks that keep a
//! model from refunding what is not the caller's, what was refunded already, or what changed while
//! a human was looking.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use toolguard::store::{ApprovalStore, MemoryStore};
use toolguard::{
    Cents, Dispatcher, MemoryAuditSink, Owned, Principal, Status, ToolCall, ToolContext, ToolError,
    ToolOutcome, tool,
};

use crate::claims::{Claims, approval_id, show};

/// Where an order stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderState {
    /// Paid; refundable.
    Paid,
    /// Refunded already.
    Refunded,
    /// A chargeback is open; no refund through the desk.
    Disputed,
}

/// An order.
#[derive(Debug, Clone)]
pub struct Order {
    /// Tenant (shop).
    pub tenant: String,
    /// Customer.
    pub customer: String,
    /// Amount in cents.
    pub cents: u64,
    /// State.
    pub state: OrderState,
}

impl Owned for Order {
    fn owner_tenant(&self) -> &str {
        &self.tenant
    }
    fn owner_subject(&self) -> Option<&str> {
        Some(&self.customer)
    }
}

/// The shop's order book.
#[derive(Debug, Default)]
pub struct Shop {
    /// Orders by reference.
    pub orders: Mutex<HashMap<String, Order>>,
    /// Refunds paid out: (order, cents).
    pub refunds: Mutex<Vec<(String, u64)>>,
}

impl Shop {
    fn state_of(&self, order: &str) -> OrderState {
        self.orders.lock().unwrap()[order].state
    }
}

/// What a refund returns.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Refund {
    /// The refunded order.
    pub order_ref: String,
    /// Cents paid back.
    pub cents: u64,
}

/// The order must be the caller's and still paid. Runs before approval and again right before
/// execution, so a change while a human looks is caught.
async fn refundable(ctx: &ToolContext<Shop>, args: &RefundOrderArgs) -> Result<(), ToolError> {
    let orders = ctx.state().orders.lock().unwrap();
    let order = ctx.resource(orders.get(&args.order_ref))?;
    match order.state {
        OrderState::Paid => Ok(()),
        OrderState::Refunded => Err(ToolError::precondition("the order was refunded already")),
        OrderState::Disputed => Err(ToolError::precondition("the order is under dispute")),
    }
}

/// The amount must not exceed what the order was paid. Runs before approval and again right
/// before execution.
async fn within_order(ctx: &ToolContext<Shop>, args: &RefundOrderArgs) -> Result<(), ToolError> {
    let orders = ctx.state().orders.lock().unwrap();
    match orders.get(&args.order_ref) {
        Some(order) if args.amount.get() > order.cents => Err(ToolError::precondition(
            "the amount exceeds what the order was paid",
        )),
        _ => Ok(()),
    }
}

/// Refunds one of the caller's orders, up to what it was paid. A human approves every refund,
/// seeing the exact amount.
#[tool(
    risk = "critical",
    idempotent,
    authorize = refundable,
    preflight = within_order
)]
pub async fn refund_order(
    ctx: &ToolContext<Shop>,
    /// Order reference, like `ORDER-7`.
    #[arg(kind = "identifier", max_len = 32)]
    order_ref: String,
    /// Amount to pay back in cents (integer minor units), at most the order's total.
    #[arg(amount, min = 1, max = 10_000_000)]
    amount: Cents,
    /// Why the customer wants the money back.
    #[arg(min_len = 3, max_len = 200)]
    reason: String,
) -> Result<Refund, ToolError> {
    let _ = reason;
    let shop = ctx.state();
    let mut orders = shop.orders.lock().unwrap();
    let order = orders
        .get_mut(&order_ref)
        .ok_or_else(ToolError::not_found)?;
    if amount.get() > order.cents {
        return Err(ToolError::precondition(
            "the amount exceeds what the order was paid",
        ));
    }
    order.state = OrderState::Refunded;
    let cents = amount.get();
    shop.refunds
        .lock()
        .unwrap()
        .push((order_ref.clone(), cents));
    Ok(Refund { order_ref, cents })
}

fn seeded_shop() -> Shop {
    let shop = Shop::default();
    for (id, tenant, customer, cents, state) in [
        ("ORDER-5", "acme", "alice", 2_500, OrderState::Paid),
        ("ORDER-6", "acme", "alice", 1_000, OrderState::Refunded),
        ("ORDER-7", "acme", "alice", 4_200, OrderState::Paid),
        ("ORDER-8", "acme", "bob", 9_900, OrderState::Paid),
        ("ORDER-9", "globex", "carol", 7_700, OrderState::Paid),
        ("ORDER-10", "acme", "alice", 3_000, OrderState::Paid),
        ("ORDER-11", "acme", "alice", 6_000, OrderState::Paid),
    ] {
        shop.orders.lock().unwrap().insert(
            id.into(),
            Order {
                tenant: tenant.into(),
                customer: customer.into(),
                cents,
                state,
            },
        );
    }
    shop
}

/// Runs the desk and checks every claim.
pub async fn run() -> Claims {
    let shop = Arc::new(seeded_shop());
    let audit = Arc::new(MemoryAuditSink::new());
    let store = Arc::new(MemoryStore::new());
    let desk = Dispatcher::builder_arc(shop.clone())
        .tool(RefundOrder)
        .audit(audit.clone())
        .store(store.clone())
        .build()
        .expect("the desk's registry is valid");
    let alice = Principal::new("acme", "alice", "chat-1");
    let supervisor = Principal::new("acme", "sam", "console").with_role("approver");
    // What the model proposes: the order, the amount in cents, the reason, and its key.
    let refund = |order: &str, cents: u64, reason: &str, key: &str| {
        ToolCall::new(
            format!("call-{key}"),
            "refund_order",
            json!({"order_ref": order, "amount": cents, "reason": reason, "idempotency_key": key}),
        )
    };
    let mut c = Claims::default();

    c.step("1. Another customer's order and another shop's order look like no order at all");
    let bobs = desk
        .dispatch(
            refund("ORDER-8", 9_900, "never arrived", "rk-order-8"),
            &alice,
        )
        .await;
    let foreign = desk
        .dispatch(
            refund("ORDER-9", 7_700, "never arrived", "rk-order-9"),
            &alice,
        )
        .await;
    let missing = desk
        .dispatch(
            refund("ORDER-404", 1_000, "never arrived", "rk-order-404"),
            &alice,
        )
        .await;
    c.check(
        "ORDER-8 (bob's, same shop) answers not_found",
        bobs.status == Status::NotFound,
    );
    c.check(
        "ORDER-9 (another shop's) answers not_found",
        foreign.status == Status::NotFound,
    );
    c.check(
        "outside, both are indistinguishable from a missing order",
        [&bobs, &foreign]
            .iter()
            .all(|o| o.message == missing.message && o.reason == missing.reason),
    );
    let class = |seq: Option<u64>| audit.get(seq.unwrap_or(0)).and_then(|e| e.record.reason);
    c.check(
        "the audit records ORDER-8 as foreign_subject",
        class(bobs.audit_seq).as_deref() == Some("foreign_subject"),
    );
    c.check(
        "the audit records ORDER-9 as foreign_tenant",
        class(foreign.audit_seq).as_deref() == Some("foreign_tenant"),
    );

    c.step("2. An order refunded already");
    let twice = desk
        .dispatch(
            refund("ORDER-6", 1_000, "refund again", "rk-order-6"),
            &alice,
        )
        .await;
    c.check(
        "ORDER-6 answers precondition_failed",
        twice.status == Status::PreconditionFailed,
    );

    c.step("3. A refund waits for a human, who sees exactly what will run");
    let pending = desk
        .dispatch(
            refund("ORDER-7", 4_200, "arrived broken", "rk-order-7"),
            &alice,
        )
        .await;
    c.check(
        "ORDER-7 answers pending_approval",
        pending.status == Status::PendingApproval,
    );
    let ticket = pending.approval.clone();
    let preview = ticket
        .as_ref()
        .map(|t| t.preview.clone())
        .unwrap_or_default();
    println!(
        "     preview: {}",
        preview.replace('\n', "\n              ")
    );
    c.check(
        "the preview names the order, the amount and the reason",
        preview.contains("\"ORDER-7\"")
            && preview.contains("amount: 4200")
            && preview.contains("\"arrived broken\""),
    );
    c.check(
        "nothing is refunded while pending",
        shop.refunds.lock().unwrap().is_empty(),
    );

    c.step("4. The order changes while the refund waits (TOCTOU)");
    shop.orders
        .lock()
        .unwrap()
        .get_mut("ORDER-7")
        .unwrap()
        .state = OrderState::Disputed;
    let id7 = ticket.map(|t| t.approval_id).unwrap_or_default();
    let late = desk.approvals().approve(&supervisor, &id7).await;
    c.check(
        "approving it rechecks the order and refuses: precondition_failed",
        late.status == Status::PreconditionFailed,
    );
    c.check(
        "no money moved",
        shop.refunds.lock().unwrap().is_empty() && shop.state_of("ORDER-7") == OrderState::Disputed,
    );

    c.step("5. The approval is bound to the exact action");
    let first = desk
        .dispatch(refund("ORDER-5", 2_500, "wrong size", "rk-order-5"), &alice)
        .await;
    let id5 = first
        .approval
        .as_ref()
        .map(|t| t.approval_id.clone())
        .unwrap_or_default();
    let changed_same_key = desk
        .dispatch(
            refund("ORDER-5", 2_500, "changed my mind, send cash", "rk-order-5"),
            &alice,
        )
        .await;
    c.check(
        "a changed reason under the same key is an idempotency_conflict",
        changed_same_key.status == Status::IdempotencyConflict,
    );
    let changed_new_key = desk
        .dispatch(
            refund(
                "ORDER-5",
                2_500,
                "changed my mind, send cash",
                "rk-order-5b",
            ),
            &alice,
        )
        .await;
    c.check(
        "a changed reason under a new key is a new intent with its own approval",
        changed_new_key.status == Status::PendingApproval
            && changed_new_key.approval.as_ref().map(|t| &t.approval_id) != Some(&id5),
    );
    // Someone with write access to the approval store swaps the order under the approved request.
    let id10 = {
        let out = desk
            .dispatch(
                refund("ORDER-10", 3_000, "late delivery", "rk-order-10"),
                &alice,
            )
            .await;
        out.approval.map(|t| t.approval_id).unwrap_or_default()
    };
    if let Ok(Some(mut stored)) = ApprovalStore::get(&*store, &id10).await {
        stored.arguments["order_ref"] = json!("ORDER-8");
        let v = stored.version;
        let _ = store.update(&stored, v).await;
    }
    let tampered = desk.approvals().approve(&supervisor, &id10).await;
    c.check(
        "a request altered in the store fails its digest check: approval_rejected",
        tampered.status == Status::ApprovalRejected
            && tampered.reason.as_deref() == Some("binding_mismatch"),
    );
    c.check(
        "bob's ORDER-8 was not refunded",
        shop.state_of("ORDER-8") == OrderState::Paid,
    );

    c.step("6. An approved refund runs once");
    let self_approval = desk
        .approvals()
        .approve(&alice.clone().with_role("approver"), &id5)
        .await;
    c.check(
        "the customer cannot approve their own refund: forbidden (self_approval)",
        self_approval.status == Status::Forbidden
            && self_approval.reason.as_deref() == Some("self_approval"),
    );
    let approved = desk.approvals().approve(&supervisor, &id5).await;
    c.check(
        "the supervisor's approval executes it: ok",
        approved.status == Status::Ok,
    );
    let retry = desk
        .dispatch(refund("ORDER-5", 2_500, "wrong size", "rk-order-5"), &alice)
        .await;
    c.check(
        "the model's retry replays the outcome",
        retry.status == Status::Ok && retry.replayed,
    );
    let refunds = shop.refunds.lock().unwrap().clone();
    c.check(
        "exactly one refund of 2,500 cents was paid",
        refunds == vec![("ORDER-5".to_owned(), 2_500)],
    );

    c.step("7. The amount changes while the refund waits: a new intent, never the old approval");
    let asked = desk
        .dispatch(
            refund("ORDER-11", 6_000, "never arrived", "rk-order-11"),
            &alice,
        )
        .await;
    show("refund 6,000 cents of ORDER-11", &asked);
    let id11 = approval_id(&asked);
    let shown = |o: &ToolOutcome| {
        o.approval
            .as_ref()
            .map(|t| t.preview.clone())
            .unwrap_or_default()
    };
    c.check(
        "6,000 cents of ORDER-11 wait for approval; the preview shows amount: 6000",
        asked.status == Status::PendingApproval && shown(&asked).contains("amount: 6000"),
    );
    let too_much = desk
        .dispatch(
            refund("ORDER-11", 9_000, "never arrived", "rk-order-11x"),
            &alice,
        )
        .await;
    show("refund 9,000 cents of the 6,000-cent order", &too_much);
    c.check(
        "more than the order was paid is refused by the preflight: precondition_failed, no \
         approval asked",
        too_much.status == Status::PreconditionFailed && too_much.approval.is_none(),
    );
    let same_key = desk
        .dispatch(
            refund("ORDER-11", 5_000, "never arrived", "rk-order-11"),
            &alice,
        )
        .await;
    show("5,000 cents under the same key", &same_key);
    c.check(
        "a changed amount under the same key is an idempotency_conflict",
        same_key.status == Status::IdempotencyConflict,
    );
    let new_key = desk
        .dispatch(
            refund("ORDER-11", 5_000, "never arrived", "rk-order-11b"),
            &alice,
        )
        .await;
    show("5,000 cents under a new key", &new_key);
    let id11b = approval_id(&new_key);
    c.check(
        "a changed amount under a new key is a new intent: its own approval, preview amount: 5000",
        new_key.status == Status::PendingApproval
            && !id11b.is_empty()
            && id11b != id11
            && shown(&new_key).contains("amount: 5000"),
    );
    let old = desk.approvals().approve(&supervisor, &id11).await;
    show("the supervisor approves the first request", &old);
    c.check(
        "the first approval pays exactly the 6,000 cents it showed, never the changed 5,000",
        old.status == Status::Ok
            && old.data().and_then(|d| d["cents"].as_u64()) == Some(6_000)
            && shop.refunds.lock().unwrap().last() == Some(&("ORDER-11".to_owned(), 6_000)),
    );
    let new = desk.approvals().approve(&supervisor, &id11b).await;
    show("the supervisor approves the second request", &new);
    c.check(
        "the second request is judged on its own: the order is refunded now, precondition_failed",
        new.status == Status::PreconditionFailed,
    );
    let refunds = shop.refunds.lock().unwrap().clone();
    c.check(
        "two refunds in all: 2,500 cents of ORDER-5 and 6,000 of ORDER-11",
        refunds
            == vec![
                ("ORDER-5".to_owned(), 2_500),
                ("ORDER-11".to_owned(), 6_000),
            ],
    );
    c.check("the audit chain verifies", audit.verify().is_ok());
    c
}
