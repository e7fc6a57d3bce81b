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
//! - Per argument (the precise mode, [`FlowPolicy::per_argument`]): each source also keeps the
//!   keyed hashes of the values in its content that can steer an action ([`values`],
//!   [`ValueKey`]); the host registers what the user said with
//!   [`Dispatcher::add_trusted_input`](crate::Dispatcher::add_trusted_input) (and trusted
//!   tools' outputs record their values), and each argument of a judged call gets an [`Origin`]
//!   and a [`Role`]. The flow policy then holds only what untrusted content steers: a
//!   destination or an amount from it, a selector of a high-risk change, a value or an address
//!   copied into the content of a state change, read content leaving to a destination that is
//!   not trusted, and a destination of egress or a high-risk change the user never named
//!   ([`FlowPolicy::per_argument`]).
//! - Every path that hands an untrusted result to a session records the source: the call, an
//!   idempotency replay (to another session, or after the sources were cleared), an approved
//!   call and its retry, an operation status carrying the result. A narrowing list that names
//!   no source of the session, or an unknown one, narrows nothing.
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
mod hash;
mod number_words;
mod origin;
pub(crate) mod result_fields;
mod store;
pub mod values;

pub use flow::{CAUSE, FlowAction, FlowMode, FlowPolicy, FlowRule};
pub use hash::{MAX_VALUES_PER_SESSION, MAX_VALUES_PER_SOURCE, ValueHash, ValueKey, ValueSet};
pub use origin::{ArgumentOrigin, Origin, ValueIndex, origins, with_origins};
pub use store::{ProvenanceStore, session_key, trusted_key};
pub use toolguard_rules::Role;

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

