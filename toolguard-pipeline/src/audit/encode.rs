//! The canonical JSON encoding of an [`AuditRecord`], written straight from the typed record into
//! a sink (the chain's hasher, a stored copy) without building a `serde_json::Value`.
//!
//! The bytes are exactly those of `canonical_json(&serde_json::to_value(record))`: members in
//! code-point order of their names, strings in NFC, numbers and escapes as `serde_json` writes
//! them, `null` for an absent option. The record is destructured field by field, so a field added
//! to [`AuditRecord`] does not compile until it is encoded here too (and the tests compare both
//! encodings).

use super::entry::AuditRecord;
use crate::canonical::{self, Sink, boolean, key, name, opt_string, string, uint};
use crate::sanitize::Modification;

/// Writes the canonical encoding of `record` into `out`.
pub(crate) fn encode_record<S: Sink + ?Sized>(record: &AuditRecord, out: &mut S) {
    let AuditRecord {
        event,
        time_ms,
        tenant,
        subject,
        session,
        tool,
        call_id,
        operation_id,
        idempotency_key,
        stage,
        status,
        reason,
        request_digest,
        arguments,
        modifications,
        approval_id,
        approver,
        replayed,
        duration_us,
        sources,
        origins,
    } = record;
    out.put(b"{");
    // Members in code-point order of their names.
    key("approval_id", true, out);
    opt_string(approval_id.as_deref(), out);
    key("approver", false, out);
    opt_string(approver.as_deref(), out);
    key("arguments", false, out);
    match arguments {
        Some(v) => canonical::value(v, out),
        None => out.put(b"null"),
    }
    key("call_id", false, out);
    string(call_id, out);
    key("duration_us", false, out);
    uint(*duration_us, out);
    key("event", false, out);
    name(event.as_str(), out);
    key("idempotency_key", false, out);
    opt_string(idempotency_key.as_deref(), out);
    key("modifications", false, out);
    out.put(b"[");
    for (i, m) in modifications.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        modification(m, out);
    }
    out.put(b"]");
    key("operation_id", false, out);
    opt_string(operation_id.as_deref(), out);
    // Left out when empty, as `skip_serializing_if` does; rare, so encoded through a value.
    if !origins.is_empty() {
        key("origins", false, out);
        let value = serde_json::to_value(origins).unwrap_or(serde_json::Value::Null);
        canonical::value(&value, out);
    }
    key("reason", false, out);
    opt_string(reason.as_deref(), out);
    key("replayed", false, out);
    boolean(*replayed, out);
    key("request_digest", false, out);
    opt_string(request_digest.as_deref(), out);
    key("session", false, out);
    string(session, out);
    // Left out when empty, as `skip_serializing_if` does.
    if !sources.is_empty() {
        key("sources", false, out);
        out.put(b"[");
        for (i, id) in sources.iter().enumerate() {
            if i > 0 {
                out.put(b",");
            }
            string(id, out);
        }
        out.put(b"]");
    }
    key("stage", false, out);
    name(stage.as_str(), out);
    key("status", false, out);
    match status {
        Some(status) => name(status.as_str(), out),
        None => out.put(b"null"),
    }
    key("subject", false, out);
    string(subject, out);
    key("tenant", false, out);
    string(tenant, out);
    key("time_ms", false, out);
    uint(*time_ms, out);
    key("tool", false, out);
    string(tool, out);
    out.put(b"}");
}

