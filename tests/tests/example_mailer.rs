//! Every claim the mailer example prints holds.

#[path = "../../examples/common/claims.rs"]
mod claims;
#[path = "../../examples/mailer/mailroom.rs"]
mod mailroom;

#[tokio::test]
async fn every_mail_room_claim_holds() {
    let claims = mailroom::run().await;
    let labels: Vec<&str> = claims.all().iter().map(|c| c.what.as_str()).collect();
    assert_eq!(
        labels, CLAIMS,
        "the example makes exactly these claims, in this order"
    );
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}

/// Every claim the example prints, in order.
const CLAIMS: &[&str] = &[
    "internal mail needs no approval: ok",
    "the retry replays the receipt and sends nothing",
    "the audit entry of the retry records replayed: true",
    "an external recipient answers pending_approval",
    "the cause is the company's policy hook",
    "the preview holds recipient, subject, body and attachments exactly",
    "nothing is sent while it waits",
    "the sender cannot approve her own mail: forbidden (self_approval)",
    "lee's approval is the first of two: still pending_approval, nothing sent",
    "the second approval sends it: ok",
    "what was sent is exactly what the preview showed",
    "the model's retry replays the sent receipt; still one copy",
    "each refusal names its check: domain list x2, address syntax x2, control char, script",
    "all six are refused (blocked or invalid_arguments), none pending",
    "a domain off the list is blocked with email_domain_not_allowed",
    "no mail left",
    "a sensitive document to an external recipient is refused: precondition_failed",
    "it is refused outright, no approval is even asked",
    "internally, a sensitive document needs approval: pending_approval",
    "another company's document looks like no document at all: not_found",
    "the reviewer rejects the payroll mail; nothing was sent",
    "version 1 is approved by lee and not yet sent: pending_approval",
    "a changed body under the same key is an idempotency_conflict",
    "under a new key it needs a new approval of its own",
    "the new preview shows the new body",
    "lee's approval of version 1 does not carry over: the new request has no decisions",
    "the completed approval sends version 1 exactly as approved, never version 2",
    "the old approval cannot be used again (precondition_failed, already_decided)",
    "a body swapped in the store fails the digest: approval_rejected (binding_mismatch)",
    "only version 1 was ever sent",
    "the override phrase is blocked in every form: prompt_injection",
    "neither the audit entry nor the model's answer repeats the body",
    "nothing was sent",
    "three messages left in all: the lunch note, the offer, meeting version 1",
    "each of the 30 calls and decisions wrote exactly one audit entry, and the chain verifies",
];
