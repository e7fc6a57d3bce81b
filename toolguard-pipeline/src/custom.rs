//! Custom stages: host checks (a tenant quota, a PII scrub, a feature flag) that run at a named
//! [`StagePoint`] of the pipeline and may stop a call with a status and an audit reason of their
//! own. They run in addition to the built-in stages: a custom stage can stop a call, never skip
//! or replace a built-in stage.
//!
//! ```
//! use toolguard_pipeline::custom::{CustomStage, StageInput, StagePoint, Refusal};
//! use toolguard_pipeline::{BoxFuture, Status};
//!
//! /// Refuses tenants that ran out of quota.
//! struct TenantQuota;
//!
//! impl CustomStage for TenantQuota {
//!     fn check<'a>(&'a self, input: StageInput<'a>) -> BoxFuture<'a, Result<(), Refusal>> {
//!         Box::pin(async move {
//!             if input.principal.tenant == "over-quota" {
//!                 return Err(Refusal::new(Status::PolicyDenied, "tenant_quota", "quota used up"));
//!             }
//!             Ok(())
//!         })
//!     }
//! }
//!
//! let dispatcher = toolguard_pipeline::Dispatcher::builder(())
//!     .custom_stage(StagePoint::AfterPermit, TenantQuota)
//!     .build()
//!     .unwrap();
//! # let _ = dispatcher;
//! ```

use std::sync::Arc;

use serde_json::Value;

use crate::call::{Principal, ToolCall};
use crate::outcome::Status;
use crate::outcome::Stop;
use crate::spec::ToolSpec;
use crate::tool::BoxFuture;

/// Where in the pipeline a custom stage runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StagePoint {
    /// After sanitization: the arguments are valid and sanitized; the principal is not checked
    /// yet. For checks of the arguments alone (a PII scrub that refuses, a size budget).
    AfterSanitize,
    /// After the principal and tool permission, before any of the tool's own code (preflight).
    /// For checks of who calls (a tenant quota, a feature flag).
    AfterPermit,
    /// After the risk policy, before idempotency and approval: the last point before anything
    /// is reserved or executed.
    AfterPolicy,
}

/// What a custom stage sees of a call.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct StageInput<'a> {
    /// The model's call.
    pub call: &'a ToolCall,
    /// The trusted caller (not yet checked at [`StagePoint::AfterSanitize`]).
    pub principal: &'a Principal,
    /// The tool's declaration.
    pub spec: &'a ToolSpec,
    /// The validated, sanitized arguments.
    pub arguments: &'a Value,
}

/// A custom stage's refusal: the status, its own reason code (audited) and a message safe to
/// show outside.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    status: Status,
    reason: String,
    message: String,
}

impl Refusal {
    /// A refusal with `status`. Statuses that do not end a call before execution (`ok`,
    /// `pending_approval`, replay statuses, `outcome_unknown`) become `policy_denied`, so a
    /// custom stage can only stop a call.
    pub fn new(status: Status, reason: impl Into<String>, message: impl Into<String>) -> Self {
        let status = match status {
            Status::Forbidden
            | Status::PolicyDenied
            | Status::Blocked
            | Status::PreconditionFailed
            | Status::InvalidArguments
            | Status::NotFound
            | Status::Unavailable => status,
            _ => Status::PolicyDenied,
        };
        Refusal {
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }
}

impl Refusal {
    /// The status the call stops with.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The reason code recorded in the audit entry.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// A host check at a named point of the pipeline.
pub trait CustomStage: Send + Sync + 'static {
    /// `Ok` lets the call go on to the next stage; a [`Refusal`] stops it.
    fn check<'a>(&'a self, input: StageInput<'a>) -> BoxFuture<'a, Result<(), Refusal>>;
}

/// The custom stages of a dispatcher, in the order they were added.
#[derive(Default, Clone)]
pub(crate) struct CustomStages(Vec<(StagePoint, Arc<dyn CustomStage>)>);

impl CustomStages {
    pub(crate) fn push(&mut self, point: StagePoint, stage: Arc<dyn CustomStage>) {
        self.0.push((point, stage));
    }

    /// Whether any stage was added at `point`.
    pub(crate) fn any_at(&self, point: StagePoint) -> bool {
        self.0.iter().any(|(p, _)| *p == point)
    }

    /// Runs the stages added at `point`, in order; the first refusal stops the call.
    pub(crate) async fn run(&self, point: StagePoint, input: StageInput<'_>) -> Result<(), Stop> {
        for (_, stage) in self.0.iter().filter(|(p, _)| *p == point) {
            if let Err(refusal) = stage.check(input).await {
                return Err(Stop::new(refusal.status, refusal.reason, refusal.message));
            }
        }
        Ok(())
    }
}
