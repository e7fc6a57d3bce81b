//! Every claim the refund example prints holds.

#[path = "../../examples/common/claims.rs"]
mod claims;
#[path = "../../examples/refund/desk.rs"]
mod desk;

#[tokio::test]
async fn every_refund_desk_claim_holds() {
    let claims = desk::run().await;
    let labels: Vec<&str> = claims.all().iter().map(|c| c.what.as_str()).collect();
    assert_eq!(
        labels, CLAIMS,
        "the example makes exactly these claims, in this order"
    );
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}

/// Every claim the example prints, in order.
const CLAIMS: &[&str] = &[
    "ORDER-8 (bob's, same shop) answers not_found",
    "ORDER-9 (another shop's) answers not_found",
    "outside, both are indistinguishable from a missing order",
    "the audit records ORDER-8 as foreign_subject",
    "the audit records ORDER-9 as foreign_tenant",
    "ORDER-6 answers precondition_failed",
    "ORDER-7 answers pending_approval",
    "the preview names the order, the amount and the reason",
    "nothing is refunded while pending",
    "approving it rechecks the order and refuses: precondition_failed",
    "no money moved",
    "a changed reason under the same key is an idempotency_conflict",
    "a changed reason under a new key is a new intent with its own approval",
    "a request altered in the store fails its digest check: approval_rejected",
    "bob's ORDER-8 was not refunded",
    "the customer cannot approve their own refund: forbidden (self_approval)",
    "the supervisor's approval executes it: ok",
    "the model's retry replays the outcome",
    "exactly one refund of 2,500 cents was paid",
    "6,000 cents of ORDER-11 wait for approval; the preview shows amount: 6000",
    "more than the order was paid is refused by the preflight: precondition_failed, no approval asked",
    "a changed amount under the same key is an idempotency_conflict",
    "a changed amount under a new key is a new intent: its own approval, preview amount: 5000",
    "the first approval pays exactly the 6,000 cents it showed, never the changed 5,000",
    "the second request is judged on its own: the order is refunded now, precondition_failed",
    "two refunds in all: 2,500 cents of ORDER-5 and 6,000 of ORDER-11",
    "the audit chain verifies",
];
