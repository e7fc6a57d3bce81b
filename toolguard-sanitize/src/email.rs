//! E-mail addresses (`email` fields and [`crate::kinds::Email`]): the `email_address` parser
//! decides what an address is, and the sanitizer's own rules narrow it (no look-alike forms, no
//! quoted local parts or shell metacharacters, no domain mixing scripts, the field's domain
//! allowlist).
//!
//! Most addresses are plain ASCII (`ann.obrien@example.com`). [`plain_domain`] recognizes a
//! narrow form of them that the parser accepts and that every further rule lets through, so
//! such an address skips the parser and goes straight to the allowlist; anything else, valid
//! or not, goes the parser's way. The differential tests run both ways over generated
//! addresses and require the same decision.

use std::borrow::Cow;

use unicode_security::MixedScript;

/// Longest local part of a plain address (the parser's limit).
const LOCAL_MAX: usize = 64;
/// Longest domain of a plain address (the parser's limit).
const DOMAIN_MAX: usize = 254;
/// Longest label of a plain address's domain (the parser's limit).
const LABEL_MAX: usize = 63;

/// Checks that `value` is a plain `local@domain` address whose domain is in `domains` (when
/// the field has an allowlist): `email_invalid`, `mixed_script` or `email_domain_not_allowed`.
pub(crate) fn check_email(value: &str, domains: Option<&[String]>) -> Result<(), &'static str> {
    match plain_domain(value) {
        Some(raw) => {
            let domain = lower(raw);
            allowed(&domain, &domain, domains)
        }
        None => check_parsed(value, domains),
    }
}

/// The domain of `value` when it is a plain ASCII address; `None` when it is not (which says
/// nothing of its validity). Plain means:
/// - exactly one `@`, with a local part of 1 to [`LOCAL_MAX`] bytes before it and a domain of
///   at most [`DOMAIN_MAX`] bytes after it;
/// - a local part of atoms (ASCII letters, digits, `_`, `+`, `-`) joined by single dots;
/// - a domain of at least two labels joined by single dots, each 1 to [`LABEL_MAX`] ASCII
///   letters, digits and `-`, starting and ending with a letter or digit, without `--` as
///   its third and fourth characters (so no `xn--` label to decode).
///
/// The parser (options of [`check_parsed`]) accepts every such address as it is: no space, so
/// no display name; one `@`, so its split is this one; a local part that is a dot-atom within
/// its length limit, neither quoted nor starting with `<`; a domain that is no literal, whose
/// labels are atoms within the parser's limits that start and end with a letter or digit, with
/// a TLD. Every rule [`check_parsed`] adds holds too: the address is ASCII (so in NFKC and of
/// one script), its local part has no `"` `` ` `` `$` `{` `}`, its domain no trailing dot and
/// no `xn--` label.
fn plain_domain(value: &str) -> Option<&str> {
    let (local, domain) = value.split_once('@')?;
    if local.is_empty() || local.len() > LOCAL_MAX || domain.len() > DOMAIN_MAX {
        return None;
    }
    // The byte before the current one, a dot at the start: two dots in a row, a dot first or a
    // dot last make an empty atom.
    let mut prev = b'.';
    for &b in local.as_bytes() {
        if b == b'.' {
            if prev == b'.' {
                return None;
            }
        } else if !(b.is_ascii_alphanumeric() || matches!(b, b'_' | b'+' | b'-')) {
            return None;
        }
        prev = b;
    }
    if prev == b'.' {
        return None;
    }
    let mut labels = 0usize;
    for label in domain.as_bytes().split(|&b| b == b'.') {
        if !is_plain_label(label) {
            return None;
        }
        labels += 1;
    }
    (labels >= 2).then_some(domain)
}

