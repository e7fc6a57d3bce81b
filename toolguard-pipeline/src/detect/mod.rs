//! Detection: the alerts an incident needs, computed by the framework from every finished call.
//!
//! A [`Detection`] given to [`DispatcherBuilder::detection`](crate::DispatcherBuilder::detection)
//! sees every call once, right after its terminal audit entry is written (calls, approval
//! decisions, operation-status queries alike), and counts it under the rules it feeds. State
//! lives in a [`DetectionStore`] shared by the replicas (memory, SQLite, PostgreSQL, Redis), per
//! scope trimmed to the rule's window and count, so it stays bounded per session.
//!
//! | rule | counts | scope | default |
//! | --- | --- | --- | --- |
//! | `injection_blocks` | blocked calls | session, subject | 5 in 10 min |
//! | `blocks_across_subjects` | distinct subjects with a blocked call | tenant | 20 in 60 min |
//! | `duplicate_execution` | executions with the same normalized arguments (key and call id excluded) | session | 2 in 10 min |
//! | `idempotency_conflicts` | `idempotency_conflict` answers | subject | 3 in 10 min |
//! | `approval_backlog` | pending requests of the tool | tenant | 20 (re-alerts after 15 min) |
//! | `decision_latency` | decisions slower than the SLA (default 5 min) | tenant | 1 in 60 min |
//! | `unusual_unicode` | calls with hidden characters stripped or blocked | session | 3 in 10 min |
//! | `structuring` | amounts in the band just under `approval_over` (default its lower 25%), of every tool moving the same kind of amount (currency) | session, subject | 2 in 60 min |
//!
//! Thresholds are counts within a sliding window, set for every tool or per tool. A count
//! reaching its threshold raises one [`Alert`] per scope and window (replicas agree through the
//! store): an audit entry (event `alert`, reason the rule, the alert with its evidence: call ids
//! and audit sequence numbers), the metric `tool_alerts{rule}`, and every [`AlertSink`].
//! A rule may also respond ([`Response`]): hold (state-changing calls need approval) or block
//! for a period, at the scope of the alert: an alert counted per session holds that session, one
//! counted per subject holds every session of the subject, also sessions opened after it (six
//! transfers from six new sessions are one subject's structuring). Each is audited (event
//! `response`); a reviewer lifts it through
//! [`Dispatcher::detection`](crate::Dispatcher::detection) (`lift` for a session,
//! `lift_subject` for a subject).
//!
//! **Failure policy.** Alerting fails open: when the detection store fails or misses the store
//! deadline the call's outcome is unchanged, the failure is logged and counted
//! (`tool_detection_failures{op}`). The response check fails closed: a state-changing call whose
//! session response cannot be read needs approval (cause `session_hold_unknown`).
//!
//! Configuration mistakes (an unknown tool, a zero count or window, a band reaching above
//! `approval_over`, ...) are `build()` errors naming the option.

pub(crate) mod alert;
pub(crate) mod config;
pub(crate) mod observation;
pub(crate) mod respond;
mod rule;
pub(crate) mod rules;
pub mod store;

pub use alert::{Alert, AlertScope, AlertSink, ChannelSink, CollectingSink, Evidence, LogSink};
pub use config::{
    DEFAULT_BAND_PERCENT, DEFAULT_DECISION_SLA, Detection, DetectionConfigError, MAX_COUNT, Rule,
    Threshold,
};
pub use respond::{LiftError, Response, ResponseKind};
pub use rule::Severity;
pub use rules::UNICODE_REASONS;
pub use store::SessionResponse;
pub use store::{DetectionStore, Mark, Marks, MemoryDetectionStore};
