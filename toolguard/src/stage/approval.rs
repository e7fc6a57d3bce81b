//! Approval: a call that needs a human becomes an [`ApprovalRequest`] bound by digest to the exact
//! action, with a preview of the normalized arguments that will execute.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::Stop;
use super::policy::RiskPolicy;
use crate::call::{Principal, ToolCall};
use crate::clock::unix_millis;
use crate::digest::{canonical_json, sha256_hex};
use crate::notify::{ApprovalEvent, ApprovalEventKind::Opened, Notifiers};
use crate::outcome::{ApprovalTicket, Status};
use crate::spec::ToolSpec;
use crate::store::{ApprovalRequest, ApprovalState, ApprovalStore, ScopedKey};

/// The binding digest of DESIGN.md: provider path, operation, response and call ids, idempotency
/// key, request digest, contract and policy revisions, and (for a decision) the approver.
pub fn binding_digest(request: &ApprovalRequest, approver: Option<&str>) -> String {
    let provider = request.provider.clone().unwrap_or_default();
    let doc = json!({
        "provider": provider.provider,
        "api_family": provider.api_family,
        "adapter_revision": provider.adapter_revision,
        "response_id": provider.response_id,
        "operation_id": request.operation_id,
        "call_id": request.call_id,
        "idempotency_key": request.idempotency.as_ref().map(|k| &k.key),
        "request_digest": request.request_digest,
        "input_schema_revision": request.tool_revision,
        "output_schema_revision": request.tool_revision,
        "effect_revision": request.tool_revision,
        "policy_revision": request.policy_revision,
        "approver": approver,
    });
    sha256_hex(canonical_json(&doc).as_bytes())
}

/// A human-readable preview of exactly what will execute (sensitive fields redacted).
pub fn preview(spec: &ToolSpec, redacted_args: &Value, requester: &Principal) -> String {
    let mut out = format!(
        "{} requested by {} (tenant {})",
        spec.name, requester.subject, requester.tenant
    );
    if let Value::Object(map) = redacted_args {
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for k in keys {
            if Some(k) == spec.idempotency_key_field.as_ref() {
                continue;
            }
            out.push_str(&format!("\n  {k}: {}", canonical_json(&map[k])));
        }
    }
    out
}

/// Everything needed to open a request.
pub struct Pending<'a> {
    /// The tool.
    pub spec: &'a ToolSpec,
    /// The call.
    pub call: &'a ToolCall,
    /// The requester.
    pub principal: &'a Principal,
    /// Normalized (sanitized) arguments that will execute.
    pub arguments: &'a Value,
    /// Them, redacted, for the preview.
    pub redacted: &'a Value,
    /// Request digest.
    pub request_digest: &'a str,
    /// Operation id.
    pub operation_id: &'a str,
    /// Idempotency scope.
    pub idempotency: Option<ScopedKey>,
    /// Why approval is needed.
    pub cause: &'a str,
    /// Amount measured.
    pub amount: Option<u64>,
}

/// Stores a new approval request, tells the notifiers, and returns its ticket.
pub(crate) async fn open(
    store: &dyn ApprovalStore,
    policy: &RiskPolicy,
    notifiers: &Notifiers,
    p: Pending<'_>,
    now: SystemTime,
) -> Result<ApprovalTicket, Stop> {
    let created = unix_millis(now);
    let ttl_ms = u64::try_from(policy.current_approval_ttl().as_millis()).unwrap_or(u64::MAX);
    let expires = created.saturating_add(ttl_ms);
    let mut request = ApprovalRequest {
        id: format!("apr_{}", uuid::Uuid::new_v4().simple()),
        version: 0,
        state: ApprovalState::Pending,
        requester: p.principal.clone(),
        tool: p.spec.name.clone(),
        call_id: p.call.call_id.clone(),
        operation_id: p.operation_id.to_owned(),
        idempotency: p.idempotency,
        provider: p.call.provider.clone(),
        request_digest: p.request_digest.to_owned(),
        binding_digest: String::new(),
        arguments: p.arguments.clone(),
        preview: preview(p.spec, p.redacted, p.principal),
        eligible_roles: policy.eligible_roles(&p.spec.name),
        approvals_required: p.spec.approvals.max(1),
        decisions: Vec::new(),
        tool_revision: p.spec.revision,
        policy_revision: policy.current_revision(),
        amount: p.amount,
        cause: p.cause.to_owned(),
        created_at_ms: created,
        expires_at_ms: expires,
    };
    request.binding_digest = binding_digest(&request, None);
    store.create(&request).await.map_err(|_| {
        Stop::new(
            Status::Unavailable,
            "approval_store_unavailable",
            "approvals are unavailable; nothing was done",
        )
    })?;
    crate::metrics::approval_pending(&request.tool, &request.requester.tenant, 1.0);
    notifiers.emit(ApprovalEvent::of(Opened, &request, None, created));
    Ok(ApprovalTicket {
        approval_id: request.id,
        preview: request.preview,
        expires_at_ms: expires,
    })
}