/// A label of a plain address's domain (see [`plain_domain`]).
fn is_plain_label(label: &[u8]) -> bool {
    let (Some(first), Some(last)) = (label.first(), label.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && label.len() <= LABEL_MAX
        && label
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-')
        && label.get(2..4) != Some(&b"--"[..])
}

/// `domain` in lower case, borrowed when it already is (the common case).
fn lower(domain: &str) -> Cow<'_, str> {
    if domain
        .bytes()
        .any(|b| !b.is_ascii() || b.is_ascii_uppercase())
    {
        Cow::Owned(domain.to_lowercase())
    } else {
        Cow::Borrowed(domain)
    }
}

/// [`check_email`] through the parser: any address.
fn check_parsed(value: &str, domains: Option<&[String]>) -> Result<(), &'static str> {
    let options = email_address::Options::default()
        .without_display_text()
        .without_domain_literal()
        .with_required_tld();
    let addr = email_address::EmailAddress::parse_with_options(value, options)
        .map_err(|_| "email_invalid")?;
    if addr.as_str() != value {
        return Err("email_invalid");
    }
    // Fullwidth or other compatibility forms (`ｂｏｂ@`) are look-alikes, not addresses.
    if !value.is_ascii()
        && !icu_normalizer::ComposingNormalizerBorrowed::new_nfkc().is_normalized(value)
    {
        return Err("email_invalid");
    }
    // The parsed address is `value` itself: its parts are either side of the last `@` (read
    // directly, where the crate's accessors would split the address again).
    let (local, raw_domain) = value.rsplit_once('@').ok_or("email_invalid")?;
    // Quoted local parts and shell metacharacters are legal RFC 5322 but no real mailbox needs
    // them, and a handler passing the address to a shell or template would act on them.
    if local.starts_with('"') || local.contains(['`', '$', '{', '}']) {
        return Err("email_invalid");
    }
    // ASCII is one script (Latin, with Common digits and signs): only other text can mix.
    if !local.is_ascii() && !local.is_single_script() {
        return Err("mixed_script");
    }
    let domain = lower(raw_domain.trim_end_matches('.'));
    let ascii: Cow<'_, str> = if domain.is_ascii() {
        Cow::Borrowed(&domain)
    } else {
        Cow::Owned(idna::domain_to_ascii(&domain).map_err(|_| "email_invalid")?)
    };
    // Unicode and punycode (`xn--`) domains get the URL host check: no label mixing scripts,
    // none wholly made of Latin look-alikes.
    if !domain.is_ascii() && domain.split('.').any(|l| !l.is_single_script()) {
        return Err("mixed_script");
    }
    if super::url::idn_mixed_script(&ascii) {
        return Err("mixed_script");
    }
    allowed(&domain, &ascii, domains)
}

