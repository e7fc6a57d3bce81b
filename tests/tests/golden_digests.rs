//! Pins request digests and audit chain hashes to fixed values, so that any change to how they
//! are encoded (canonical JSON of the request document, of the sealed `[seq, record]` pair, hex
//! formatting, key-id prefix) is caught: stored idempotency records, approvals and audit trails
//! written by an earlier build must keep matching.
//!
//! Every pinned value was computed independently of this crate, with Python's `json`
//! (`sort_keys=True, ensure_ascii=False, separators=(',', ':')` after NFC), `hashlib` and
//! `hmac`: HMAC-SHA256 over `domain || 0x00 || message`, written `k1:<hex>`.

use std::sync::Arc;

use serde_json::{Value, json};
use toolguard::audit::Stage;
use toolguard::audit::{AuditEvent, AuditRecord, GENESIS_HASH, seal, verify_chain};
use toolguard::digest::{canonical_json, keyed_request_digest, request_digest};
use toolguard::sanitize::Modification;
use toolguard::{HostKeys, Status};

fn keys() -> Arc<HostKeys> {
    Arc::new(HostKeys::new("k1", *b"0123456789abcdef0123456789abcdef").unwrap())
}

/// Arguments that exercise every part of the canonical encoding: key order, nested objects and
/// arrays, strings needing escapes, non-NFC strings and keys, negative, large and fractional
/// numbers, booleans and nulls.
fn arguments() -> Value {
    json!({
        "to_account": "acct-5647382910",
        "from_account": "acct_1029384756",
        "amount": 250000,
        "memo": "Zoe\u{0308} said \"hi\"\n\t<tab> \u{0001} \u{2028} done",
        "Cafe\u{0301}": {"z": [1, -2, 3.5, 18446744073709551615u64, -9223372036854775808i64], "a": null},
        "flags": [true, false, null, {"b": "x", "a": "y"}],
        "emoji": "🏦 €",
        "empty": {},
        "list": [],
    })
}

#[test]
fn canonical_encoding_is_pinned() {
    assert_eq!(
        canonical_json(&arguments()),
        "{\"Caf\u{e9}\":{\"a\":null,\"z\":[1,-2,3.5,18446744073709551615,-9223372036854775808]},\
         \"amount\":250000,\"emoji\":\"🏦 €\",\"empty\":{},\
         \"flags\":[true,false,null,{\"a\":\"y\",\"b\":\"x\"}],\"from_account\":\"acct_1029384756\",\
         \"list\":[],\"memo\":\"Zo\u{eb} said \\\"hi\\\"\\n\\t<tab> \\u0001 \u{2028} done\",\
         \"to_account\":\"acct-5647382910\"}"
    );
}

#[test]
fn request_digests_are_pinned() {
    let args = arguments();
    assert_eq!(
        request_digest("transfer", 3, &args, "acme", "alice"),
        "9ee22613202eb2a5bfe7d30e69ba7f52089821ecd93086cdbbefcc669b12e169"
    );
    assert_eq!(
        keyed_request_digest(&keys(), "transfer", 3, &args, "acme", "alice"),
        "k1:1d7c00fb24128090f2fc0b2a09628c8fc00085e21d67de5c90a3e4e178f37d33"
    );
    let small = json!({"amount": 5, "pin": "1234"});
    assert_eq!(
        keyed_request_digest(&keys(), "unlock", 3, &small, "acme", "alice"),
        "k1:c514e66532c89576f9989244b610a1f61b815192762dda86bf189d5eddc57431"
    );
}

/// A record with every field set.
fn full_record() -> AuditRecord {
    AuditRecord {
        event: AuditEvent::Decision,
        time_ms: 1_764_000_000_123,
        tenant: "acme".into(),
        subject: "alice".into(),
        session: "sess-1".into(),
        tool: "transfer".into(),
        call_id: "call_\u{0041}\u{030A}\"1".into(),
        operation_id: Some("op_0123456789abcdef".into()),
        idempotency_key: Some("bench-key-000000000001".into()),
        stage: Stage::Envelope,
        status: Some(Status::Ok),
        reason: Some("approved".into()),
        request_digest: Some("k1:00ff".into()),
        arguments: Some(std::sync::Arc::new(arguments())),
        modifications: vec![
            Modification {
                field: "/memo".into(),
                what: "zero_width".into(),
                count: 2,
                positions: vec![3, 17],
            },
            Modification {
                field: "/to".into(),
                what: "bidi".into(),
                count: 0,
                positions: vec![],
            },
        ],
        approval_id: Some("apr_1".into()),
        approver: Some("bob".into()),
        replayed: true,
        duration_us: 18_446_744_073_709_551_615,
        sources: Vec::new(),
        origins: Vec::new(),
    }
}

/// A record with every optional field empty, as a call refused at parse time writes.
fn bare_record() -> AuditRecord {
    AuditRecord {
        tenant: "acme".into(),
        subject: "alice".into(),
        session: "sess-1".into(),
        tool: "no_such_tool".into(),
        call_id: "c".into(),
        status: Some(Status::UnknownTool),
        ..AuditRecord::default()
    }
}

#[test]
fn audit_hashes_are_pinned() {
    let keys = keys();
    let first = seal(&keys, 1, bare_record(), GENESIS_HASH);
    assert_eq!(
        first.hash,
        "k1:971906231f250c23c5a46011e02d072a4abf3c5e667cd1c5930571a6d76f9344"
    );
    let second = seal(&keys, 2, full_record(), &first.hash);
    assert_eq!(
        second.hash,
        "k1:893769a899e996509c67bbde0ca678b707c822e6d7e72f516c835cf21f3e6fe8"
    );
    let third = seal(&keys, 3, AuditRecord::default(), &second.hash);
    assert_eq!(
        third.hash,
        "k1:6162d48adf058741fd0deb0535b6b2e58b94196770d589e88199113d95c606d1"
    );
    verify_chain(&keys, &[first, second, third]).unwrap();
}
