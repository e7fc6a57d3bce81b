//! Small conversions the store backends share.

use std::time::Duration;

/// Migration 2 of both SQL backends: the indexes the purge uses (idempotency expiry, ledger
/// time). The statements are the same in SQLite and PostgreSQL.
pub const PURGE_INDEXES: &str = r#"
CREATE INDEX IF NOT EXISTS toolguard_idempotency_expiry ON toolguard_idempotency (expires_at_ms);
CREATE INDEX IF NOT EXISTS toolguard_ledger_time ON toolguard_ledger (at_ms);
"#;

/// Migration 3 of both SQL backends: session-ledger reservations (a hold per entry, and the
/// scopes it holds). The statements are the same in SQLite and PostgreSQL.
pub const LEDGER_HOLDS: &str = r#"
CREATE TABLE IF NOT EXISTS toolguard_holds (
    entry TEXT PRIMARY KEY,
    amount BIGINT NOT NULL,
    until_ms BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS toolguard_hold_scopes (
    entry TEXT NOT NULL REFERENCES toolguard_holds (entry) ON DELETE CASCADE,
    scope TEXT NOT NULL,
    PRIMARY KEY (scope, entry)
);
CREATE INDEX IF NOT EXISTS toolguard_hold_scopes_entry ON toolguard_hold_scopes (entry);
"#;

/// The live reservations of one scope: `$1`/`?1` scope, `$2`/`?2` now.
pub const HELD_SQLITE: &str = "SELECT COALESCE(SUM(h.amount), 0) FROM toolguard_hold_scopes s
     JOIN toolguard_holds h ON h.entry = s.entry WHERE s.scope = ?1 AND h.until_ms > ?2";

/// A fresh owner token.
pub fn new_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Whole milliseconds of `d`, saturating.
pub fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// `v` as a signed database integer, saturating.
pub fn i64_of(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A database integer as `u64`; negative values read as 0.
pub fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
