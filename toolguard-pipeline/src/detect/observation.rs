//! What the detector reads of a finished call ([`Observation`]) and the configured detector with
//! its store under a deadline ([`Detector`]). The pipeline's detect stage
//! (`crate::stage::detect`) builds the observation and runs the rules.

use std::time::{Duration, SystemTime};

use arcstr::ArcStr;

use super::config::Detection;
use super::store::Mark;
use super::store::SessionResponse;
use crate::audit::{AuditEvent, AuditRecord};
use crate::clock::unix_millis;
use crate::outcome::Status;
use crate::spec::ToolSpec;
use crate::store::{StoreError, StoreResult};

/// What the detector learns about one finished call (from its audit record).
#[derive(Debug, Clone)]
pub(crate) struct Observation {
    pub(crate) event: AuditEvent,
    pub(crate) status: Option<Status>,
    pub(crate) reason: Option<String>,
    pub(crate) tenant: ArcStr,
    pub(crate) subject: ArcStr,
    pub(crate) session: ArcStr,
    pub(crate) tool: ArcStr,
    pub(crate) call_id: ArcStr,
    pub(crate) audit_seq: Option<u64>,
    pub(crate) at: SystemTime,
    pub(crate) amount: Option<u64>,
    /// The kind of the amount (its currency, see [`crate::spec::amount_kind`]).
    pub(crate) amount_kind: String,
    /// The request digest: normalized arguments, idempotency key and call id excluded.
    pub(crate) digest: Option<String>,
    pub(crate) unicode_stripped: bool,
    pub(crate) replayed: bool,
    pub(crate) approval_id: Option<String>,
}

impl Observation {
    /// The observation of the call `record` describes, of tool `spec`.
    pub(crate) fn of(record: &AuditRecord, spec: &ToolSpec, at: SystemTime) -> Self {
        let args = record.arguments.as_deref();
        let amount = args.and_then(|args| crate::spec::amount_of(spec, args));
        let amount_kind = match (amount, args) {
            (Some(_), Some(args)) => crate::spec::amount_kind(spec, args),
            _ => String::new(),
        };
        Observation {
            event: record.event,
            status: record.status,
            reason: record.reason.as_deref().map(str::to_owned),
            tenant: record.tenant.clone(),
            subject: record.subject.clone(),
            session: record.session.clone(),
            tool: record.tool.clone(),
            call_id: record.call_id.clone(),
            audit_seq: None,
            at,
            amount,
            amount_kind,
            digest: record.request_digest.clone(),
            unicode_stripped: !record.modifications.is_empty(),
            replayed: record.replayed,
            approval_id: record.approval_id.clone(),
        }
    }

    pub(crate) fn mark(&self, key: Option<String>) -> Mark {
        Mark {
            call_id: self.call_id.to_string(),
            audit_seq: self.audit_seq,
            at_ms: unix_millis(self.at),
            key,
        }
    }
}

/// A configured detector: the rules and their store, every store call under `deadline`.
pub(crate) struct Detector {
    pub(crate) config: Detection,
    pub(crate) deadline: Duration,
}

impl Detector {
    /// Whether any rule has a response (only then do calls read the session's response).
    pub(crate) fn responds(&self) -> bool {
        !self.config.responses.is_empty()
    }

    pub(crate) async fn timed<T>(
        &self,
        fut: crate::tool::BoxFuture<'_, StoreResult<T>>,
    ) -> StoreResult<T> {
        match crate::timeout::limit(self.deadline, fut).await {
            Ok(r) => r,
            Err(_) => Err(StoreError::new("detection store: deadline exceeded")),
        }
    }

    /// The response in force for session key `key`.
    pub(crate) async fn response(
        &self,
        key: &str,
        now: SystemTime,
    ) -> StoreResult<Option<SessionResponse>> {
        self.timed(self.config.store.response(key, now)).await
    }

    /// Lifts the response of session key `key`.
    pub(crate) async fn lift(&self, key: &str) -> StoreResult<bool> {
        self.timed(self.config.store.lift(key)).await
    }
}

/// Counts a failed detection store operation `op` (logged by the caller).
pub(crate) fn failed(op: &'static str) {
    metrics::counter!("tool_detection_failures", "op" => op).increment(1);
}
