//! What a call has learned so far ([`Trace`]), the answer of a call no stage stopped
//! ([`Answer`]), and how a stage leaves the sequence early ([`Exit`]).

use std::sync::Arc;

use arcstr::ArcStr;
use serde_json::Value;

use super::{Stage, Stop};
use crate::outcome::{ApprovalTicket, ArgumentError, Status, UntrustedOutput};
use crate::sanitize::Modification;
use crate::store::StoredOutcome;

/// What the stages learn about a call, for its audit entry, operation record and outcome.
#[derive(Default)]
pub(crate) struct Trace {
    pub(crate) stage: Stage,
    /// The registered tool's name (its metrics label), shared with the registry.
    pub(crate) tool: Option<ArcStr>,
    /// The call id as the handler's context holds it, shared with the audit record.
    pub(crate) call_id: Option<ArcStr>,
    pub(crate) request_digest: Option<String>,
    /// The sanitized arguments with `sensitive` fields redacted (audit, previews).
    pub(crate) arguments: Option<Arc<Value>>,
    pub(crate) modifications: Vec<Modification>,
    pub(crate) operation_id: Option<ArcStr>,
    pub(crate) idempotency_key: Option<ArcStr>,
    pub(crate) approval_id: Option<String>,
    pub(crate) approver: Option<String>,
    /// The call has an operation record to keep current when it ends.
    pub(crate) admitted: bool,
    /// Unredacted normalized arguments, kept in the operation record for reconciliation; the
    /// one copy of the call's arguments, shared with the stages that read them.
    pub(crate) arguments_for_operation: Option<Arc<Value>>,
    /// The provenance sources in the model's context for this call (see
    /// [`crate::provenance`]).
    pub(crate) sources: Vec<crate::provenance::Source>,
    /// The origin of each argument, in a session with sources in context.
    pub(crate) origins: Vec<crate::provenance::ArgumentOrigin>,
    /// The label the handler gave its result as a provenance source.
    /// (Only for tools whose output is untrusted.)
    pub(crate) source_label: Option<crate::tool::SourceLabel>,
    /// The flight this call pilots for its key (see [`super::flight`]), landed when it settles.
    pub(crate) pilot: Option<super::flight::Pilot>,
    /// The gate refused the arguments by their size.
    pub(crate) oversized: bool,
    /// When the call's lease began: its key's reservation, or the decision that moved its
    /// approval request to `executing` (see [`super::interrupted::fenced`]).
    pub(crate) lease_from: Option<std::time::Instant>,
    /// What the entry point settles once its terminal audit entry is written.
    pub(crate) settlement: Option<super::settle::Settlement>,
}

impl Trace {
    /// The name of the call's tool `spec`: the registry's shared string when the call found it
    /// there.
    pub(crate) fn tool_name(&self, spec: &crate::spec::ToolSpec) -> ArcStr {
        self.tool
            .clone()
            .unwrap_or_else(|| spec.name.as_str().into())
    }

    /// Marks the stage the call reached.
    pub(crate) fn at(&mut self, stage: Stage) {
        self.stage = stage;
    }
}

/// How a call leaves the stage sequence before its end: stopped, or answered from a stored
/// outcome.
pub(crate) enum Exit {
    /// A stage stopped the call.
    Stop(Stop),
    /// The call is answered without running the remaining stages (a replayed outcome).
    Answer(Box<Answer>),
}

impl Exit {
    /// Leaves the sequence with `answer`.
    pub(crate) fn answer(answer: Answer) -> Self {
        Exit::Answer(Box::new(answer))
    }
}

impl From<Stop> for Exit {
    fn from(stop: Stop) -> Self {
        Exit::Stop(stop)
    }
}

/// A call's answer: executed, pending a human, replayed, or stopped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: Status,
    pub(crate) reason: Option<crate::outcome::Reason>,
    pub(crate) message: Option<String>,
    pub(crate) output: Option<UntrustedOutput>,
    pub(crate) approval: Option<ApprovalTicket>,
    pub(crate) replayed: bool,
    pub(crate) errors: Vec<ArgumentError>,
    pub(crate) retry_after: Option<std::time::Duration>,
}

impl Answer {
    /// The handler's enveloped output.
    pub(crate) fn executed(output: UntrustedOutput) -> Self {
        Answer {
            output: Some(output),
            ..Answer::bare(Status::Ok)
        }
    }

    fn bare(status: Status) -> Self {
        Answer {
            status,
            reason: None,
            message: None,
            output: None,
            approval: None,
            replayed: false,
            errors: Vec::new(),
            retry_after: None,
        }
    }

    /// A new approval request's ticket.
    pub(crate) fn pending(ticket: ApprovalTicket) -> Self {
        Answer {
            message: Some(format!(
                "a human must approve this action (approval {})",
                ticket.approval_id
            )),
            approval: Some(ticket),
            ..Answer::bare(Status::PendingApproval)
        }
    }

    /// A stored outcome returned again.
    pub(crate) fn replay(stored: StoredOutcome) -> Self {
        Answer {
            replayed: true,
            ..Answer::settled(stored)
        }
    }

    /// An outcome settled just now (not a replay).
    pub(crate) fn settled(stored: StoredOutcome) -> Self {
        Answer {
            status: stored.status,
            reason: stored.reason,
            message: stored.message,
            output: stored.output.map(UntrustedOutput::new),
            approval: stored.approval,
            replayed: false,
            errors: Vec::new(),
            retry_after: None,
        }
    }

    /// The answer of a stopped call.
    pub(crate) fn stopped(stop: Stop) -> Self {
        Answer {
            reason: stop.reason,
            message: stop.message,
            errors: stop.errors,
            retry_after: stop.retry_after,
            ..Answer::bare(stop.status)
        }
    }

    /// The answer of a sequence, however it ended.
    pub(crate) fn from_exit(result: Result<Answer, Exit>) -> Self {
        match result {
            Ok(answer) => answer,
            Err(Exit::Answer(answer)) => *answer,
            Err(Exit::Stop(stop)) => Answer::stopped(stop),
        }
    }

    /// The answer of a stage result.
    pub(crate) fn from_result(result: Result<Answer, Stop>) -> Self {
        result.unwrap_or_else(Answer::stopped)
    }

    /// The outcome as stored under an idempotency key and in the operation record.
    pub(crate) fn stored(&self, operation_id: Option<&ArcStr>) -> StoredOutcome {
        StoredOutcome {
            status: self.status,
            reason: self.reason.clone(),
            message: self.message.clone(),
            output: self.output.as_ref().map(|o| o.data.clone()),
            approval: self.approval.clone(),
            operation_id: operation_id.cloned(),
        }
    }
}
