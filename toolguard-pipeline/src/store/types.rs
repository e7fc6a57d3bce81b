use std::sync::Arc;

use arcstr::ArcStr;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::call::{Principal, ProviderContext};
use crate::outcome::{ApprovalTicket, Status};

/// An idempotency key in its namespace: one principal can neither read nor poison another's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScopedKey {
    /// Caller's tenant (shared with the call's principal).
    pub tenant: ArcStr,
    /// Caller.
    pub subject: ArcStr,
    /// Tool name (shared with the registry).
    pub tool: ArcStr,
    /// The key.
    pub key: ArcStr,
}

impl ScopedKey {
    /// One string naming the scope unambiguously (parts are length-prefixed).
    pub fn storage_key(&self) -> String {
        let parts: [&str; 4] = [&self.tenant, &self.subject, &self.tool, &self.key];
        // Each part adds its length (a few digits), `:` and `|`: one allocation for the whole key.
        let mut out = String::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
        for part in parts {
            push_len(&mut out, part);
            out.push(':');
            out.push_str(part);
            out.push('|');
        }
        out
    }
}

/// Appends the length of `part` in decimal digits (the prefix of a length-prefixed key).
pub(crate) fn push_len(out: &mut String, part: &str) {
    out.push_str(itoa::Buffer::new().format(part.len()));
}

/// `tenant`'s length, `sep`, `tenant`, `|`, `rest`: a key no tenant can spell for another.
pub(crate) fn tenant_key(tenant: &str, sep: char, rest: &str) -> String {
    let mut out = String::with_capacity(tenant.len() + rest.len() + 8);
    push_len(&mut out, tenant);
    out.push(sep);
    out.push_str(tenant);
    out.push('|');
    out.push_str(rest);
    out
}

/// An outcome as stored for replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredOutcome {
    /// Status.
    pub status: Status,
    /// Reason code.
    pub reason: Option<crate::outcome::Reason>,
    /// External message.
    pub message: Option<String>,
    /// Result data, for `ok`.
    pub output: Option<Value>,
    /// The approval waited for, for `pending_approval`.
    pub approval: Option<ApprovalTicket>,
    /// Operation id.
    pub operation_id: Option<ArcStr>,
}

impl StoredOutcome {
    /// An outcome with `status` and nothing else.
    pub fn new(status: Status) -> Self {
        StoredOutcome {
            status,
            reason: None,
            message: None,
            output: None,
            approval: None,
            operation_id: None,
        }
    }
}

/// State of an idempotency record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum RecordState {
    /// A call holds the key and may be executing.
    InFlight {
        /// Owner token of the holder.
        owner: String,
        /// Milliseconds since the epoch when the lease ends.
        lease_until_ms: u64,
    },
    /// The outcome is final (or pending a human) and is replayed.
    Done {
        /// The stored outcome.
        outcome: StoredOutcome,
    },
}

/// A live idempotency record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdempotencyRecord {
    /// Request digest of the call that created it.
    pub request_digest: String,
    /// Operation id of that call.
    pub operation_id: Option<String>,
    /// State.
    pub state: RecordState,
    /// Milliseconds since the epoch when the record expires.
    pub expires_at_ms: u64,
}

/// Result of [`super::IdempotencyStore::reserve`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reservation {
    /// The key was free; the caller now owns it.
    Reserved {
        /// Owner token, needed to complete or release.
        owner: String,
    },
    /// The key is taken.
    Existing(IdempotencyRecord),
}

/// State of an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalState {
    /// Waiting for approvers.
    Pending,
    /// Approved; the action is executing.
    Executing,
    /// Approved and executed (whatever its outcome).
    Executed,
    /// Rejected by an approver.
    Rejected,
    /// Expired before a decision.
    Expired,
}

impl ApprovalState {
    /// The snake_case code stored by the database backends.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Pending => "pending",
            ApprovalState::Executing => "executing",
            ApprovalState::Executed => "executed",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Expired => "expired",
        }
    }
}

/// One approver's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    /// The approver (subject).
    pub approver: String,
    /// `true` for approve, `false` for reject.
    pub approve: bool,
    /// When, in milliseconds since the epoch.
    pub at_ms: u64,
    /// The binding digest including the approver's identity.
    pub digest: String,
    /// Reason given on rejection.
    pub reason: Option<String>,
}

