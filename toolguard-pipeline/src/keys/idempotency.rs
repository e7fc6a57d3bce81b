//! Idempotency keys are used exactly as written, or refused.
//!
//! The sanitizer strips or folds some characters (controls, invisible and format characters,
//! Unicode normalization, confusables, percent and entity decoding, `+` as a space in forms,
//! case in e-mail domains and URL hosts, dot segments in paths). Two distinct keys that differ
//! only in such characters would become one key after sanitizing, and a second action would be
//! answered with the first one's stored outcome. So a key is accepted only if it consists of
//! characters no sanitizer step changes, whatever pattern or kind the tool declared for it.

/// Longest idempotency key.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;

/// Accepts `key` if it is 1 to [`MAX_IDEMPOTENCY_KEY_LEN`] characters from `A-Z a-z 0-9 . _ ~
/// = -`, at least one a letter or digit; otherwise returns a stable reason code: `empty`,
/// `too_long`, `non_ascii`, `control_char`, `whitespace`, `disallowed_char` or
/// `punctuation_only` (a key such as `-` or `..` is one every careless client sends).
///
/// A refused key is never cleaned: the call is refused (the caller's fix is to send a key such
/// as a UUID or a ULID).
pub fn check_idempotency_key(key: &str) -> Result<(), &'static str> {
    if key.is_empty() {
        return Err("empty");
    }
    if key.len() > MAX_IDEMPOTENCY_KEY_LEN {
        return Err("too_long");
    }
    for c in key.chars() {
        match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '~' | '=' | '-' => {}
            c if !c.is_ascii() => return Err("non_ascii"),
            c if c.is_ascii_control() => return Err("control_char"),
            ' ' => return Err("whitespace"),
            _ => return Err("disallowed_char"),
        }
    }
    if !key.bytes().any(|b| b.is_ascii_alphanumeric()) {
        return Err("punctuation_only");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_ordinary_keys() {
        for k in [
            "a",
            "550e8400-e29b-41d4-a716-446655440000",
            "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            "order_42.retry~1",
            "aGVsbG8=",
        ] {
            assert_eq!(check_idempotency_key(k), Ok(()), "{k}");
        }
        assert_eq!(check_idempotency_key(&"x".repeat(255)), Ok(()));
    }

    #[test]
    fn refuses_what_a_sanitizer_could_strip_or_fold() {
        let cases = [
            ("", "empty"),
            ("key\u{200b}1", "non_ascii"),
            ("key1\u{00ad}", "non_ascii"),
            ("k\u{0435}y", "non_ascii"),
            ("Zoe\u{0308}", "non_ascii"),
            ("\u{ff4b}ey", "non_ascii"),
            ("key\u{202e}1", "non_ascii"),
            ("key\u{e0041}", "non_ascii"),
            ("key\n1", "control_char"),
            ("key\t1", "control_char"),
            ("key\u{7f}", "control_char"),
            ("key 1", "whitespace"),
            (" key", "whitespace"),
            ("a%41", "disallowed_char"),
            ("a&amp;", "disallowed_char"),
            ("a+b", "disallowed_char"),
            ("a/./b", "disallowed_char"),
            ("x@EXAMPLE.com", "disallowed_char"),
            ("HTTP://x", "disallowed_char"),
            ("a\\b", "disallowed_char"),
            ("_", "punctuation_only"),
            ("-", "punctuation_only"),
            (".", "punctuation_only"),
            ("..", "punctuation_only"),
            ("~=-_.", "punctuation_only"),
        ];
        for (k, reason) in cases {
            assert_eq!(check_idempotency_key(k), Err(reason), "{k:?}");
        }
        assert_eq!(check_idempotency_key(&"x".repeat(256)), Err("too_long"));
    }
}
