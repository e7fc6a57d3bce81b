//! Intent: what exactly a call asks to do, fixed once its arguments are normalized: the request
//! digest (which binds tenant, subject, tool, revision and the arguments), the idempotency key,
//! the redacted arguments for the audit, and a fresh operation id for state-changing tools.

use std::sync::Arc;

use arcstr::ArcStr;
use serde_json::Value;

use super::Stop;
use super::idempotency::extract_key;
use super::trace::Trace;
use crate::audit::REDACTED;
use crate::call::{Principal, ToolCall};
pub(crate) use crate::digest::{digest, digest_matches};
use crate::keys::HostKeys;
use crate::spec::ToolSpec;

/// The intent stage: records the call's key, digest, arguments and operation id in `t`.
/// A missing or unacceptable idempotency key stops the call (`invalid_arguments`).
pub(crate) fn record(
    keys: Option<&HostKeys>,
    spec: &ToolSpec,
    call: &ToolCall,
    args: &Arc<Value>,
    principal: &Principal,
    t: &mut Trace,
) -> Result<(), Stop> {
    t.idempotency_key = extract_key(spec, call, args)?.map(ArcStr::from);
    t.request_digest = Some(digest(keys, spec, args, principal));
    t.arguments = Some(redacted(spec, args));
    t.arguments_for_operation = Some(Arc::clone(args));
    if !spec.read_only {
        t.operation_id = Some(new_operation_id());
    }
    Ok(())
}

/// A fresh operation id.
///
/// Operations get time-ordered ids (UUIDv7: the time in milliseconds, a counter that starts at
/// a random value each millisecond, then 32 random bits), so that the operations a store records
/// one after the other sit side by side in its index on the id: a batch of records extends the
/// index at one place instead of touching a page of it per record. An id is no secret (a status
/// query is authorized by who asks, not by knowing the id); the random seed and bits keep the
/// ids of processes that share a store from colliding. Ids made by one process sort in the
/// order they were made.
fn new_operation_id() -> ArcStr {
    operation_id(uuid::Uuid::now_v7())
}

/// The operation id made of `id`: `op_` and its 32 lowercase hex digits.
fn operation_id(id: uuid::Uuid) -> ArcStr {
    let mut out = [0u8; 3 + uuid::fmt::Simple::LENGTH];
    out[..3].copy_from_slice(b"op_");
    id.simple().encode_lower(&mut out[3..]);
    // Only ASCII was written.
    ArcStr::from(std::str::from_utf8(&out).unwrap_or_default())
}

/// `args` with every `sensitive` field replaced by [`REDACTED`], sharing `args` itself when the
/// tool has no `sensitive` field.
pub(crate) fn redacted(spec: &ToolSpec, args: &Arc<Value>) -> Arc<Value> {
    if spec.fields.iter().any(|f| f.sensitive) {
        Arc::new(redact(spec, args))
    } else {
        Arc::clone(args)
    }
}

/// `args` with every `sensitive` field replaced by [`REDACTED`].
pub fn redact(spec: &ToolSpec, args: &Value) -> Value {
    let mut out = args.clone();
    if let Value::Object(map) = &mut out {
        for field in spec.fields.iter().filter(|f| f.sensitive) {
            if let Some(v) = map.get_mut(&field.name) {
                *v = Value::String(REDACTED.to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_are_op_and_the_simple_uuid() {
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        assert_eq!(operation_id(id), "op_0123456789abcdef0011223344556677");
        let fresh = uuid::Uuid::new_v4();
        assert_eq!(operation_id(fresh), format!("op_{}", fresh.simple()));
    }

    #[test]
    fn fresh_operation_ids_sort_in_the_order_they_were_made() {
        // Many fall in one millisecond: the order holds within it too.
        let ids: Vec<ArcStr> = (0..10_000).map(|_| new_operation_id()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "ordered and distinct");
        assert!(ids.iter().all(|id| id.len() == 35 && id.starts_with("op_")));
        // Version 7: the time, then random bits.
        let id = uuid::Uuid::parse_str(&ids[0][3..]).expect("a UUID");
        assert_eq!(id.get_version_num(), 7);
    }
}