/// Writes one modification: `count`, `field`, `positions`, `what`.
fn modification<S: Sink + ?Sized>(m: &Modification, out: &mut S) {
    let Modification {
        field,
        what,
        count,
        positions,
    } = m;
    out.put(b"{");
    key("count", true, out);
    uint(*count as u64, out);
    key("field", false, out);
    string(field, out);
    key("positions", false, out);
    out.put(b"[");
    for (i, p) in positions.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        uint(*p as u64, out);
    }
    out.put(b"]");
    key("what", false, out);
    string(what, out);
    out.put(b"}");
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::audit::AuditEvent;
    use crate::audit::Stage;
    use crate::digest::canonical_json;
    use crate::outcome::Status;

    /// The generic path: the record through `serde_json::Value`, then canonical JSON.
    fn through_value(record: &AuditRecord) -> String {
        canonical_json(&serde_json::to_value(record).unwrap())
    }

    fn streamed(record: &AuditRecord) -> String {
        let mut out = Vec::new();
        encode_record(record, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn streamed_encoding_equals_the_value_encoding() {
        let full = AuditRecord {
            event: AuditEvent::OperationStatus,
            time_ms: u64::MAX,
            tenant: "t\u{0065}\u{0301}n".into(),
            subject: "s\"\\\n".into(),
            session: "sess".into(),
            tool: "tool".into(),
            call_id: "c\u{1}".into(),
            operation_id: Some("op".into()),
            idempotency_key: Some("key".into()),
            stage: Stage::Recheck,
            status: Some(Status::IdempotencyConflict),
            reason: Some("r".into()),
            request_digest: Some("k:ff".into()),
            arguments: Some(std::sync::Arc::new(
                json!({"b": [1, 2.5, -3], "a\u{0301}": {"y": null, "x": true}}),
            )),
            modifications: vec![Modification {
                field: "/a".into(),
                what: "zero_width".into(),
                count: 3,
                positions: vec![0, 5, 9],
            }],
            approval_id: Some("apr".into()),
            approver: Some("bob".into()),
            replayed: true,
            duration_us: 17,
            sources: vec!["src_1".into(), "src\u{0301}2".into()],
            origins: vec![
                crate::provenance::ArgumentOrigin::new(
                    "to",
                    crate::provenance::Role::Destination,
                    crate::provenance::Origin::Untrusted {
                        source: "src_1".into(),
                        call_id: Some("c-\u{0301}".into()),
                    },
                ),
                {
                    let mut memo = crate::provenance::ArgumentOrigin::new(
                        "memo",
                        crate::provenance::Role::Content,
                        crate::provenance::Origin::Model,
                    );
                    memo.unplaced = true;
                    memo.output_only = true;
                    memo
                },
            ],
        };
        for record in [full, AuditRecord::default()] {
            assert_eq!(streamed(&record), through_value(&record));
        }
    }

    /// The names written for the record's enums are their serde names, for every variant.
    #[test]
    fn enum_names_are_the_serde_names() {
        fn serde_name(v: impl serde::Serialize) -> String {
            serde_json::to_value(v)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        }
        let events = [
            AuditEvent::Call,
            AuditEvent::Decision,
            AuditEvent::OperationStatus,
            AuditEvent::Notification,
            AuditEvent::Alert,
            AuditEvent::Response,
        ];
        // An event added to the enum does not compile here until it is added to the list above.
        let listed = |event: AuditEvent| match event {
            AuditEvent::Call
            | AuditEvent::Decision
            | AuditEvent::OperationStatus
            | AuditEvent::Notification
            | AuditEvent::Alert
            | AuditEvent::Response => events.contains(&event),
        };
        for event in events {
            assert!(listed(event));
            assert_eq!(event.as_str(), serde_name(event));
        }
        let stages = [
            Stage::Parse,
            Stage::Registry,
            Stage::Validate,
            Stage::Sanitize,
            Stage::Principal,
            Stage::Permit,
            Stage::Preflight,
            Stage::Authorize,
            Stage::Policy,
            Stage::Idempotency,
            Stage::Approval,
            Stage::Recheck,
            Stage::Execute,
            Stage::Envelope,
        ];
        // A stage added to the enum does not compile here until it is added to the list above.
        let listed = |stage: Stage| match stage {
            Stage::Parse
            | Stage::Registry
            | Stage::Validate
            | Stage::Sanitize
            | Stage::Principal
            | Stage::Permit
            | Stage::Preflight
            | Stage::Authorize
            | Stage::Policy
            | Stage::Idempotency
            | Stage::Approval
            | Stage::Recheck
            | Stage::Execute
            | Stage::Envelope => stages.contains(&stage),
        };
        for stage in stages {
            assert!(listed(stage));
            assert_eq!(stage.as_str(), serde_name(stage));
        }
        for status in Status::ALL {
            assert_eq!(status.as_str(), serde_name(status));
        }
        // Every name is one `name` may write without escaping.
        let names = stages.iter().map(|s| s.as_str());
        let names = names.chain(events.iter().map(|e| e.as_str()));
        for n in names.chain(Status::ALL.iter().map(|s| s.as_str())) {
            assert!(
                n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{n}"
            );
        }
    }
}
