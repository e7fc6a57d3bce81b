//! Session boundaries of stdio clients.
//!
//! Provenance is kept per session: once a session has read untrusted content, its high-risk
//! actions wait for a human. A stdio proxy serves one client, so without boundaries its whole
//! life would be one session. A client marks its own sessions with a session id in a request's
//! `_meta` ([`SESSION_META`], e.g. one per conversation): each distinct id is a session of its
//! own. And `[proxy] session_idle` ends a session after that long without a request of it: the
//! next request starts a new one.
//!
//! ```json
//! {"method": "tools/call", "params": {"name": "send_money", "arguments": {},
//!   "_meta": {"toolguard/session": "conversation-42"}}}
//! ```

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The `_meta` key of a request that names the client's session: 1 to [`MAX_SESSION_LEN`]
/// ASCII letters, digits, `.`, `_`, `:` and `-`.
pub const SESSION_META: &str = "toolguard/session";

/// The longest session id a client may send.
pub const MAX_SESSION_LEN: usize = 128;

/// Sessions tracked at most; beyond, the one idle longest is forgotten (its next request
/// starts a new session).
const MAX_SESSIONS: usize = 10_000;

/// The sessions of the clients of one proxy: per client session id, the provenance session in
/// force and when it was last used.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    slots: Mutex<HashMap<String, Slot>>,
}

#[derive(Debug)]
struct Slot {
    /// How many sessions this client id has had (1 for the first).
    generation: u64,
    last: Instant,
}

impl Sessions {
    /// The provenance session of a request at `now`: `base` for a client that names none,
    /// `base/<client>` for one that does, with `~<n>` appended from the second session on (a
    /// session is renewed once `idle` passed since its last request).
    pub(crate) fn resolve(
        &self,
        base: &str,
        client: Option<&str>,
        idle: Option<Duration>,
        now: Instant,
    ) -> String {
        let key = client.unwrap_or_default();
        let mut slots = match self.slots.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !slots.contains_key(key) && slots.len() >= MAX_SESSIONS {
            forget_longest_idle(&mut slots);
        }
        let slot = slots.entry(key.to_owned()).or_insert(Slot {
            generation: 1,
            last: now,
        });
        if idle.is_some_and(|idle| now.saturating_duration_since(slot.last) >= idle) {
            slot.generation += 1;
        }
        slot.last = now;
        let mut id = match client {
            Some(client) => format!("{base}/{client}"),
            None => base.to_owned(),
        };
        if slot.generation > 1 {
            id.push_str(&format!("~{}", slot.generation));
        }
        id
    }
}

fn forget_longest_idle(slots: &mut HashMap<String, Slot>) {
    if let Some(oldest) = slots
        .iter()
        .min_by_key(|(_, s)| s.last)
        .map(|(k, _)| k.clone())
    {
        slots.remove(&oldest);
    }
}

/// Checks a client's session id (the value under [`SESSION_META`]); `Err` says what is wrong.
pub(crate) fn check_session_id(value: &serde_json::Value) -> Result<&str, String> {
    let ok = value.as_str().filter(|s| {
        !s.is_empty()
            && s.len() <= MAX_SESSION_LEN
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
    });
    ok.ok_or_else(|| {
        format!(
            "`_meta[\"{SESSION_META}\"]` names the client's session: a string of 1 to \
             {MAX_SESSION_LEN} ASCII letters, digits, `.`, `_`, `:` or `-`; nothing was done"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_client_session_is_its_own_and_idle_sessions_are_renewed() {
        let sessions = Sessions::default();
        let t0 = Instant::now();
        let idle = Some(Duration::from_secs(60));
        assert_eq!(sessions.resolve("p", None, idle, t0), "p");
        assert_eq!(sessions.resolve("p", Some("a"), idle, t0), "p/a");
        assert_eq!(sessions.resolve("p", Some("b"), idle, t0), "p/b");
        // Used within the idle time, a session stays.
        let t1 = t0 + Duration::from_secs(59);
        assert_eq!(sessions.resolve("p", Some("a"), idle, t1), "p/a");
        // Idle for the whole time: a new one, for that client id only.
        let t2 = t1 + Duration::from_secs(60);
        assert_eq!(sessions.resolve("p", Some("a"), idle, t2), "p/a~2");
        assert_eq!(sessions.resolve("p", Some("a"), idle, t2), "p/a~2");
        assert_eq!(sessions.resolve("p", None, idle, t2), "p~2");
        // Without an idle time, a session lasts.
        assert_eq!(sessions.resolve("p", Some("c"), None, t0), "p/c");
        let later = t0 + Duration::from_secs(86_400);
        assert_eq!(sessions.resolve("p", Some("c"), None, later), "p/c");
    }

    #[test]
    fn session_ids_are_short_plain_strings() {
        assert_eq!(
            check_session_id(&json!("conv-42:a.b_c")),
            Ok("conv-42:a.b_c")
        );
        let long = "x".repeat(MAX_SESSION_LEN + 1);
        for bad in [
            json!(""),
            json!(7),
            json!(null),
            json!("a/b"),
            json!("a~2"),
            json!(long),
        ] {
            let err = check_session_id(&bad).unwrap_err();
            assert!(err.contains(SESSION_META), "{bad}: {err}");
        }
    }
}
