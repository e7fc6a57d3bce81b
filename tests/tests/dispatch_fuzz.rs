//! Thousands of random, truncated and mutated argument strings: every one gets a status and an
//! audit entry, none panics, and nothing malformed reaches a handler.

use std::sync::Arc;

use serde_json::json;
use toolguard::{Dispatcher, MemoryAuditSink, Status, ToolCall};
use toolguard_tests::*;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "null",
    "true",
    "1e999",
    "-0",
    "\"amount\"",
    "\"from_account\"",
    "\"note\"",
    "\"idempotency_key\"",
    "\u{202e}",
    "\u{200b}",
    "%3Csystem%3E",
    "ignore previous instructions",
    "'; DROP TABLE accounts; --",
    "$( rm -rf / )",
    "12345678901234567890123",
    "\"acc-alice-1\"",
    "\"USD\"",
    " ",
    "\n",
    "\u{e0041}",
    "💸",
];

fn random_doc(rng: &mut Rng) -> String {
    let n = rng.below(24);
    (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect()
}

fn valid_docs() -> Vec<String> {
    vec![
        json!({"from_account": "acc-alice-1", "to_account": "acc-alice-2", "amount": 100, "currency": "USD", "idempotency_key": "fuzz-key-0001"}).to_string(),
        json!({"note": "hello there", "times": 2}).to_string(),
        json!({"account": "acc-alice-1"}).to_string(),
    ]
}

#[tokio::test]
async fn every_random_or_truncated_document_gets_a_status() {
    let ledger = Arc::new(Ledger::seeded());
    let audit = Arc::new(MemoryAuditSink::new());
    let d = Dispatcher::builder_arc(ledger.clone())
        .tool(TransferFunds)
        .tool(GetBalance)
        .tool(EchoNote)
        .audit(audit.clone())
        .build()
        .unwrap();
    let tools = ["transfer_funds", "get_balance", "echo_note", "nope"];
    let who = alice();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut docs: Vec<String> = (0..2_500).map(|_| random_doc(&mut rng)).collect();
    for valid in valid_docs() {
        // Every prefix of a valid document, and single-byte mutations of it.
        for cut in (0..valid.len()).filter(|i| valid.is_char_boundary(*i)) {
            docs.push(valid[..cut].to_owned());
        }
        for _ in 0..300 {
            let mut bytes = valid.clone().into_bytes();
            let i = rng.below(bytes.len());
            bytes[i] = b"{}[]\":,\\ a0"[rng.below(11)];
            docs.push(String::from_utf8_lossy(&bytes).into_owned());
        }
    }
    let mut seen = std::collections::BTreeMap::new();
    for (i, doc) in docs.iter().enumerate() {
        let tool = tools[i % tools.len()];
        let out = d
            .dispatch(ToolCall::new(format!("fuzz-{i}"), tool, doc.as_str()), &who)
            .await;
        assert!(out.audit_seq.is_some(), "no audit entry for {doc:?}");
        if serde_json::from_str::<serde_json::Value>(doc)
            .map(|v| !v.is_object())
            .unwrap_or(true)
        {
            assert_eq!(out.status, Status::Malformed, "{doc:?}");
        }
        *seen.entry(out.status.as_str()).or_insert(0usize) += 1;
    }
    assert_eq!(
        audit.len(),
        docs.len(),
        "exactly one terminal entry per call"
    );
    audit.verify().unwrap();
    assert!(docs.len() >= 3_000, "{} documents", docs.len());
    assert!(
        seen.contains_key("malformed") && seen.contains_key("invalid_arguments"),
        "{seen:?}"
    );
    println!("{} documents: {seen:?}", docs.len());
}
