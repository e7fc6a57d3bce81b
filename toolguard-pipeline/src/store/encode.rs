//! Small conversions the store backends share.

use std::borrow::Cow;
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

/// A database's connection string as a `Debug` or a log line may show it: a URL without its user
/// and password (what its authority holds before the last `@`) and without the value of a
/// `password` query parameter, a key-value string (`host=db password=…`) with the password's
/// value left out.
pub fn without_credentials(connection: &str) -> Cow<'_, str> {
    let mut shown = Cow::Borrowed(connection);
    if let Some((scheme, rest)) = connection.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        if let Some(at) = authority.rfind('@') {
            shown = format!("{scheme}://…@{}", &rest[at + 1..]).into();
        }
    }
    if find_password(&shown).is_none() {
        return shown;
    }
    let mut out = String::with_capacity(shown.len());
    let mut rest = &*shown;
    while let Some(at) = find_password(rest) {
        let value = &rest[at..];
        out.push_str(&rest[..at]);
        out.push('…');
        rest = &value[password_value_len(value)..];
    }
    out.push_str(rest);
    out.into()
}

/// Where the value of the first `password=` key (case-insensitive, spaces allowed around `=`;
/// a key starts the text or follows a space, `?` or `&`) starts in `s`.
fn find_password(s: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(found) = lower[from..].find("password") {
        let start = from + found;
        let key_starts_word = start == 0
            || matches!(lower.as_bytes()[start - 1], b'?' | b'&')
            || lower.as_bytes()[start - 1].is_ascii_whitespace();
        let after = &s[start + "password".len()..];
        let trimmed = after.trim_start();
        if key_starts_word && let Some(value) = trimmed.strip_prefix('=') {
            let value = value.trim_start();
            return Some(s.len() - value.len());
        }
        from = start + "password".len();
    }
    None
}

/// The length of a key-value string's value at the start of `value`: quoted (`'…'`, with `\'`
/// and `\\` escapes) or up to the next space or `&`.
fn password_value_len(value: &str) -> usize {
    let bytes = value.as_bytes();
    if bytes.first() != Some(&b'\'') {
        return value
            .find(|c: char| c.is_whitespace() || c == '&')
            .unwrap_or(value.len());
    }
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\'' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::without_credentials;

    #[test]
    fn connection_strings_are_shown_without_their_secrets() {
        for (given, shown) in [
            ("redis://:hunter2@cache:6379/0", "redis://…@cache:6379/0"),
            ("rediss://app:p%40ss@cache:6380", "rediss://…@cache:6380"),
            (
                "postgres://app:hunter2@db/app?sslmode=require",
                "postgres://…@db/app?sslmode=require",
            ),
            ("redis://cache:6379/0?user=a", "redis://cache:6379/0?user=a"),
            ("unix:///run/redis.sock", "unix:///run/redis.sock"),
            (
                "host=db user=app password=hunter2 dbname=app",
                "host=db user=app password=… dbname=app",
            ),
            (
                "host=db PASSWORD = 'hun ter\\'2' port=5432",
                "host=db PASSWORD = … port=5432",
            ),
            ("host=db user=app", "host=db user=app"),
            (
                "postgres://db/app?user=app&password=hunter2&sslmode=require",
                "postgres://db/app?user=app&password=…&sslmode=require",
            ),
            (
                "postgres://app:a@db/app?password=hunter2",
                "postgres://…@db/app?password=…",
            ),
            ("host=db mypassword=x", "host=db mypassword=x"),
            ("", ""),
        ] {
            assert_eq!(without_credentials(given), shown, "{given}");
        }
    }
}
