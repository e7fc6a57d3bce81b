//! What the keys cost: the keyed request digest against the plain one, sealing and verifying an
//! approval record, and appending to a keyed in-memory audit chain.
//!
//! `cargo bench -p toolguard-benches --bench keys -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolguard::audit::{AuditRecord, AuditSink, ChainVerifier, MemoryAuditSink};
use toolguard::digest::{keyed_request_digest, request_digest};
use toolguard::seal::{seal_approval, verify_approval_seal};
use toolguard::store::{ApprovalRequest, ApprovalState};
use toolguard::{HostKeys, Principal};

fn args() -> serde_json::Value {
    json!({
        "from_account": "acct_1029384756",
        "to_account": "acct_5647382910",
        "amount": 125_000,
        "memo": "March invoice, order 1187",
        "notify": "billing@example.com",
    })
}

fn request(keys: &HostKeys) -> ApprovalRequest {
    ApprovalRequest {
        id: "apr_0123456789".into(),
        version: 0,
        state: ApprovalState::Pending,
        requester: Principal::new("acme", "alice", "sess-1"),
        tool: "transfer".into(),
        call_id: "call-1".into(),
        operation_id: "op-1".into(),
        idempotency: None,
        provider: None,
        request_digest: keyed_request_digest(keys, "transfer", 1, &args(), "acme", "alice"),
        binding_digest: "k1:00".into(),
        arguments: args(),
        preview: "transfer requested by alice".into(),
        eligible_roles: vec!["approver".into()],
        approvals_required: 2,
        decisions: Vec::new(),
        tool_revision: 1,
        policy_revision: 1,
        amount: Some(125_000),
        cause: "critical".into(),
        cause_message: None,
        created_at_ms: 1,
        expires_at_ms: 2,
        seal: None,
        provenance: Vec::new(),
        origins: Vec::new(),
    }
}

fn bench(c: &mut Criterion) {
    let keys = HostKeys::new("k1", [7u8; 32]).unwrap();
    let a = args();
    c.bench_function("request_digest/plain", |b| {
        b.iter(|| request_digest("transfer", 1, black_box(&a), "acme", "alice"))
    });
    c.bench_function("request_digest/keyed", |b| {
        b.iter(|| keyed_request_digest(&keys, "transfer", 1, black_box(&a), "acme", "alice"))
    });
    let r = request(&keys);
    c.bench_function("approval/seal", |b| {
        b.iter(|| seal_approval(&keys, black_box(&r)))
    });
    let sealed = r.clone().sealed(&keys);
    c.bench_function("approval/verify_seal", |b| {
        b.iter(|| verify_approval_seal(&keys, black_box(&sealed)))
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let record = AuditRecord {
        tenant: "acme".into(),
        subject: "alice".into(),
        tool: "transfer".into(),
        arguments: Some(std::sync::Arc::new(args())),
        ..AuditRecord::default()
    };
    let sink = MemoryAuditSink::new();
    c.bench_function("audit/append_keyed_memory", |b| {
        b.iter(|| rt.block_on(sink.append(record.clone())).unwrap())
    });
    let keys = Arc::new(HostKeys::new("k1", [7u8; 32]).unwrap());
    let chain = MemoryAuditSink::with_anchor(toolguard::audit::AuditAnchor::new(keys.clone()));
    for _ in 0..1000 {
        rt.block_on(chain.append(record.clone())).unwrap();
    }
    let entries = chain.entries();
    c.bench_function("audit/verify_keyed_1000", |b| {
        b.iter(|| {
            ChainVerifier::keyed(keys.clone())
                .feed(black_box(&entries))
                .unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
