//! Portable `pattern`s: a pattern must mean the same in Rust's `regex` crate (the dispatcher's
//! schema validation) and in ECMA-262 with the `u` flag (the dialect of JSON Schema and of the
//! providers' validators), or a value could pass one and fail the other.
//!
//! [`check`] accepts the common subset: literals, `^` and `$`, groups `(..)`, `(?:..)` and
//! `(?<name>..)`, alternation, the quantifiers `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` (also lazy
//! with `?`), character classes with ranges and negation, the escapes `\n \r \t \f \v`, `\xHH`,
//! `\uHHHH`, escaped syntax characters (`\.`, `\(`, `\/`, ...; `\-` inside a class), and
//! `\p{..}`/`\P{..}` with a General_Category (`\p{L}`, `\p{Lu}`, `\p{Nd}`) or a script
//! (`\p{Script=Greek}`, `\p{sc=Latn}`): both engines know these, ECMA-262 with the `u` flag,
//! which every JSON Schema validator of the providers uses.
//!
//! Refused, each with the fix in the message: inline flags (`(?i)`, `(?x)`, `(?s:..)`), `(?P<..>`,
//! lookaround, backreferences, `\A`/`\z`/`\Z`, the Unicode-vs-ASCII classes `\d \w \s \b` (Rust
//! matches every Unicode digit with `\d`, ECMA-262 only `0-9`), `.` (Rust excludes only `\n`,
//! ECMA-262 also `\r`, U+2028 and U+2029), possessive quantifiers, `{,n}`, nested classes, POSIX
//! classes and class set operations (`&&`, `--`, `~~`), a `]` first in a class, unescaped `{`, `}`
//! and `]`, and escapes only one engine knows (`\x{..}`, `\u{..}`, `\U`, `\a`, `\e`, `\c`).

/// An opening brace (a quantifier's `{`), named so brace-counting tools read this file right.
const BRACE_OPEN: char = '\u{7B}';

use std::fmt;

/// Why a pattern is not portable: where, what was found and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PatternProblem {
    /// Byte offset of the construct in the pattern.
    pub offset: usize,
    /// The construct as written (`(?i)`, `\d`).
    pub found: String,
    /// What differs and what to write instead.
    pub message: String,
}