/// The allowlist check of a checked address whose domain, in lower case, is `domain` (Unicode
/// or ASCII as sent) and `ascii` (its ASCII form).
fn allowed(domain: &str, ascii: &str, domains: Option<&[String]>) -> Result<(), &'static str> {
    let Some(allowed) = domains else {
        return Ok(());
    };
    let ok = allowed.iter().any(|a| match a.strip_prefix("*.") {
        Some(suffix) => ascii
            .strip_suffix(suffix)
            .is_some_and(|rest| rest.ends_with('.')),
        None => ascii == a || domain == a,
    });
    if ok {
        Ok(())
    } else {
        Err("email_domain_not_allowed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::tests::Rng;

    /// The pieces of the noisy parts of generated addresses, those an address may hold and many
    /// it may not.
    const PIECES: &[&str] = &[
        "a", "b", "x", "n", "Z", "0", "9", ".", "-", "_", "+", "--", "..", "@", " ", "\"", "<",
        ">", "[", "]", "'", "!", "`", "$", "{", "#", "~", "é", "ｂ", "\u{430}", "xn--", "XN--",
        "\t", "(", ")", "\\",
    ];

    /// A random string of `len` pieces, mostly ones a plain address is made of; only those
    /// unless `noisy`.
    fn part(rng: &mut Rng, len: usize, noisy: bool) -> String {
        let mut out = String::new();
        for _ in 0..len {
            // Two in three pieces are letters, digits or a dot.
            if rng.below(3) > 0 {
                out.push_str(rng.pick(&["a", "q", "K", "7", ".", "e", "o"]));
            } else if !noisy {
                out.push_str(rng.pick(&["-", "_", "+", "--", "x", "n"]));
            } else {
                out.push_str(rng.pick(PIECES));
            }
        }
        out
    }

    /// A length near one of the limits, or a short one.
    fn length(rng: &mut Rng) -> usize {
        match rng.below(6) {
            0 => LOCAL_MAX - 2 + rng.below(5),
            1 => LABEL_MAX - 2 + rng.below(5),
            _ => rng.below(12),
        }
    }

    /// A generated address: a local part, `@`, and labels joined by dots, each of them random
    /// and sometimes at a length limit.
    fn address(rng: &mut Rng) -> String {
        let noisy = rng.below(2) == 0;
        let len = length(rng);
        let mut out = part(rng, len, noisy);
        out.push('@');
        let labels = rng.below(5);
        // The labels: a run of one letter, a real one, or random pieces.
        for i in 0..labels {
            if i > 0 {
                out.push('.');
            }
            match rng.below(8) {
                0 => {
                    let len = length(rng);
                    out.push_str(&"d".repeat(len));
                }
                1 => out.push_str(rng.pick(&["example", "EXAMPLE", "xn--mnchen-3ya", "com"])),
                2..4 if !noisy => {
                    for _ in 0..1 + rng.below(8) {
                        out.push_str(rng.pick(&["a", "q", "K", "7", "e", "-", "x", "n", "--"]));
                    }
                }
                _ => {
                    let len = rng.below(8);
                    out.push_str(&part(rng, len, noisy));
                }
            }
        }
        if rng.below(20) == 0 {
            out = format!("{}{}", "a".repeat(rng.below(200)), out);
        }
        out
    }

    /// Generated addresses (and the ones of the sanitizer tests) get the same decision with
    /// and without the shortcut, under no allowlist and under one; the parser accepts every
    /// address the shortcut takes.
    #[test]
    fn plain_addresses_are_judged_as_the_parser_judges_them() {
        let allowlist = [
            "example.com".to_string(),
            "*.example.org".to_string(),
            "aq.k7".to_string(),
        ];
        let mut rng = Rng(0xE3A1_0000_0000_0001);
        let mut values: Vec<String> = [
            "ann.obrien@example.com",
            "bob@EXAMPLE.com",
            "a@b.c",
            "a@b",
            "a..b@example.com",
            ".a@example.com",
            "a.@example.com",
            "a@-b.com",
            "a@b-.com",
            "a@b..com",
            "a@b.com.",
            "a@xn--mnchen-3ya.de",
            "a@ab--c.com",
            "a+tag@mail.example.org",
            "\"a\"@example.com",
            "Ann <ann@example.com>",
            "a@[127.0.0.1]",
            "a@@example.com",
        ]
        .map(String::from)
        .to_vec();
        values.extend((0..300_000).map(|_| address(&mut rng)));
        let mut plain = 0usize;
        let mut valid = 0usize;
        for v in &values {
            if let Some(domain) = plain_domain(v) {
                plain += 1;
                assert_eq!(check_parsed(v, None), Ok(()), "{v:?}");
                assert_eq!(Some(domain), v.rsplit_once('@').map(|(_, d)| d), "{v:?}");
            }
            for domains in [None, Some(&allowlist[..])] {
                let parsed = check_parsed(v, domains);
                valid += usize::from(parsed.is_ok());
                assert_eq!(check_email(v, domains), parsed, "{v:?}");
            }
        }
        assert!(plain > 5_000, "{plain} plain addresses");
        assert!(valid > plain, "{valid} valid, {plain} plain");
    }
}
