//! Every claim the bank example prints holds.

#[path = "../../examples/common/claims.rs"]
mod claims;
#[path = "../../examples/bank/lab.rs"]
mod lab;
#[path = "../../examples/bank/ledger.rs"]
mod ledger;

#[tokio::test]
async fn every_bank_lab_claim_holds() {
    let claims = lab::run().await;
    let labels: Vec<&str> = claims.all().iter().map(|c| c.what.as_str()).collect();
    assert_eq!(
        labels, CLAIMS,
        "the example makes exactly these claims, in this order"
    );
    assert!(claims.failed().is_empty(), "failed: {:?}", claims.failed());
}

/// Every claim the example prints, in order.
const CLAIMS: &[&str] = &[
    "the first call executes: ok",
    "the retry answers ok from the stored outcome (replayed), with the same receipt",
    "the handler ran exactly once",
    "the balances changed once: checking -25,000, savings +25,000",
    "the audit entry of the retry records replayed: true, the first one replayed: false",
    "the same key with a different amount is an idempotency_conflict",
    "and nothing moved: still one execution, same balance",
    "a 50,000-cent transfer executes at once: ok",
    "a 2,500,000-cent transfer answers pending_approval",
    "the preview shows the exact amount and accounts that will execute",
    "the balance is unchanged while it waits",
    "the model's retry gets the same pending request, not a second one",
    "the requester cannot approve it, even holding the role: forbidden (self_approval)",
    "a user without the teller role cannot: forbidden (not_eligible)",
    "still nothing moved",
    "the teller's approval executes it: ok",
    "the balance then changes by exactly 2,500,000",
    "the model's next retry replays ok without executing again",
    "an approval at the 15-minute mark fails: approval_expired (the boundary fails closed)",
    "the expired transfer never ran, and its retry answers approval_expired",
    "from_account: the SQL payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "from_account: the shell payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "from_account: the prompt injection payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "to_account: the SQL payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "to_account: the shell payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "to_account: the prompt injection payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "idempotency_key: the SQL payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "idempotency_key: the shell payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "idempotency_key: the prompt injection payload is refused before the handler (invalid_arguments: the field's identifier pattern) in all 8 forms",
    "memo: the shell payload is blocked in all 8 forms",
    "memo: the prompt injection payload is blocked in all 8 forms",
    "behind the schema, Sanitizer::sanitize_str blocks every one of those account values too",
    "none of the 88 calls reached the handler; no money moved",
    "each of the 88 audit entries records a reason code and never the payload, in any form",
    "invisible characters in an honest memo are stripped and the transfer runs: ok",
    "the audit records what was removed from /memo (zero_width, format_char) and where",
    "SQL text in a memo is kept verbatim as data (documented: free text is not SQL-filtered)",
    "all 12 answer invalid_arguments",
    "each names what is wrong (a JSON pointer and message per error)",
    "the handler count did not move",
    "each audit entry stops at the validate stage and stores no arguments",
    "every call and decision has its own terminal entry, and there are no others",
    "each entry names call, tool, tenant, subject, session, time, status, and has a hash",
    "entries of calls that passed the sanitizer carry digest, operation id and key",
    "every refusal records its reason code",
    "verify() passes on the chain",
    "rewriting the amount in entry #9 is detected at that entry",
    "deleting entry #9 is detected at the next one",
    "with the original entry restored, the chain verifies again",
    "the e-mail carries instructions no human sees (tag characters, zero-width)",
    "every scripted response parses with openai::parse_chat_completion",
    "the balance question is answered: ok",
    "a memo carrying the smuggled instruction in tag characters is blocked (tag_character)",
    "a memo with a zero-width-split override phrase is blocked (prompt_injection)",
    "the six 800,000-cent transfers were proposed within 90 s (75 s)",
    "none of them crosses the per-call threshold of 1,000,000 cents: each amount is 800,000 <= the tool's approval_over, and each approval request's cause is session_limit",
    "transfer 1 executes: it fits the session's $10,000.00 (gate=envelope)",
    "transfers 2-6 cross the session limit and become pending approvals (gate=approval)",
    "the teller's queue holds five requests, each caused by session_limit",
    "each preview names the external account and the amount",
    "the model's retry of transfer 2 is the same pending request; the queue does not grow",
    "each answer is a role: tool message for its tool_call_id",
    "the blocked answers give the reason code and echo nothing of the memo",
    "the pending answers carry the approval id and say nothing ran",
    "the teller rejects all five: approval_rejected",
    "no more than the session limit (SESSION_LIMIT, 1,000,000 cents) moved without a human: 800,000 (the bank's book agrees)",
    "the audit chain still verifies after the incident",
    "after the incident, still one terminal entry per call and decision (130 entries), and no others",
    "six parallel calls dispatched at once: one runs, five wait or are refused; 800,000 moved",
    "without the session limit (per-call threshold only) all six execute: 4,800,000 cents",
    "the paraphrased instruction passes the sanitizer: clean (no pattern matches it)",
    "reading it through read_email (output = \"untrusted\") records one source naming the call",
    "with no session limit, all six 800,000-cent transfers answer pending_approval (reason provenance)",
    "each hold and each approval preview name the e-mail's call and sender",
    "no money moved: the transfer handler never ran",
    "the audit query from the e-mail's source returns the six calls",
    "in a session that read nothing untrusted the same six execute: 4,800,000 cents",
];
