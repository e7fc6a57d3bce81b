//! Responses to an alert, off by default and set per rule with
//! [`Detection::respond`](super::Detection::respond): hold the session (its state-changing calls
//! need approval) or block it for a period (its state-changing calls are refused). Each is
//! written to the audit trail when put in force and when a reviewer lifts it
//! ([`Dispatcher::detection`](crate::Dispatcher::detection)).
//!
//! The response check fails closed: a response that cannot be read counts as a hold (the call
//! needs approval, reason `session_hold_unknown`), while the rules themselves fail open.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::store::{live, session_key};
use crate::audit::{AuditEvent, AuditRecord};
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::dispatcher::Dispatcher;
use crate::outcome::Status;
use crate::spec::ToolSpec;
use crate::stage::Stop;
use crate::stage::core::Core;
use crate::stage::policy::PolicyDecision;
use crate::store::StoreError;

/// What a firing rule does to the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Response {
    /// Every state-changing call of the session needs approval until a reviewer lifts it.
    Hold,
    /// Every state-changing call of the session is refused for the period (or until lifted).
    Block(Duration),
}

/// What is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseKind {
    /// Approval required.
    Hold,
    /// Refused.
    Block,
}

impl ResponseKind {
    /// `hold` or `block`.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseKind::Hold => "hold",
            ResponseKind::Block => "block",
        }
    }
}

/// A response in force for one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionResponse {
    /// Tenant.
    pub tenant: String,
    /// Session id.
    pub session: String,
    /// Hold or block.
    pub kind: ResponseKind,
    /// The rule whose alert put it in force.
    pub rule: String,
    /// The call that raised the alert.
    pub call_id: String,
    /// When it was put in force, in milliseconds since the Unix epoch.
    pub since_ms: u64,
    /// When a block ends; a hold lasts until lifted.
    pub until_ms: Option<u64>,
}

impl SessionResponse {
    /// The store key of its session.
    pub fn key(&self) -> String {
        session_key(&self.tenant, &self.session)
    }
}

/// Puts a held or blocked session's state-changing call on its way to approval or refuses it.
/// Fails closed: a response that cannot be read means approval required.
pub(crate) async fn gate<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    principal: &Principal,
    decision: &mut PolicyDecision,
) -> Result<(), Stop> {
    let Some(detector) = core.detector.as_ref() else {
        return Ok(());
    };
    if spec.read_only || !detector.responds() {
        return Ok(());
    }
    let key = session_key(&principal.tenant, &principal.session_id);
    let cause = match detector.response(&key, core.now()).await {
        Ok(None) => return Ok(()),
        Ok(Some(r)) if r.kind == ResponseKind::Block => {
            return Err(Stop::new(
                Status::PolicyDenied,
                "session_blocked",
                "this session is blocked after a security alert; a reviewer can lift it",
            ));
        }
        Ok(Some(_)) => "session_held",
        Err(err) => {
            tracing::error!(error = %err, "the detection store could not say whether the session is held; approval required");
            super::observe::failed("response");
            "session_hold_unknown"
        }
    };
    decision
        .approval_cause
        .get_or_insert_with(|| cause.to_owned());
    Ok(())
}

/// Why a reviewer could not lift a response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LiftError {
    /// The dispatcher has no detection configured.
    #[error("detection is not configured")]
    NotConfigured,
    /// The reviewer is not fresh or lacks an approver role.
    #[error("not allowed to lift responses: {0}")]
    Forbidden(String),
    /// The detection store could not answer.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Responses in force, for reviewers; see [`Dispatcher::detection`].
pub struct Detections<'d, S: Send + Sync + 'static> {
    core: &'d Core<S>,
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// The responses the detector put in force, and the way to lift them.
    pub fn detection(&self) -> Detections<'_, S> {
        Detections { core: &self.core }
    }
}

impl<S: Send + Sync + 'static> Detections<'_, S> {
    /// The response in force for `session` of `viewer`'s tenant.
    pub async fn response(
        &self,
        viewer: &Principal,
        session: &str,
    ) -> Result<Option<SessionResponse>, LiftError> {
        let detector = self
            .core
            .detector
            .as_ref()
            .ok_or(LiftError::NotConfigured)?;
        let key = session_key(&viewer.tenant, session);
        Ok(detector.response(&key, self.core.now()).await?)
    }

    /// Lifts the response in force for `session` of `reviewer`'s tenant and writes an audit
    /// entry (event `response`, reason `response_lifted`, approver the reviewer). The reviewer
    /// must be fresh and hold one of the policy's approver roles. Returns whether one was in
    /// force.
    pub async fn lift(
        &self,
        reviewer: &Principal,
        session: &str,
        reason: &str,
    ) -> Result<bool, LiftError> {
        let core = self.core;
        let detector = core.detector.as_ref().ok_or(LiftError::NotConfigured)?;
        crate::stage::principal::fresh(core, reviewer)
            .map_err(|s| LiftError::Forbidden(s.reason.unwrap_or_default()))?;
        let roles = core.policy.eligible_roles("");
        if !reviewer.roles.iter().any(|r| roles.contains(r)) {
            return Err(LiftError::Forbidden(format!(
                "needs one of the roles {roles:?}"
            )));
        }
        let key = session_key(&reviewer.tenant, session);
        let now_ms = unix_millis(core.now());
        let found = detector.response(&key, core.now()).await?;
        let lifted = detector.lift(&key).await?;
        let Some(found) = found.filter(|r| lifted && live(r, now_ms)) else {
            return Ok(false);
        };
        let record = AuditRecord {
            event: AuditEvent::Response,
            time_ms: now_ms,
            tenant: reviewer.tenant.clone(),
            subject: reviewer.subject.clone(),
            session: session.into(),
            call_id: found.call_id.as_str().into(),
            reason: Some("response_lifted".to_owned()),
            approver: Some(reviewer.subject.to_string()),
            arguments: Some(std::sync::Arc::new(serde_json::json!({
                "kind": found.kind.as_str(), "rule": found.rule, "note": reason,
            }))),
            ..AuditRecord::default()
        };
        super::observe::append(core, record).await;
        Ok(true)
    }
}