/// A request for human approval of one exact action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Approval id.
    pub id: String,
    /// Version for compare-and-set updates.
    pub version: u64,
    /// State.
    pub state: ApprovalState,
    /// The requester, as authenticated when the call was made.
    pub requester: Principal,
    /// Tool name.
    pub tool: String,
    /// Provider call id.
    pub call_id: String,
    /// Operation id.
    pub operation_id: String,
    /// Idempotency scope the outcome is stored under.
    pub idempotency: Option<ScopedKey>,
    /// Provider path of the call.
    pub provider: Option<ProviderContext>,
    /// Request digest (tenant, subject, tool, revision, normalized arguments).
    pub request_digest: String,
    /// Binding digest over the approval fields of DESIGN.md, without the approver.
    pub binding_digest: String,
    /// The normalized arguments that will execute.
    pub arguments: Value,
    /// What the approver is shown.
    pub preview: String,
    /// Roles of which an approver must hold one (in the requester's tenant).
    pub eligible_roles: Vec<String>,
    /// Distinct approvers needed.
    pub approvals_required: u8,
    /// Decisions so far.
    pub decisions: Vec<ApprovalDecision>,
    /// Tool contract revision (input/output schema and effect).
    pub tool_revision: u32,
    /// Approval/risk policy revision.
    pub policy_revision: u32,
    /// Amount measured, if the tool has an amount field.
    pub amount: Option<u64>,
    /// Why approval was needed (`critical`, `approval_over`, `session_limit`, `policy`).
    pub cause: String,
    /// The rule that held it, as a sentence for the reviewer (which threshold and amount,
    /// which limit and how much is left, which untrusted content); `None` for records written
    /// before it was kept, or where the cause says it all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause_message: Option<String>,
    /// Created, in milliseconds since the epoch.
    pub created_at_ms: u64,
    /// Void from this instant on (`now < expires_at` is valid).
    pub expires_at_ms: u64,
    /// HMAC-SHA256 seal over every other field but `version` (see [`crate::seal`]); `None` for
    /// records written without a host key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seal: Option<String>,
    /// The provenance sources in the model's context when the call was proposed (see
    /// [`crate::provenance`]); bound into the binding digest, so a request proposed under other
    /// sources is another intent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provenance: Vec<crate::provenance::Source>,
    /// Where each argument came from, when the call was proposed in a session with sources (see
    /// [`crate::provenance::Origin`]); shown in the preview and bound into the binding digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<crate::provenance::ArgumentOrigin>,
}

impl ApprovalRequest {
    /// Subjects that approved so far.
    pub fn approvers(&self) -> Vec<&str> {
        self.decisions
            .iter()
            .filter(|d| d.approve)
            .map(|d| d.approver.as_str())
            .collect()
    }
}

/// A session-ledger scope with its limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeLimit {
    /// Scope name.
    pub scope: String,
    /// Most amount within the window.
    pub limit: u64,
    /// Window length.
    pub window: std::time::Duration,
}

/// Result of [`super::SessionLedger::commit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldCommit {
    /// The reservation is now booked; nobody else can commit it.
    Committed,
    /// No live reservation of that entry: released, expired, already committed, or never made.
    Missing,
    /// The amount to book is higher than the amount reserved; nothing changed.
    Exceeds {
        /// The reserved amount.
        reserved: u64,
    },
}

/// State of an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OperationState {
    /// Executing now.
    Executing,
    /// Waiting for approval.
    Pending,
    /// Executed successfully.
    Ok,
    /// Did not execute, or failed (a retry may execute).
    Failed,
    /// Rejected by an approver or expired.
    Rejected,
    /// May or may not have taken effect.
    OutcomeUnknown,
}

impl OperationState {
    /// The operation state a terminal status leaves.
    pub fn from_status(status: Status) -> Self {
        match status {
            Status::Ok => OperationState::Ok,
            Status::PendingApproval => OperationState::Pending,
            Status::OutcomeUnknown => OperationState::OutcomeUnknown,
            Status::ApprovalRejected | Status::ApprovalExpired => OperationState::Rejected,
            _ => OperationState::Failed,
        }
    }
}

/// A state-changing operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OperationRecord {
    /// Operation id.
    pub id: ArcStr,
    /// Tenant of the caller (shared with the call's principal).
    pub tenant: ArcStr,
    /// Caller.
    pub subject: ArcStr,
    /// Tool name (shared with the registry).
    pub tool: ArcStr,
    /// Provider call id.
    pub call_id: String,
    /// State.
    pub state: OperationState,
    /// Last outcome.
    pub outcome: Option<StoredOutcome>,
    /// Normalized arguments (for reconciliation): the call's one shared copy, so writing a
    /// record (and a memory store keeping it) never copies them.
    pub arguments: Arc<Value>,
    /// Idempotency scope, if the call had a key.
    pub idempotency: Option<ScopedKey>,
    /// Approval id, if one was requested.
    pub approval_id: Option<String>,
    /// Last update, in milliseconds since the epoch.
    pub updated_at_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_keys_length_prefix_every_part() {
        let key = ScopedKey {
            tenant: "acme".into(),
            subject: "al|ice".into(),
            tool: "transfer".into(),
            key: "k:1".into(),
        };
        assert_eq!(key.storage_key(), "4:acme|6:al|ice|8:transfer|3:k:1|");
        // A separator inside a part cannot make two scopes collide.
        let other = ScopedKey {
            subject: "al".into(),
            tool: "ice|8:transfer".into(),
            ..key.clone()
        };
        assert_ne!(key.storage_key(), other.storage_key());
    }

    /// The session keys of provenance and detection name rows already stored: their forms are
    /// fixed.
    #[test]
    fn session_keys_keep_their_stored_forms() {
        assert_eq!(crate::provenance::session_key("acme", "s|1"), "4|acme|s|1");
        assert_eq!(
            crate::detect::store::session_key("acme", "s|1"),
            "4:acme|s|1"
        );
        assert_eq!(tenant_key("", '|', ""), "0||");
        let long = "t".repeat(1234);
        assert!(tenant_key(&long, ':', "x").starts_with("1234:ttt"));
    }
}
