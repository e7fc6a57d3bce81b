//! What a firing rule produces ([`Alert`]) and where it goes ([`AlertSink`]): the host's pager,
//! a log ([`LogSink`]), a channel the host reads ([`ChannelSink`]), or a webhook (the console's
//! `WebhookNotifier` implements [`AlertSink`]).

use serde::{Deserialize, Serialize};

use super::rule::{Rule, Severity};

/// What an alert is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AlertScope {
    /// One agent session of a tenant.
    Session {
        /// Tenant.
        tenant: String,
        /// Session id.
        session: String,
    },
    /// One subject (user) of a tenant, across sessions.
    Subject {
        /// Tenant.
        tenant: String,
        /// Subject.
        subject: String,
    },
    /// A tool across the subjects of a tenant.
    Tenant {
        /// Tenant.
        tenant: String,
    },
}

impl AlertScope {
    /// `session`, `subject` or `tenant`.
    pub fn kind(&self) -> &'static str {
        match self {
            AlertScope::Session { .. } => "session",
            AlertScope::Subject { .. } => "subject",
            AlertScope::Tenant { .. } => "tenant",
        }
    }
}

/// The calls behind an alert.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Evidence {
    /// Provider call ids of the calls, oldest first.
    pub call_ids: Vec<String>,
    /// Sequence numbers of their audit entries, oldest first (calls whose entry could not be
    /// written have none).
    pub audit_seqs: Vec<u64>,
}

/// A rule fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Alert {
    /// The rule.
    pub rule: String,
    /// How serious.
    pub severity: Severity,
    /// Whom it is about.
    pub scope: AlertScope,
    /// The tool.
    pub tool: String,
    /// What crossed which threshold, in plain words.
    pub summary: String,
    /// The calls involved.
    pub evidence: Evidence,
    /// When it fired, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Sequence number of the alert's own audit entry, once written.
    pub audit_seq: Option<u64>,
    /// The response put in force (`hold`, `block`), if any.
    pub response: Option<String>,
}

impl Alert {
    /// The rule that fired, if it is one of [`Rule::ALL`].
    pub fn rule(&self) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.as_str() == self.rule)
    }
}

/// Receives alerts. Called on the path of the call that raised the alert: it must return at once
/// (queue the alert, deliver it elsewhere). A panic inside a sink is contained and logged.
pub trait AlertSink: Send + Sync + 'static {
    /// Takes one alert.
    fn alert(&self, alert: &Alert);
}

/// Writes every alert as a `tracing` event at `warn` (critical: `error`), target
/// `toolguard_pipeline::alert`.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogSink;

impl AlertSink for LogSink {
    fn alert(&self, alert: &Alert) {
        let evidence = serde_json::to_string(&alert.evidence).unwrap_or_default();
        match alert.severity {
            Severity::Critical => tracing::error!(
                target: "toolguard::alert",
                rule = %alert.rule, tool = %alert.tool, scope = alert.scope.kind(),
                evidence = %evidence, "{}", alert.summary
            ),
            _ => tracing::warn!(
                target: "toolguard::alert",
                rule = %alert.rule, tool = %alert.tool, scope = alert.scope.kind(),
                evidence = %evidence, "{}", alert.summary
            ),
        }
    }
}

/// Sends every alert into an unbounded channel the host (or a test) reads; alerts sent after
/// the receiver was dropped are discarded.
#[derive(Debug, Clone)]
pub struct ChannelSink {
    tx: tokio::sync::mpsc::UnboundedSender<Alert>,
}

impl ChannelSink {
    /// A sink and the receiver of its alerts.
    pub fn new() -> (Self, tokio::sync::mpsc::UnboundedReceiver<Alert>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (ChannelSink { tx }, rx)
    }
}

impl AlertSink for ChannelSink {
    fn alert(&self, alert: &Alert) {
        let _ = self.tx.send(alert.clone());
    }
}

/// Keeps every alert in memory, for hosts that poll and for tests.
#[derive(Debug, Clone, Default)]
pub struct CollectingSink {
    alerts: std::sync::Arc<std::sync::Mutex<Vec<Alert>>>,
}

impl CollectingSink {
    /// An empty sink; clones share the alerts.
    pub fn new() -> Self {
        Self::default()
    }

    /// The alerts so far, oldest first.
    pub fn alerts(&self) -> Vec<Alert> {
        self.alerts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl AlertSink for CollectingSink {
    fn alert(&self, alert: &Alert) {
        self.alerts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(alert.clone());
    }
}
