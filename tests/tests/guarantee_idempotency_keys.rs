//! Two distinct idempotency keys never become one through sanitizing: a key is accepted only if
//! no sanitizer step would change it, whatever kind the tool declared for the key field.

use toolguard::check_idempotency_key;
use toolguard::sanitize::{Sanitizer, Verdict};
use toolguard::spec::{FieldKind, FieldSpec};

const ALPHABET: &str = "ABCZabcz0189._~=-";

fn field(kind: FieldKind) -> FieldSpec {
    FieldSpec::new("idempotency_key").with_kind(kind)
}

/// The sanitizer really folds these variants into the plain key (the attack is real), and every
/// variant is refused by the key check.
#[test]
fn variants_the_sanitizer_folds_are_refused() {
    let s = Sanitizer::new();
    let text = field(FieldKind::Text);
    let plain = "key1";
    let variants = [
        "key\u{200b}1",
        "key1\u{00ad}",
        "\u{feff}key1",
        "key\u{2060}1",
        "key1\u{e0041}",
    ];
    let mut folded = 0;
    for v in variants {
        let out = s.sanitize_str("t", &text, v);
        if out.verdict == Verdict::Stripped && out.value.as_deref() == Some(plain) {
            folded += 1;
        }
        assert!(check_idempotency_key(v).is_err(), "{v:?} must be refused");
    }
    assert!(
        folded > 0,
        "at least one variant is folded by the sanitizer"
    );
    assert_eq!(check_idempotency_key(plain), Ok(()));
}

/// Every accepted key of up to three characters over the allowed alphabet (and some longer
/// ones) passes every string kind unchanged or is blocked outright, never rewritten.
#[test]
fn accepted_keys_are_never_rewritten() {
    let s = Sanitizer::new();
    let kinds = [
        FieldKind::Identifier,
        FieldKind::Text,
        FieldKind::Name,
        FieldKind::Email,
        FieldKind::Url,
    ];
    let chars: Vec<char> = ALPHABET.chars().collect();
    let mut keys: Vec<String> = Vec::new();
    for a in &chars {
        keys.push(a.to_string());
        for b in &chars {
            keys.push(format!("{a}{b}"));
            for c in &chars {
                keys.push(format!("{a}{b}{c}"));
            }
        }
    }
    keys.push("550e8400-e29b-41d4-a716-446655440000".into());
    keys.push("01ARZ3NDEKTSV4RRFFQ69G5FAV".into());
    keys.push("aGVsbG8gd29ybGQ=".into());
    // A key of punctuation only (`-`, `..`) is refused outright (`punctuation_only`).
    let (keys, punctuation): (Vec<String>, Vec<String>) = keys
        .into_iter()
        .partition(|k| k.bytes().any(|b| b.is_ascii_alphanumeric()));
    for k in &punctuation {
        assert_eq!(check_idempotency_key(k), Err("punctuation_only"), "{k}");
    }
    let mut checked = 0;
    for k in &keys {
        assert_eq!(check_idempotency_key(k), Ok(()), "{k}");
        for kind in kinds {
            let out = s.sanitize_str("t", &field(kind), k);
            match out.verdict {
                Verdict::Clean => {
                    assert_eq!(out.value.as_deref(), Some(k.as_str()), "{k} {kind:?}")
                }
                Verdict::Blocked => {}
                Verdict::Stripped => panic!("{k:?} as {kind:?} was rewritten to {:?}", out.value),
                _ => panic!("a verdict this test does not know: {:?}", out.verdict),
            }
            checked += 1;
        }
    }
    assert!(checked > 20_000);
}
