//! The responses the detector put in force, as reviewers see them: read one, lift one (see
//! [`crate::detect`]).

use super::Dispatcher;
use crate::audit::{AuditEvent, AuditRecord};
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::detect::store::{live, session_key, subject_key};
use crate::detect::{LiftError, SessionResponse};
use crate::stage::core::Core;

/// Responses in force, for reviewers; see [`Dispatcher::detection`].
pub struct Detections<'d, S: Send + Sync + 'static> {
    core: &'d Core<S>,
}

impl<S: Send + Sync + 'static> std::fmt::Debug for Detections<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detections").finish_non_exhaustive()
    }
}

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// The responses the detector put in force, and the way to lift them.
    pub fn detection(&self) -> Detections<'_, S> {
        Detections { core: &self.core }
    }
}

impl<S: Send + Sync + 'static> Detections<'_, S> {
    /// The response in force for `session` of `viewer`'s tenant (its own; a response of its
    /// subject is read with [`Detections::subject_response`]).
    pub async fn response(
        &self,
        viewer: &Principal,
        session: &str,
    ) -> Result<Option<SessionResponse>, LiftError> {
        self.read(session_key(&viewer.tenant, session)).await
    }

    /// The response in force for every session of `subject` of `viewer`'s tenant.
    pub async fn subject_response(
        &self,
        viewer: &Principal,
        subject: &str,
    ) -> Result<Option<SessionResponse>, LiftError> {
        self.read(subject_key(&viewer.tenant, subject)).await
    }

    /// Lifts the response in force for `session` of `reviewer`'s tenant and writes an audit
    /// entry (event `response`, reason `response_lifted`, approver the reviewer). The reviewer
    /// must be fresh and hold one of the policy's approver roles. Returns whether one was in
    /// force. A response of the session's subject stays in force
    /// ([`Detections::lift_subject`]).
    pub async fn lift(
        &self,
        reviewer: &Principal,
        session: &str,
        reason: &str,
    ) -> Result<bool, LiftError> {
        let key = session_key(&reviewer.tenant, session);
        self.lift_key(reviewer, key, reason).await
    }

    /// Lifts the response in force for every session of `subject` of `reviewer`'s tenant, as
    /// [`Detections::lift`] does for one session.
    pub async fn lift_subject(
        &self,
        reviewer: &Principal,
        subject: &str,
        reason: &str,
    ) -> Result<bool, LiftError> {
        let key = subject_key(&reviewer.tenant, subject);
        self.lift_key(reviewer, key, reason).await
    }

    async fn read(&self, key: String) -> Result<Option<SessionResponse>, LiftError> {
        let detector = self
            .core
            .detector
            .as_ref()
            .ok_or(LiftError::NotConfigured)?;
        Ok(detector.response(&key, self.core.now()).await?)
    }

    async fn lift_key(
        &self,
        reviewer: &Principal,
        key: String,
        reason: &str,
    ) -> Result<bool, LiftError> {
        let core = self.core;
        let detector = core.detector.as_ref().ok_or(LiftError::NotConfigured)?;
        crate::stage::principal::fresh(core, reviewer)
            .map_err(|s| LiftError::Forbidden(s.reason.map(String::from).unwrap_or_default()))?;
        let roles = core.policy.eligible_roles("");
        if !reviewer.roles.iter().any(|r| roles.contains(r)) {
            return Err(LiftError::Forbidden(format!(
                "needs one of the roles {roles:?}"
            )));
        }
        let now_ms = unix_millis(core.now());
        let found = detector.response(&key, core.now()).await?;
        let lifted = detector.lift(&key).await?;
        let Some(found) = found.filter(|r| lifted && live(r, now_ms)) else {
            return Ok(false);
        };
        let mut note = serde_json::json!({
            "kind": found.kind.as_str(), "rule": found.rule, "note": reason,
        });
        if let Some(subject) = &found.subject {
            note["subject"] = subject.as_str().into();
        }
        let record = AuditRecord {
            event: AuditEvent::Response,
            time_ms: now_ms,
            tenant: reviewer.tenant.clone(),
            subject: reviewer.subject.clone(),
            session: found.session.as_str().into(),
            call_id: found.call_id.as_str().into(),
            reason: Some(crate::outcome::Reason::ResponseLifted),
            approver: Some(reviewer.subject.to_string()),
            arguments: Some(std::sync::Arc::new(note)),
            ..AuditRecord::default()
        };
        crate::stage::detect::append(core, record).await;
        Ok(true)
    }
}
