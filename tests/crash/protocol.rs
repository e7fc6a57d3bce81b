//! The line protocol between the crash harness and its dispatcher processes: one JSON request
//! line, one JSON answer line, one TCP connection per request on 127.0.0.1.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The tenant every call of the harness runs in.
pub const TENANT: &str = "acme";

/// The transfer tool's name.
pub const TOOL: &str = "transfer";

/// Amounts above this wait for a teller's approval.
pub const APPROVAL_OVER: u64 = 50_000;

/// Cumulative amount per session (one hour window, deny beyond).
pub const SESSION_LIMIT: u64 = 150_000;

/// Cumulative amount per subject across its sessions (one hour window, deny beyond).
pub const SUBJECT_LIMIT: u64 = 250_000;

/// The host keys every replica shares (`id:hex secret`).
pub const HOST_KEYS: (&str, [u8; 32]) = ("crash-k1", [7; 32]);

/// The SQLite file every process of a `sqlite` run opens, in the run's directory.
pub const SQLITE_FILE: &str = "store.db";

/// What a client asks a dispatcher process.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// A transfer under idempotency key `key` (also sent as the `reference` argument).
    Transfer {
        /// Idempotency key (host-supplied).
        key: String,
        /// The call id of this attempt.
        call_id: String,
        /// Caller.
        subject: String,
        /// Caller's session.
        session: String,
        /// Amount in cents.
        amount: u64,
    },
    /// The operation-status query (and reconciliation) of an operation.
    Status {
        /// Caller.
        subject: String,
        /// Caller's session.
        session: String,
        /// Operation id.
        operation_id: String,
    },
    /// The ids of the pending approval requests of the tenant.
    Pending,
    /// A teller's decision on approval request `id`.
    Decide {
        /// Approval request id.
        id: String,
        /// The deciding teller.
        teller: String,
        /// Approve (else reject).
        approve: bool,
    },
}

/// A dispatcher process's answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Answer {
    /// The call's status (`ok`, `pending_approval`, ...), or the query's (`not_found`,
    /// `unavailable`, `ok` for a report).
    pub status: String,
    /// Reason code, if any.
    pub reason: Option<String>,
    /// Operation id of the call.
    pub operation_id: Option<String>,
    /// Approval request id of a pending call.
    pub approval_id: Option<String>,
    /// The outcome was replayed.
    pub replayed: bool,
    /// For a status query: the operation's state (`ok`, `failed`, `outcome_unknown`, ...).
    pub state: Option<String>,
    /// For a status query: the state was just resolved by reconciliation.
    pub reconciled: bool,
    /// For `pending`: the request ids.
    pub ids: Vec<String>,
}

/// One executed transfer, as the side-effect log holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effect {
    /// Operation id the pipeline gave the execution.
    pub operation_id: String,
    /// The transfer's reference (its idempotency key).
    pub reference: String,
    /// Caller.
    pub subject: String,
    /// Caller's session.
    pub session: String,
    /// Amount in cents.
    pub amount: u64,
    /// The process that executed it.
    pub node: u32,
}

/// Reads every complete line of the side-effect log at `path`.
pub fn read_effects(path: &Path) -> std::io::Result<Vec<Effect>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}
