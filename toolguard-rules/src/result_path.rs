//! Places in a tool's result that hold content from outside the caller's trust, when only part of
//! the result does (`untrusted_fields`): JSON pointers ([RFC 6901]) whose segments may be `*`,
//! any array item or object member.
//!
//! `/transactions/*/subject` names the subject of every transaction of a result such as
//! `{"transactions": [{"subject": "…", "amount": 999}]}`; the rest of the result (amounts,
//! account numbers the application recorded) is the application's own data. In a pointer, `~1`
//! stands for `/` and `~0` for `~` inside a name; a segment that is exactly `*` always means
//! "any".
//!
//! ```
//! use toolguard_rules::result_path::{self, Segment};
//!
//! let path = result_path::parse("/transactions/*/subject").unwrap();
//! assert_eq!(path[1], Segment::Any);
//! assert!(result_path::parse("transactions/subject").is_err());
//! assert!(result_path::parse("").is_err());
//! ```
//!
//! [RFC 6901]: https://www.rfc-editor.org/rfc/rfc6901

/// One segment of a result path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Segment {
    /// `*`: every item of an array, every member of an object.
    Any,
    /// A member's name (unescaped), or an array index written in decimal.
    Name(String),
}

impl Segment {
    /// Whether this segment matches the member `name` of an object.
    pub fn matches_member(&self, name: &str) -> bool {
        match self {
            Segment::Any => true,
            Segment::Name(n) => n == name,
        }
    }

    /// Whether this segment matches the item at `index` of an array.
    pub fn matches_item(&self, index: usize) -> bool {
        match self {
            Segment::Any => true,
            Segment::Name(n) => canonical(n) && n.parse::<usize>().is_ok_and(|i| i == index),
        }
    }
}

/// Whether `n` is an array index as RFC 6901 writes it (digits only, no leading zero).
fn canonical(n: &str) -> bool {
    !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'))
}

/// Reads `pointer`: a message says what is wrong when it is not a result path.
pub fn parse(pointer: &str) -> Result<Vec<Segment>, String> {
    if pointer.is_empty() {
        return Err(
            "an empty path names the whole result: declare `output = \"untrusted\"` instead of \
             listing it in `untrusted_fields`"
                .to_owned(),
        );
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!(
            "`{pointer}` is not a JSON pointer: write it from the result's root, starting with \
             `/` (`/{pointer}`)"
        ));
    };
    rest.split('/')
        .map(|raw| segment(pointer, raw))
        .collect::<Result<Vec<_>, _>>()
}

fn segment(pointer: &str, raw: &str) -> Result<Segment, String> {
    if raw.is_empty() {
        return Err(format!(
            "`{pointer}` has an empty segment (`//` or a trailing `/`): name every member, or \
             `*` for any"
        ));
    }
    if raw == "*" {
        return Ok(Segment::Any);
    }
    let mut name = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '~' {
            name.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => name.push('~'),
            Some('1') => name.push('/'),
            _ => {
                return Err(format!(
                    "`{pointer}` has a `~` that is not `~0` (for `~`) or `~1` (for `/`)"
                ));
            }
        }
    }
    Ok(Segment::Name(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_segment_by_segment() {
        assert_eq!(
            parse("/a/*/b~1c~0d").unwrap(),
            vec![
                Segment::Name("a".into()),
                Segment::Any,
                Segment::Name("b/c~d".into())
            ]
        );
        assert_eq!(parse("/*").unwrap(), vec![Segment::Any]);
    }

    #[test]
    fn what_is_not_a_path_is_refused_with_the_fix() {
        assert!(parse("").unwrap_err().contains("output = \"untrusted\""));
        assert!(parse("a/b").unwrap_err().contains("`/a/b`"));
        assert!(parse("/a//b").unwrap_err().contains("empty segment"));
        assert!(parse("/a/").unwrap_err().contains("empty segment"));
        assert!(parse("/a~2").unwrap_err().contains("`~0`"));
        assert!(parse("/a~").unwrap_err().contains("`~0`"));
    }

    #[test]
    fn segments_match_members_and_items() {
        let any = Segment::Any;
        let name = Segment::Name("2".into());
        assert!(any.matches_member("x") && any.matches_item(7));
        assert!(name.matches_item(2) && name.matches_member("2"));
        assert!(!name.matches_item(3));
        assert!(!Segment::Name("02".into()).matches_item(2));
        assert!(!Segment::Name("+2".into()).matches_item(2));
    }
}
