//! Quickstart: declare two tools, dispatch a good call and several bad ones, print each status
//! and the audit trail.
//!
//! Run with `cargo run --example quickstart`. `tests/example_quickstart.rs` checks every line it
//! prints.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;
use toolguard::{
    Dispatcher, MemoryAuditSink, Owned, Principal, ToolCall, ToolContext, ToolError, tool,
};

/// A note in a tiny multi-tenant notebook.
struct Note {
    tenant: String,
    owner: String,
    text: String,
}

impl Owned for Note {
    fn owner_tenant(&self) -> &str {
        &self.tenant
    }
    fn owner_subject(&self) -> Option<&str> {
        Some(&self.owner)
    }
}

/// The application state the tools share.
#[derive(Default)]
struct Notebook {
    notes: Mutex<HashMap<String, Note>>,
}

/// What `read_note` returns.
#[derive(Serialize, JsonSchema)]
struct NoteText {
    /// The note's text.
    text: String,
}

/// Reads one of the caller's notes.
// The caller's own notes, kept by the application: `trusted` text, not someone else's words.
#[tool(read_only, risk = "medium", output = "trusted")]
async fn read_note(
    ctx: &ToolContext<Notebook>,
    /// Note id, like `n-1`.
    #[arg(kind = "identifier", max_len = 32)]
    note_id: String,
) -> Result<NoteText, ToolError> {
    let notes = ctx.state().notes.lock().unwrap();
    // Missing and someone else's look the same to the model: `not_found`.
    let note = ctx.resource(notes.get(&note_id))?;
    Ok(NoteText {
        text: note.text.clone(),
    })
}

/// Appends a line to one of the caller's notes.
#[tool(risk = "medium", idempotent)]
async fn append_line(
    ctx: &ToolContext<Notebook>,
    /// Note id, like `n-1`.
    #[arg(kind = "identifier", max_len = 32)]
    note_id: String,
    /// The line to append.
    #[arg(min_len = 1, max_len = 200)]
    line: String,
) -> Result<usize, ToolError> {
    let mut notes = ctx.state().notes.lock().unwrap();
    let note = notes.get_mut(&note_id).ok_or_else(ToolError::not_found)?;
    ctx.check_owner(&note.tenant, Some(&note.owner))?;
    note.text.push('\n');
    note.text.push_str(&line);
    Ok(note.text.lines().count())
}

#[tokio::main]
#[allow(dead_code)] // the test includes this file as a module and calls `run` only
async fn main() {
    for line in run().await {
        println!("{line}");
    }
}

/// Runs the quickstart and returns the lines it prints.
pub async fn run() -> Vec<String> {
    let mut lines = Vec::new();
    let notebook = Notebook::default();
    for (id, tenant, owner) in [("n-1", "acme", "alice"), ("n-2", "acme", "bob")] {
        notebook.notes.lock().unwrap().insert(
            id.into(),
            Note {
                tenant: tenant.into(),
                owner: owner.into(),
                text: format!("{owner}'s note"),
            },
        );
    }
    let audit = Arc::new(MemoryAuditSink::new());
    let dispatcher = Dispatcher::builder(notebook)
        .tool(ReadNote)
        .tool(AppendLine)
        .audit(audit.clone())
        .build()
        .expect("the registry is valid");

    // Identity comes from the host's auth layer, never from the model.
    let alice = Principal::new("acme", "alice", "session-1");

    let calls = [
        (
            "a good call",
            ToolCall::new(
                "c1",
                "append_line",
                r#"{"note_id":"n-1","line":"buy milk","idempotency_key":"turn-1-append"}"#,
            ),
        ),
        (
            "the same call retried",
            ToolCall::new(
                "c2",
                "append_line",
                r#"{"note_id":"n-1","line":"buy milk","idempotency_key":"turn-1-append"}"#,
            ),
        ),
        (
            "duplicate keys",
            ToolCall::new("c3", "read_note", r#"{"note_id":"n-1","note_id":"n-2"}"#),
        ),
        (
            "a tool that does not exist",
            ToolCall::new("c4", "delete_everything", "{}"),
        ),
        (
            "an extra field claiming identity",
            ToolCall::new(
                "c5",
                "read_note",
                json!({"note_id": "n-1", "tenant": "acme"}),
            ),
        ),
        (
            "an injection in an identifier",
            ToolCall::new("c6", "read_note", json!({"note_id": "n-1' OR 1=1 --"})),
        ),
        (
            "someone else's note",
            ToolCall::new("c7", "read_note", json!({"note_id": "n-2"})),
        ),
        (
            "a note that does not exist",
            ToolCall::new("c8", "read_note", json!({"note_id": "n-9"})),
        ),
        (
            "a good read",
            ToolCall::new("c9", "read_note", json!({"note_id": "n-1"})),
        ),
    ];
    for (what, call) in calls {
        let out = dispatcher.dispatch(call, &alice).await;
        let detail = match (&out.output, &out.message) {
            (Some(o), _) => o.data.to_string(),
            (None, Some(m)) => m.clone(),
            _ => String::new(),
        };
        let replay = if out.replayed {
            " (replayed, nothing executed)"
        } else {
            ""
        };
        lines.push(format!(
            "{what:<34} -> {:<18} {detail}{replay}",
            out.status.as_str()
        ));
    }

    lines.push(String::new());
    lines.push("audit trail:".to_owned());
    for e in audit.entries() {
        lines.push(format!(
            "  #{:<2} {:<18} {:<18} stage={:<11} reason={:<16} hash={}",
            e.seq,
            e.record.tool,
            e.record.status.map(|s| s.as_str()).unwrap_or("-"),
            format!("{:?}", e.record.stage).to_lowercase(),
            e.record.reason.as_deref().unwrap_or("-"),
            e.hash.get(..12).unwrap_or(&e.hash),
        ));
    }
    lines.push(match audit.verify() {
        Ok(()) => format!("hash chain verifies ({} entries)", audit.len()),
        Err(broken) => format!("hash chain broken: {broken}"),
    });
    lines
}
