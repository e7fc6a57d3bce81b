use serde::Serialize;
use schemars::JsonSchema;
use toolguard::{NoFreeText, ToolError, tool};

/// A message, several levels down a result.
#[derive(Serialize, JsonSchema)]
pub struct Message {
    /// What the sender wrote.
    pub body: Option<String>,
}

/// A mailbox whose type name says nothing about the text in it.
#[derive(Serialize, JsonSchema)]
pub struct Mailbox {
    /// Unread count.
    pub unread: u32,
    /// The messages.
    pub messages: Vec<Message>,
}

/// Summarizes the inbox without saying where the text in its result comes from.
#[tool(read_only)]
fn inbox_summary() -> Result<Mailbox, ToolError> {
    Ok(Mailbox {
        unread: 0,
        messages: Vec::new(),
    })
}

/// A result that claims to hold no text while a field can.
#[derive(Serialize, JsonSchema, NoFreeText)]
pub struct Claimed {
    /// A count.
    pub count: u32,
    /// A note someone wrote.
    pub note: String,
}

fn main() {}