/// Most sources kept per session, and most trusted records; the oldest are dropped first. A
/// session holding this many may have dropped some, so the precise mode judges a value placed
/// nowhere in it as one that may come from them ([`ArgumentOrigin::unplaced`]), never as the
/// model's own.
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
    /// The keyed hashes of the values in its content that can steer an action (see
    /// [`values`]); never their plaintext. Absent in records written before values were kept.
    #[serde(default, skip_serializing_if = "ValueSet::is_empty")]
    pub values: ValueSet,
    /// The content held more than [`MAX_VALUES_PER_SOURCE`] values (or more than
    /// [`values::MAX_SCANNED_BYTES`]): a value placed nowhere may still come from it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub values_truncated: bool,
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
            values: ValueSet::default(),
            values_truncated: false,
        }
    }

    /// A record of trusted values (a user turn, a trusted tool's output), labelled `label`.
    /// Kept under [`trusted_key`], beside the session's sources.
    pub fn trusted(label: impl Into<String>, at_ms: u64) -> Self {
        Source {
            id: format!("tru_{}", uuid::Uuid::new_v4().simple()),
            ..Source::host(label, at_ms)
        }
    }

    /// The same source with the keyed hashes of `values` (canonical forms).
    pub fn with_values(mut self, key: &ValueKey, values: &[String]) -> Self {
        let (set, cut) = key.hash_all(values);
        self.values = set;
        self.values_truncated |= cut;
        self
    }

    /// The same source with the values of `text` (plain text).
    pub fn with_text(self, key: &ValueKey, text: &str) -> Self {
        let mut values = Vec::new();
        values::text_values(text, &mut values);
        let cut = text.len() > values::MAX_SCANNED_BYTES;
        let mut s = self.with_values(key, &values);
        s.values_truncated |= cut;
        s
    }

    /// The same source with the values of what the user typed: those of [`with_text`](Self::with_text)
    /// and each word and run of two and three words ([`values::input_values`]).
    pub fn with_input(self, key: &ValueKey, text: &str) -> Self {
        let mut values = Vec::new();
        values::input_values(text, &mut values);
        let mut s = self.with_values(key, &values);
        s.values_truncated |= text.len() > values::MAX_SCANNED_BYTES;
        s
    }

    /// The same source with the values of `doc` (a tool's JSON result); marked
    /// [`values_truncated`](Self::values_truncated) when its strings were longer than are read.
    pub fn with_json(self, key: &ValueKey, doc: &serde_json::Value) -> Self {
        let mut values = Vec::new();
        let cut = values::json_values_read(doc, &mut values);
        let mut s = self.with_values(key, &values);
        s.values_truncated |= cut;
        s
    }

    /// The source without its values (as approval requests keep it: ids and labels for the
    /// reviewer, not the hashes).
    pub(crate) fn without_values(&self) -> Self {
        Source {
            values: ValueSet::default(),
            values_truncated: false,
            ..self.clone()
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
            values: ValueSet::default(),
            values_truncated: false,
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
/// those the call names (the host knows which were). A list that names an id the session does
/// not have, or names none of its sources, narrows nothing: the session stays tainted by all of
/// them (a stale or mistaken list never launders content).
pub(crate) fn in_context(sources: Vec<Source>, narrowed: Option<&[String]>) -> Vec<Source> {
    let Some(ids) = narrowed else {
        return sources;
    };
    let known = |id: &String| sources.iter().any(|s| &s.id == id);
    if ids.is_empty() || !ids.iter().all(known) {
        return sources;
    }
    sources
        .into_iter()
        .filter(|s| ids.contains(&s.id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_longer_than_is_read_is_marked_cut() {
        let key = ValueKey::random();
        let short = serde_json::json!({"text": "pay GB33 BUKB 2020 1555 5555 55"});
        assert!(
            !Source::host("a", 1)
                .with_json(&key, &short)
                .values_truncated
        );
        // The account comes after more text than is read: it may be missing.
        let filler = "x ".repeat(values::MAX_SCANNED_BYTES / 2);
        let long = serde_json::json!(["pay someone", filler, "GB33 BUKB 2020 1555 5555 55"]);
        assert!(Source::host("b", 1).with_json(&key, &long).values_truncated);
        let text = format!("{filler} GB33 BUKB 2020 1555 5555 55");
        assert!(Source::host("c", 1).with_text(&key, &text).values_truncated);
        assert!(
            Source::trusted("d", 1)
                .with_input(&key, &text)
                .values_truncated
        );
        // An image, audio or blob cannot be read for values: a model may read one anyway.
        for binary in [
            serde_json::json!({"content": [{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}]}),
            serde_json::json!([{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"}]),
            serde_json::json!({"contents": [{"uri": "file:///scan.pdf", "blob": "JVBERi0x"}]}),
        ] {
            let s = Source::host("e", 1).with_json(&key, &binary);
            assert!(s.values_truncated, "{binary}");
        }
        // The text beside it is still read; a `data` field of other content is text.
        let mixed = serde_json::json!([
            {"type": "image", "data": "iVBORw0KGgo="},
            {"type": "text", "text": "pay GB33 BUKB 2020 1555 5555 55"},
        ]);
        let s = Source::host("f", 1).with_json(&key, &mixed);
        assert!(s.values_truncated && !s.values.is_empty());
        let plain = serde_json::json!({"type": "row", "data": "GB33 BUKB 2020 1555 5555 55"});
        let s = Source::host("g", 1).with_json(&key, &plain);
        assert!(!s.values_truncated && !s.values.is_empty());
    }

    #[test]
    fn labels_are_capped_and_stripped_of_controls() {
        let s = Source::host(format!("a\u{0}b\n{}", "x".repeat(500)), 1);
        let label = s.label.unwrap();
        assert!(label.starts_with("abx"));
        assert_eq!(label.chars().count(), MAX_SOURCE_LABEL_CHARS);
    }

    #[test]
    fn narrowing_keeps_only_named_sources_and_unknown_ids_keep_all() {
        let a = Source::host("a", 1);
        let b = Source::host("b", 2);
        let all = vec![a.clone(), b.clone()];
        assert_eq!(in_context(all.clone(), None), all);
        assert_eq!(
            in_context(all.clone(), Some(std::slice::from_ref(&b.id))),
            vec![b.clone()]
        );
        assert_eq!(in_context(all.clone(), Some(&[])), all);
        let unknown = vec![b.id.clone(), "src_unknown".to_owned()];
        assert_eq!(in_context(all.clone(), Some(&unknown)), all);
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
