//! Provenance: which untrusted content entered a session's context, and what the session may
//! still do on its own after reading it.
//!
//! Patterns catch known injections; a paraphrase gets past some of them. Provenance does not
//! depend on recognizing the attack:
//!
//! - A tool declares its output trust: `output = "untrusted"` for content from outside the
//!   caller's trust (mail bodies, web pages, documents, search results, other users' text). When
//!   such a tool returns `ok`, the dispatcher records a [`Source`] for the session (tool, call id,
//!   operation id, time, and a short label the handler may set with
//!   [`ToolContext::set_source_label`](crate::ToolContext::set_source_label)).
//! - The host adds sources it placed into the context itself (an uploaded document, retrieved
//!   passages) with [`Dispatcher::add_source`](crate::Dispatcher::add_source), and clears them for
//!   a new conversation with [`Dispatcher::clear_sources`](crate::Dispatcher::clear_sources).
//!   [`ToolCall::with_sources`](crate::ToolCall::with_sources) narrows which of the session's
//!   sources were in the model's context for one call, when the host knows.
//! - Sources live in a [`ProvenanceStore`] next to the session ledger (memory, SQLite,
//!   PostgreSQL, Redis), so every replica sees every source of a session.
//! - The [`FlowPolicy`] (part of the [`RiskPolicy`](crate::RiskPolicy)) is evaluated in the
//!   risk-policy stage: in a session with sources, a state-changing tool of high or critical risk
//!   needs approval even under every threshold, and an `egress` tool may reach only the
//!   destinations its sanitizer allowlists admit without approval. Each rule is configurable to
//!   allow, require approval or deny, per risk level and per tool. A hold or denial names the
//!   source that caused it.
//! - The sources in effect are shown in the approval preview, stored on the
//!   [`ApprovalRequest`](crate::store::ApprovalRequest), bound into its binding digest, and
//!   written to audit entries (by id), so source → call → decision can be joined
//!   ([`AuditQuery::by_source`](crate::audit::AuditQuery::by_source)).
//!
//! ```
//! use toolguard_pipeline::provenance::{FlowAction, FlowPolicy};
//! use toolguard_pipeline::{Risk, RiskPolicy};
//!
//! let policy = RiskPolicy::new().flow(
//!     FlowPolicy::default()
//!         .state_change(Risk::Medium, FlowAction::RequireApproval)
//!         .tool("delete_account", FlowAction::Deny),
//! );
//! # let _ = policy;
//! ```

pub(crate) mod flow;
mod store;

pub use flow::{CAUSE, FlowAction, FlowPolicy, FlowRule};
pub use store::{ProvenanceStore, session_key};

/// A provenance store shared by the dispatcher's stages (and, through the backend, by replicas).
pub type SharedProvenance = std::sync::Arc<dyn ProvenanceStore>;

/// The table of sources in the SQL stores (SQLite and PostgreSQL migrations).
#[doc(hidden)]
pub const SOURCES_TABLE: &str = r#"
CREATE TABLE IF NOT EXISTS toolguard_provenance (
    session TEXT NOT NULL,
    id TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session, id)
);
CREATE INDEX IF NOT EXISTS toolguard_provenance_order ON toolguard_provenance (session, at_ms);
"#;

/// Keeps the newest [`MAX_SOURCES_PER_SESSION`] sources of the session bound first.
#[doc(hidden)]
pub const TRIM_SQL: &str = "DELETE FROM toolguard_provenance WHERE session = $1 AND id NOT IN \
     (SELECT id FROM toolguard_provenance WHERE session = $1 ORDER BY at_ms DESC, id DESC LIMIT 256)";

use serde::{Deserialize, Serialize};

/// Longest source label kept, in characters; longer labels are cut.
pub const MAX_SOURCE_LABEL_CHARS: usize = 200;

/// Most sources kept per session; the oldest are dropped first (a session that read this much
/// untrusted content is tainted either way).
pub const MAX_SOURCES_PER_SESSION: usize = 256;

