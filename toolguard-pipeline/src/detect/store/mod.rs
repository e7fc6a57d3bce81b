//! Where the detector keeps its state, shared by every replica of a dispatcher: per scope the
//! recent marks of a rule (trimmed to the rule's window and count, so state stays bounded), the
//! alerts already raised (so replicas raise each once), and the responses in force per session
//! and per subject (a subject's response holds every session of the subject, also sessions
//! opened after it).
//!
//! Every backend applies [`Marks::admit`] atomically per scope: the in-memory store under a lock,
//! SQLite on its connection thread, PostgreSQL under a row lock, Redis in a Lua script.

mod memory;

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

pub use memory::MemoryDetectionStore;

use super::respond::ResponseKind;
use crate::clock::unix_millis;
use crate::store::StoreResult;
use crate::tool::BoxFuture;

/// One observed call in a rule's scope: the evidence an alert carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// Provider call id of the call.
    pub call_id: String,
    /// Sequence number of the call's audit entry (absent if the entry could not be written).
    pub audit_seq: Option<u64>,
    /// When the call finished, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// A distinct key (the subject, for rules counting distinct subjects): a newer mark with the
    /// same key replaces the older one, so the scope counts keys rather than calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The marks of one scope, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Marks(pub Vec<Mark>);

impl Marks {
    /// Adds `mark`, drops marks older than `window` before `now` and a mark with the same key,
    /// and keeps the newest `keep`. This is the one update every backend applies atomically.
    pub fn admit(&mut self, mark: Mark, window: Duration, keep: usize, now: SystemTime) {
        let from = unix_millis(now).saturating_sub(millis(window));
        self.0
            .retain(|m| m.at_ms > from && (mark.key.is_none() || m.key != mark.key));
        self.0.push(mark);
        let excess = self.0.len().saturating_sub(keep.max(1));
        self.0.drain(..excess);
    }
}

/// `d` in whole milliseconds, saturating.
#[doc(hidden)]
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The detector's state, in a store every replica shares.
pub trait DetectionStore: Send + Sync + 'static {
    /// Atomically applies [`Marks::admit`] to the marks of `scope` and returns them.
    fn observe<'a>(
        &'a self,
        scope: &'a str,
        mark: Mark,
        window: Duration,
        keep: usize,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Marks>>;

    /// Claims `key` for `ttl`: `true` for the first claim while no earlier claim is live, so of
    /// several replicas seeing one crossing exactly one raises the alert.
    fn claim<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>>;

    /// Puts `response` in force under [`SessionResponse::key`] (its session's, or its subject's
    /// when it has one), replacing the one in force there.
    fn respond<'a>(&'a self, response: &'a SessionResponse) -> BoxFuture<'a, StoreResult<()>>;

    /// The response in force under `session` (a key from [`session_key`] or [`subject_key`]) at
    /// `now`, if any.
    fn response<'a>(
        &'a self,
        session: &'a str,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<SessionResponse>>>;

    /// Removes the response in force under `session` (a key from [`session_key`] or
    /// [`subject_key`]); returns whether there was one.
    fn lift<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<bool>>;
}

/// The store key of a session's response: tenant and session, length-prefixed.
pub fn session_key(tenant: &str, session: &str) -> String {
    crate::store::tenant_key(tenant, ':', session)
}

/// The store key of a subject's response: tenant and subject, length-prefixed, apart from every
/// session key (another separator).
pub fn subject_key(tenant: &str, subject: &str) -> String {
    crate::store::tenant_key(tenant, '#', subject)
}

/// Whether `response` is in force at `now_ms` (a hold has no end; a block ends).
#[doc(hidden)]
pub fn live(response: &SessionResponse, now_ms: u64) -> bool {
    response.until_ms.is_none_or(|until| now_ms < until)
}

/// A response in force for one session, or for every session of one subject (when the alert
/// that put it in force was counted per subject: `subject` is set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionResponse {
    /// Tenant.
    pub tenant: String,
    /// Session id (of a subject's response: the session whose call raised the alert).
    pub session: String,
    /// The subject whose every session the response holds; `None` for a session's response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// Hold or block.
    pub kind: ResponseKind,
    /// The rule whose alert put it in force.
    pub rule: String,
    /// The call that raised the alert.
    pub call_id: String,
    /// When it was put in force, in milliseconds since the Unix epoch.
    pub since_ms: u64,
    /// When a block ends; a hold lasts until lifted.
    pub until_ms: Option<u64>,
}

impl SessionResponse {
    /// The store key it is kept under: its subject's ([`subject_key`]) when it has one, else
    /// its session's ([`session_key`]).
    pub fn key(&self) -> String {
        match &self.subject {
            Some(subject) => subject_key(&self.tenant, subject),
            None => session_key(&self.tenant, &self.session),
        }
    }
}
