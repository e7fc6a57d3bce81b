//! The user's own words, for per-argument provenance behind the gateway.
//!
//! With `[flow] mode = "per_argument"`, a value the user typed (an IBAN, an address, a name) is
//! trusted even where untrusted content also holds it, and a destination the user named runs
//! unattended. Behind the gateway the client application says what the user typed: the text of
//! the user's current turn in a request's `_meta` under [`USER_INPUT_META`], registered in the
//! caller's session before the call runs (as `Dispatcher::add_trusted_input` does for a host
//! in the same process). The application sets it from its own record of the conversation,
//! never from the model's output; text the user pasted from elsewhere is as untrusted as its
//! origin.
//!
//! ```json
//! {"method": "tools/call", "params": {"name": "send_money", "arguments": {},
//!   "_meta": {"toolguard/userInput": "Pay DE89370400440532013000 the 12 euros for the rent"}}}
//! ```
//!
//! The same turn sent again with every call of that turn is registered once per session.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use serde_json::Value;

/// The `_meta` key of a request that carries the text of the user's current turn.
pub const USER_INPUT_META: &str = "toolguard/userInput";

/// The longest user turn accepted, in bytes.
pub const MAX_USER_INPUT: usize = 16 << 10;

/// Sessions remembered at most; beyond, the map starts again (a turn is then registered anew).
const MAX_REMEMBERED: usize = 4096;

/// The last turn registered per session, so that a turn sent with every call is registered
/// once.
#[derive(Debug, Default)]
pub(crate) struct UserInputs {
    last: Mutex<HashMap<String, u64>>,
}

impl UserInputs {
    /// Whether `text` is new for `session` (and remembers it).
    pub(crate) fn is_new(&self, session: &str, text: &str) -> bool {
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        let digest = hasher.finish();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if last.get(session) == Some(&digest) {
            return false;
        }
        if last.len() >= MAX_REMEMBERED {
            last.clear();
        }
        last.insert(session.to_owned(), digest);
        true
    }
}

/// Checks the value under [`USER_INPUT_META`]; `Err` says what is wrong.
pub(crate) fn check_user_input(value: &Value) -> Result<&str, String> {
    value
        .as_str()
        .filter(|s| s.len() <= MAX_USER_INPUT)
        .ok_or_else(|| {
            format!(
                "`_meta[\"{USER_INPUT_META}\"]` carries the text of the user's current turn: a \
                 string of at most {MAX_USER_INPUT} bytes; nothing was done"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_turn_is_registered_once_per_session_and_bounded() {
        let inputs = UserInputs::default();
        assert!(inputs.is_new("a", "pay Bob"));
        assert!(!inputs.is_new("a", "pay Bob"));
        assert!(inputs.is_new("b", "pay Bob"));
        assert!(inputs.is_new("a", "pay Carol"));
        assert_eq!(check_user_input(&json!("pay Bob")), Ok("pay Bob"));
        assert!(check_user_input(&json!(7)).is_err());
        let long = "x".repeat(MAX_USER_INPUT + 1);
        assert!(check_user_input(&json!(long)).is_err());
    }
}