/// One piece of untrusted content that entered a session's context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Source {
    /// Stable id (`src_…`), the key audit queries join on.
    pub id: String,
    /// The tool whose result it was; `None` for a source the host added.
    pub tool: Option<String>,
    /// The call that returned it; `None` for a source the host added.
    pub call_id: Option<String>,
    /// The operation id of that call, when it had one.
    pub operation_id: Option<String>,
    /// When it entered the context, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// A short label (e.g. the sender of an e-mail, a document's name), for reviewers.
    pub label: Option<String>,
}

impl Source {
    /// A source the host placed into the context itself (an uploaded document, retrieved
    /// passages), labelled `label`, at `at_ms`.
    pub fn host(label: impl Into<String>, at_ms: u64) -> Self {
        Source {
            id: new_id(),
            tool: None,
            call_id: None,
            operation_id: None,
            at_ms,
            label: Some(cap_label(label.into())),
        }
    }

    /// The result of call `call_id` of `tool`.
    pub(crate) fn tool_result(
        tool: &str,
        call_id: &str,
        operation_id: Option<String>,
        at_ms: u64,
        label: Option<String>,
    ) -> Self {
        Source {
            id: new_id(),
            tool: Some(tool.to_owned()),
            call_id: Some(call_id.to_owned()),
            operation_id,
            at_ms,
            label: label.map(cap_label),
        }
    }

    /// One line for reviewers and messages: `the result of read_email call call-7 ("mail from
    /// bob@example.com") at 1700000000000 ms`.
    pub fn describe(&self) -> String {
        let what = match (&self.tool, &self.call_id) {
            (Some(tool), Some(call)) => format!("the result of {tool} call {call}"),
            (Some(tool), None) => format!("the result of {tool}"),
            _ => "content the host added".to_owned(),
        };
        let label = self
            .label
            .as_deref()
            .map(|l| format!(" ({l:?})"))
            .unwrap_or_default();
        format!("{what}{label} [source {}, at {} ms]", self.id, self.at_ms)
    }
}

fn new_id() -> String {
    format!("src_{}", uuid::Uuid::new_v4().simple())
}

fn cap_label(label: String) -> String {
    let clean: String = label
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_SOURCE_LABEL_CHARS)
        .collect();
    clean
}

/// The ids of `sources`, in order (the approval binding and audit entries carry them).
pub fn source_ids(sources: &[Source]) -> Vec<&str> {
    sources.iter().map(|s| s.id.as_str()).collect()
}

/// `preview` followed by one line per source, so that a reviewer sees what the session had
/// read when the call was proposed.
pub fn with_sources(mut preview: String, sources: &[Source]) -> String {
    if !sources.is_empty() {
        preview.push_str("\n  proposed after reading untrusted content:");
        for s in sources {
            preview.push_str("\n    - ");
            preview.push_str(&s.describe());
        }
    }
    preview
}

/// The sources of a session that were in the model's context for one call: all of them, or
/// those the call names (the host knows which were).
pub(crate) fn in_context(sources: Vec<Source>, narrowed: Option<&[String]>) -> Vec<Source> {
    match narrowed {
        None => sources,
        Some(ids) => sources
            .into_iter()
            .filter(|s| ids.contains(&s.id))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_capped_and_stripped_of_controls() {
        let s = Source::host(format!("a\u{0}b\n{}", "x".repeat(500)), 1);
        let label = s.label.unwrap();
        assert!(label.starts_with("abx"));
        assert_eq!(label.chars().count(), MAX_SOURCE_LABEL_CHARS);
    }

    #[test]
    fn narrowing_keeps_only_named_sources() {
        let a = Source::host("a", 1);
        let b = Source::host("b", 2);
        let all = vec![a.clone(), b.clone()];
        assert_eq!(in_context(all.clone(), None), all);
        assert_eq!(
            in_context(all.clone(), Some(std::slice::from_ref(&b.id))),
            vec![b]
        );
        assert!(in_context(all, Some(&[])).is_empty());
    }

    #[test]
    fn describe_names_tool_call_and_label() {
        let s = Source::tool_result("read_email", "call-7", None, 5, Some("from x".into()));
        let d = s.describe();
        assert!(d.contains("read_email call call-7"), "{d}");
        assert!(d.contains("\"from x\""), "{d}");
        assert!(d.contains(&s.id), "{d}");
    }
}
