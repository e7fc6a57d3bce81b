//! Intent: what exactly a call asks to do, fixed once its arguments are normalized: the request
//! digest (which binds tenant, subject, tool, revision and the arguments), the idempotency key,
//! the redacted arguments for the audit, and a fresh operation id for state-changing tools.

use serde_json::Value;

use super::Stop;
use super::idempotency::{action_arguments, extract_key};
use super::trace::Trace;
use crate::audit::REDACTED;
use crate::call::{Principal, ToolCall};
use crate::digest::request_digest;
use crate::spec::ToolSpec;

/// The intent stage: records the call's key, digest, arguments and operation id in `t`.
/// A missing or unacceptable idempotency key stops the call (`invalid_arguments`).
pub(crate) fn record(
    spec: &ToolSpec,
    call: &ToolCall,
    args: &Value,
    principal: &Principal,
    t: &mut Trace,
) -> Result<(), Stop> {
    t.idempotency_key = extract_key(spec, call, args)?;
    t.request_digest = Some(digest(spec, args, principal));
    t.arguments = Some(redact(spec, args));
    t.arguments_for_operation = Some(args.clone());
    if !spec.read_only {
        t.operation_id = Some(format!("op_{}", uuid::Uuid::new_v4().simple()));
    }
    Ok(())
}

/// The request digest of `args` (normalized) for `principal`.
pub(crate) fn digest(spec: &ToolSpec, args: &Value, principal: &Principal) -> String {
    request_digest(
        &spec.name,
        spec.revision,
        &action_arguments(spec, args),
        &principal.tenant,
        &principal.subject,
    )
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