impl fmt::Display for PatternProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` at byte {}: {}",
            self.found, self.offset, self.message
        )
    }
}

/// General_Category short names both engines accept in `\p{..}`.
const CATEGORIES: [&str; 38] = [
    "L", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No", "P", "Pc",
    "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs", "Zl", "Zp", "C",
    "Cc", "Cf", "Cs", "Co", "Cn", "LC",
];

/// Checks that `pattern` means the same in Rust's `regex` and in ECMA-262 (see the module docs).
pub fn check(pattern: &str) -> Result<(), PatternProblem> {
    Scanner {
        chars: pattern.char_indices().collect(),
        pattern,
        i: 0,
    }
    .run()
}

struct Scanner<'p> {
    chars: Vec<(usize, char)>,
    pattern: &'p str,
    i: usize,
}

type Step = Result<(), PatternProblem>;

impl Scanner<'_> {
    fn at(&self, k: usize) -> Option<char> {
        self.chars.get(k).map(|(_, c)| *c)
    }

    fn offset(&self, k: usize) -> usize {
        self.chars.get(k).map_or(self.pattern.len(), |(o, _)| *o)
    }

    /// A problem with the characters `from..to` (indices into `chars`).
    fn fail(&self, from: usize, to: usize, message: impl Into<String>) -> Step {
        let (a, b) = (self.offset(from), self.offset(to.min(self.chars.len())));
        Err(PatternProblem {
            offset: a,
            found: self.pattern.get(a..b).unwrap_or_default().to_owned(),
            message: message.into(),
        })
    }

    fn run(mut self) -> Step {
        let mut open: Vec<usize> = Vec::new();
        let mut repeatable = false;
        while let Some(c) = self.at(self.i) {
            let start = self.i;
            match c {
                '\\' => {
                    self.escape(false)?;
                    repeatable = true;
                    continue;
                }
                '(' => {
                    self.group()?;
                    open.push(start);
                    repeatable = false;
                    continue;
                }
                ')' => {
                    if open.pop().is_none() {
                        return self.fail(start, start + 1, "unbalanced `)`: escape it as `\\)`");
                    }
                    repeatable = true;
                }
                '[' => {
                    self.class()?;
                    repeatable = true;
                    continue;
                }
                ']' | '}' => {
                    return self.fail(
                        start,
                        start + 1,
                        format!(
                            "a lone `{c}` is a literal in Rust but an error in ECMA-262 with the \
                             `u` flag: escape it as `\\{c}`"
                        ),
                    );
                }
                '*' | '+' | '?' | '{' => {
                    if !repeatable {
                        return self.fail(
                            start,
                            start + 1,
                            format!(
                                "`{c}` has nothing to repeat: escape it as `\\{c}` for the \
                                 character itself"
                            ),
                        );
                    }
                    self.quantifier()?;
                    repeatable = false;
                    continue;
                }
                '.' => {
                    return self.fail(
                        start,
                        start + 1,
                        "`.` differs: Rust's matches every character but `\\n`, ECMA-262's also \
                         excludes `\\r`, U+2028 and U+2029. Write the characters you mean, e.g. \
                         `[^\\n]` (any but a line break, the same in both) or `\\.` for a dot",
                    );
                }
                '^' | '$' | '|' => repeatable = false,
                _ => repeatable = true,
            }
            self.i += 1;
        }
        match open.last() {
            Some(&k) => self.fail(k, k + 1, "unclosed `(`: add the `)`"),
            None => Ok(()),
        }
    }

    /// At `(`: the group's opening, after which the scan continues inside it.
    fn group(&mut self) -> Step {
        let s = self.i;
        if self.at(s + 1) != Some('?') {
            self.i += 1;
            return Ok(());
        }
        match (self.at(s + 2), self.at(s + 3)) {
            (Some(':'), _) => {
                self.i += 3;
                Ok(())
            }
            (Some('<'), Some('=' | '!')) | (Some('=' | '!'), _) => self.fail(
                s,
                s + 3 + usize::from(self.at(s + 2) == Some('<')),
                "lookaround is not supported by Rust's regex: match the text itself, or check \
                 the condition in the handler",
            ),
            (Some('<'), _) => {
                let mut k = s + 3;
                while self
                    .at(k)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    k += 1;
                }
                let named = k > s + 3 && self.at(s + 3).is_some_and(|c| !c.is_ascii_digit());
                if named && self.at(k) == Some('>') {
                    self.i = k + 1;
                    Ok(())
                } else {
                    self.fail(s, k + 1, "a group name is a letter or `_`, then letters, digits or `_`, closed by `>`: `(?<year>[0-9]{4})`")
                }
            }
            (Some('P'), _) => self.fail(
                s,
                s + 4,
                "`(?P<name>..)` is Rust and Python syntax, not ECMA-262: write `(?<name>..)`",
            ),
            _ => {
                let mut k = s + 2;
                while self.at(k).is_some_and(|c| c != ')' && c != ':') {
                    k += 1;
                }
                self.fail(
                    s,
                    k + 1,
                    "inline flags are not portable (ECMA-262 has no `(?i)`, `(?x)`, `(?s)` or \
                     `(?m)`, and JSON Schema sets no flags): write the cases out instead, e.g. \
                     `[Yy][Ee][Ss]` for `(?i)yes`",
                )
            }
        }
    }

    /// At `*`, `+`, `?` or `{`, after something repeatable.
    fn quantifier(&mut self) -> Step {
        let s = self.i;
        if self.at(s) == Some(BRACE_OPEN) {
            let mut k = s + 1;
            let digits = |sc: &Self, mut k: usize| {
                let from = k;
                while sc.at(k).is_some_and(|c| c.is_ascii_digit()) {
                    k += 1;
                }
                (k, k > from)
            };
            let (after_min, has_min) = digits(self, k);
            k = after_min;
            if self.at(k) == Some(',') {
                k = digits(self, k + 1).0;
            }
            if self.at(k) != Some('}') || !has_min {
                let message = if self.at(s + 1) == Some(',') {
                    "`{,n}` is Rust-only: write `{0,n}`"
                } else {
                    "a `\u{7B}` that is not a repetition `{n}`, `{n,}` or `{n,m}` is a literal in Rust \
                     but an error in ECMA-262 with the `u` flag: escape it as `\\\u{7B}`"
                };
                return self.fail(s, (k + 1).min(self.chars.len()), message);
            }
            self.i = k + 1;
        } else {
            self.i += 1;
        }
        if self.at(self.i) == Some('?') {
            self.i += 1;
        }
        match self.at(self.i) {
            Some(c @ ('+' | '*' | '?' | BRACE_OPEN)) => self.fail(
                s,
                self.i + 1,
                format!(
                    "{}: neither engine reads it the same way. Use one quantifier (`a+`), or \
                     escape the `{c}`",
                    if c == '+' {
                        "possessive quantifiers (`a++`) are not supported by Rust or ECMA-262"
                    } else {
                        "a repetition of a repetition"
                    }
                ),
            ),
            _ => Ok(()),
        }
    }

    /// At `[`: the whole class.
    fn class(&mut self) -> Step {
        let s = self.i;
        self.i += 1;
        if self.at(self.i) == Some('^') {
            self.i += 1;
        }
        if self.at(self.i) == Some(']') {
            return self.fail(
                s,
                self.i + 1,
                "a `]` first in a class is a literal in Rust but closes an empty class in \
                 ECMA-262: escape it as `\\]`",
            );
        }
        loop {
            let k = self.i;
            match (self.at(k), self.at(k + 1)) {
                (None, _) => return self.fail(s, s + 1, "unclosed `[`: add the `]`"),
                (Some(']'), _) => {
                    self.i += 1;
                    return Ok(());
                }
                (Some('\\'), _) => self.escape(true)?,
                (Some('['), Some(':')) => {
                    return self.fail(
                        k,
                        k + 2,
                        "POSIX classes (`[[:alpha:]]`) are Rust-only: write the range, e.g. \
                         `[A-Za-z]`",
                    );
                }
                (Some('['), _) => {
                    return self.fail(
                        k,
                        k + 1,
                        "a `[` inside a class opens a nested class in Rust but is a literal in \
                         ECMA-262: escape it as `\\[`, or write the classes side by side",
                    );
                }
                (Some(c @ ('&' | '-' | '~')), Some(d)) if c == d => {
                    return self.fail(
                        k,
                        k + 2,
                        format!(
                            "`{c}{c}` in a class is a set operation in Rust but two literal \
                             characters in ECMA-262: write the resulting set out, or escape \
                             one of them (`\\{c}`)"
                        ),
                    );
                }
                _ => self.i += 1,
            }
        }
    }

    /// At `\`, inside a class or not.
    fn escape(&mut self, in_class: bool) -> Step {
        let s = self.i;
        let Some(c) = self.at(s + 1) else {
            return self.fail(
                s,
                s + 1,
                "a pattern cannot end with `\\`: escape it as `\\\\`",
            );
        };
        self.i = s + 2;
        let unicode_class = |example: &str, fix: &str| {
            format!(
                "`\\{c}` differs: Rust's is Unicode-aware ({example}), ECMA-262's is ASCII. \
                 Write {fix}"
            )
        };
        let message = match c {
            'n' | 'r' | 't' | 'f' | 'v' => return Ok(()),
            '^' | '$' | '\\' | '.' | '*' | '+' | '?' | '(' | ')' | '[' | ']' | '{' | '}' | '|'
            | '/' => return Ok(()),
            '-' if in_class => return Ok(()),
            'x' | 'u' => return self.hex(s, c),
            'p' | 'P' => return self.property(s, c),
            'd' | 'D' => unicode_class(
                "`\\d` matches `٣`",
                "`[0-9]` (or `\\p{Nd}` for every decimal digit)",
            ),
            'w' | 'W' => unicode_class(
                "`\\w` matches `é`",
                "`[A-Za-z0-9_]` (or the `\\p{..}` classes you mean)",
            ),
            's' | 'S' => "`\\s` differs: Rust's matches U+0085, ECMA-262's matches U+FEFF \
                          instead. Write the white space you accept, e.g. `[ \\t\\r\\n]`"
                .to_owned(),
            'b' | 'B' => "word boundaries differ (Unicode words in Rust, ASCII words in \
                          ECMA-262; a backspace inside a class): anchor with `^` and `$`, or \
                          match the separator itself"
                .to_owned(),
            'A' | 'z' | 'Z' => {
                "`\\A`, `\\z` and `\\Z` are not ECMA-262: use `^` and `$`, which mean the start \
                 and end of the value in both engines"
                    .to_owned()
            }
            '0'..='9' | 'k' => "backreferences (and octal escapes) are not supported by Rust's \
                                regex: repeat the sub-pattern, or check equality in the handler"
                .to_owned(),
            '-' => "`\\-` outside a class is an error in ECMA-262 with the `u` flag: write `-`"
                .to_owned(),
            _ => format!(
                "`\\{c}` is not an escape both engines know: write the character itself (escaped \
                 only if it is one of `^$\\.*+?()[]{{}}|/`), `\\xHH` or `\\uHHHH`"
            ),
        };
        self.fail(s, s + 2, message)
    }

    /// At `\x` or `\u`: exactly 2 or 4 hex digits.
    fn hex(&mut self, s: usize, c: char) -> Step {
        let n = if c == 'x' { 2 } else { 4 };
        let ok = (0..n).all(|j| self.at(s + 2 + j).is_some_and(|h| h.is_ascii_hexdigit()));
        if ok {
            self.i = s + 2 + n;
            Ok(())
        } else {
            self.fail(
                s,
                s + 3,
                format!(
                    "write `\\{c}` with exactly {n} hex digits (`\\x41`, `\\u00E9`); braced forms \
                     (`\\x{{..}}`, `\\u{{..}}`) are not in both engines, so write a character \
                     beyond U+FFFF as itself"
                ),
            )
        }
    }

    /// At `\p` or `\P`: a braced General_Category or script.
    fn property(&mut self, s: usize, c: char) -> Step {
        let close = (s + 3..self.chars.len()).find(|&k| self.at(k) == Some('}'));
        let name: Option<String> = match (self.at(s + 2), close) {
            (Some('{'), Some(e)) => Some(self.chars[s + 3..e].iter().map(|(_, c)| *c).collect()),
            _ => None,
        };
        let portable = name.as_deref().is_some_and(|n| {
            CATEGORIES.contains(&n)
                || ["Script=", "sc=", "Script_Extensions=", "scx="]
                    .iter()
                    .filter_map(|p| n.strip_prefix(p))
                    .any(|v| {
                        v.starts_with(|ch: char| ch.is_ascii_uppercase())
                            && v.chars().all(|ch| ch.is_ascii_alphabetic() || ch == '_')
                    })
        });
        match (portable, close) {
            (true, Some(e)) => {
                self.i = e + 1;
                Ok(())
            }
            _ => self.fail(
                s,
                close.map_or(s + 3, |e| e + 1),
                format!(
                    "write `\\{c}{{..}}` with a General_Category short name (`\\{c}{{L}}`, \
                     `\\{c}{{Lu}}`, `\\{c}{{Nd}}`) or a script as `\\{c}{{Script=Greek}}`: Rust's \
                     short forms (`\\pL`), long names and bare script names are not ECMA-262"
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    /// Patterns both engines read alike; each must also compile in Rust's `regex`.
    const PORTABLE: [&str; 16] = [
        "",
        "^[a-z0-9-]+$",
        "^[A-Za-z ]{1,80}$",
        "^(?:ab|cd)*?x{2}y{3,}z{1,4}?$",
        "^(?<year>[0-9]{4})-(?<month>[0-9]{2})$",
        "^\\p{L}+\\P{Nd}$",
        "^\\p{Script=Greek}+$",
        "^[\\p{Lu}\\-_]+$",
        "^\\x41\\u00e9\\n\\t\\r\\f\\v$",
        "^\\.\\*\\+\\?\\(\\)\\[\\]\\{\\}\\|\\/\\\\\\^\\$",
        "^[^\\n]*$",
        "^a|b$",
        "#&~ -",
        "^[a-]$",
        "^é+$",
        "^(a)(b(c))$",
    ];

    #[test]
    fn portable_patterns_pass_and_compile_in_rust() {
        for p in PORTABLE {
            assert_eq!(check(p), Ok(()), "{p}");
            assert!(regex::Regex::new(p).is_ok(), "Rust regex refuses {p}");
        }
    }

    #[test]
    fn constructs_that_differ_are_refused_with_their_place_and_fix() {
        for (pattern, found, fix) in [
            ("(?i)^yes$", "(?i)", "[Yy][Ee][Ss]"),
            ("^(?x) a $", "(?x)", "inline flags"),
            ("^(?s:.)$", "(?s:", "inline flags"),
            ("^(?P<y>[0-9])$", "(?P<", "(?<name>..)"),
            ("^a(?=b)", "(?=", "lookaround"),
            ("^(?<!a)b", "(?<!", "lookaround"),
            ("^(a)\\1$", "\\1", "backreferences"),
            ("\\Aabc\\z", "\\A", "`^` and `$`"),
            ("^\\d+$", "\\d", "[0-9]"),
            ("^\\w+$", "\\w", "[A-Za-z0-9_]"),
            ("^a\\sb$", "\\s", "[ \\t\\r\\n]"),
            ("\\bword\\b", "\\b", "word boundaries"),
            ("^a.b$", ".", "[^\\n]"),
            ("^a++$", "++", "possessive"),
            ("^a{,3}$", "{,3}", "{0,n}"),
            ("^a{x}$", "{x", "escape it as `\\{`"),
            ("^a}$", "}", "escape it as `\\}`"),
            ("^a]$", "]", "escape it as `\\]`"),
            ("^*a$", "*", "nothing to repeat"),
            ("^[[:alpha:]]$", "[:", "POSIX"),
            ("^[a[b]]$", "[", "nested class"),
            ("^[a-z&&[^x]]$", "&&", "set operation"),
            ("^[]a]$", "[]", "escape it as `\\]`"),
            ("^\\pL$", "\\pL", "\\p{L}"),
            ("^\\p{Greek}$", "\\p{Greek}", "Script=Greek"),
            ("^\\x{41}$", "\\x{", "exactly 2 hex digits"),
            ("^\\u{e9}$", "\\u{", "exactly 4 hex digits"),
            ("^\\e$", "\\e", "not an escape both engines know"),
            ("^\\-$", "\\-", "write `-`"),
            ("^(ab$", "(", "unclosed `(`"),
            ("^ab)$", ")", "unbalanced"),
            ("^[ab$", "[", "unclosed `[`"),
            ("^ab\\", "\\", "cannot end"),
        ] {
            let problem = check(pattern).expect_err(pattern);
            assert_eq!(problem.found, found, "{pattern}");
            assert!(problem.message.contains(fix), "{pattern}: {problem}");
            assert_eq!(&pattern[problem.offset..][..found.len()], found);
        }
    }

    #[test]
    fn any_input_is_answered_without_panicking() {
        for p in [
            "\\", "(", "[", "{", "\\p{", "\\x4", "(?<", "(?<a", "[\\", "a{1,", "é\\é",
        ] {
            let _ = check(p);
        }
    }
}
