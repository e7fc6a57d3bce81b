//! The detection rules ([`Rule`]) and how serious an alert of each is ([`Severity`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How serious an alert is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Severity {
    /// Worth a look (a sanitizer that may be too strict, slow reviewers).
    Info,
    /// Probing or friction that makes users retry.
    Warning,
    /// An attack in progress or money moving twice.
    Critical,
}

/// A detection rule. The metric label and audit reason is [`Rule::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Rule {
    /// Blocked calls (injection, hidden characters) per session and per subject: an active
    /// attack.
    InjectionBlocks,
    /// Blocked calls from many distinct subjects, each at a low rate: the rule set is likely
    /// refusing legitimate input.
    BlocksAcrossSubjects,
    /// The same tool with the same normalized arguments (idempotency key and call id excluded)
    /// executed twice in one session.
    DuplicateExecution,
    /// Idempotency conflicts (one key, different requests) per subject.
    IdempotencyConflicts,
    /// Pending approvals of a tool in a tenant at or above a threshold.
    ApprovalBacklog,
    /// Approval decisions slower than the SLA.
    DecisionLatency,
    /// Invisible or unusual Unicode stripped or blocked per session.
    UnusualUnicode,
    /// Amounts within a band just under `approval_over`, per session and per subject.
    Structuring,
}

impl Rule {
    /// Every rule.
    pub const ALL: [Rule; 8] = [
        Rule::InjectionBlocks,
        Rule::BlocksAcrossSubjects,
        Rule::DuplicateExecution,
        Rule::IdempotencyConflicts,
        Rule::ApprovalBacklog,
        Rule::DecisionLatency,
        Rule::UnusualUnicode,
        Rule::Structuring,
    ];

    /// The rule's name: metric label `rule` of `tool_alerts` and audit reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::InjectionBlocks => "injection_blocks",
            Rule::BlocksAcrossSubjects => "blocks_across_subjects",
            Rule::DuplicateExecution => "duplicate_execution",
            Rule::IdempotencyConflicts => "idempotency_conflicts",
            Rule::ApprovalBacklog => "approval_backlog",
            Rule::DecisionLatency => "decision_latency",
            Rule::UnusualUnicode => "unusual_unicode",
            Rule::Structuring => "structuring",
        }
    }

    /// The default threshold: how many marks within how long raise the alert.
    pub fn default_threshold(self) -> Threshold {
        let min = |m: u64| Duration::from_secs(60 * m);
        match self {
            Rule::InjectionBlocks => Threshold::new(5, min(10)),
            Rule::BlocksAcrossSubjects => Threshold::new(20, min(60)),
            Rule::DuplicateExecution => Threshold::new(2, min(10)),
            Rule::IdempotencyConflicts => Threshold::new(3, min(10)),
            Rule::ApprovalBacklog => Threshold::new(20, min(15)),
            Rule::DecisionLatency => Threshold::new(1, min(60)),
            Rule::UnusualUnicode => Threshold::new(3, min(10)),
            Rule::Structuring => Threshold::new(2, min(60)),
        }
    }

    /// How serious a firing of the rule is.
    pub fn severity(self) -> Severity {
        match self {
            Rule::InjectionBlocks | Rule::DuplicateExecution | Rule::Structuring => {
                Severity::Critical
            }
            Rule::IdempotencyConflicts | Rule::UnusualUnicode | Rule::ApprovalBacklog => {
                Severity::Warning
            }
            Rule::BlocksAcrossSubjects | Rule::DecisionLatency => Severity::Info,
        }
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `count` marks within `window` raise an alert. For [`Rule::ApprovalBacklog`], `count` is the
/// number of pending requests and `window` the quiet period before the same backlog alerts
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    /// Marks that raise the alert (at least 1).
    pub count: u32,
    /// Sliding window (not zero).
    pub window: Duration,
}

impl Threshold {
    /// `count` marks within `window`.
    pub const fn new(count: u32, window: Duration) -> Self {
        Threshold { count, window }
    }
}
