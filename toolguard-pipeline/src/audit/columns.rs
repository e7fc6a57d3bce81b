//! What the SQLite and PostgreSQL audit sinks share: the indexed columns stored beside each
//! sealed record, and their consistency check.

use super::entry::AuditEntry;
use crate::store::encode::i64_of;

/// The columns every audit query selects, in this order.
pub const COLUMNS: &str = "seq, record, prev_hash, hash, time_ms, tenant, subject, tool, status";

/// The indexed copies of record fields, which must agree with the sealed record.
#[derive(Debug)]
pub struct Columns {
    pub time_ms: i64,
    pub tenant: String,
    pub subject: String,
    pub tool: String,
    pub status: Option<String>,
}

impl Columns {
    /// Whether the columns say what the sealed record says (an edit of a column alone shows).
    pub fn agree(&self, e: &AuditEntry) -> bool {
        self.time_ms == i64_of(e.record.time_ms)
            && self.tenant == e.record.tenant
            && self.subject == e.record.subject
            && self.tool == e.record.tool
            && self.status.as_deref() == e.record.status.map(|s| s.as_str())
    }
}

/// A query limit as a database integer.
pub fn limit_of(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}
