//! Field-aware argument sanitization: each string is judged on a canonical form, per field kind,
//! and the [`SanitizeReport`] records what was done.
//!
//! The dispatcher calls [`Sanitizer::sanitize`] after schema validation and before typed
//! deserialization. Every string of a top-level field, including strings nested in its arrays and
//! objects, is judged by that field's [`FieldKind`]; fields without a declaration ([`FieldRule`]) are `text`.
//!
//! # How a string is judged
//! 1. **Character scan** of the original value ([`chars`]). Depending on the kind each class is
//!    kept, stripped (removed from the value passed on, and reported as a [`Modification`]) or
//!    blocks the call.
//! 2. **Kind rules** on the value minus what was stripped (identifier charset, name charset and
//!    scripts, e-mail parser and domain allowlist, URL host checks, path confinement, money).
//! 3. **Markers** on the [canonical form](canon) (decoded, NFKC, case-folded, combining marks
//!    dropped, confusables and look-alike symbols folded, invisible characters removed) of
//!    `text`, `name`, `email`, `url` and `path` values: prompt-injection and shell-substitution
//!    patterns ([`patterns`]), override phrases in eight more languages ([`phrases`]), the same
//!    on base64/hex payloads and (prompt injection only) on leetspeak readings ([`fold`]); in
//!    `text`, exfiltration markup ([`markup`]). A printable-ASCII value with none of the bytes
//!    and none of the anchor words these need is proven clean by the ASCII fast path
//!    ([`fast`]) without building the canonical form.
//!
//! `opaque` fields (structs, maps, `serde_json::Value`, vectors of structs) are walked: their
//! nested strings are judged as `text`, or as `url` where the input schema declares a URL
//! (`format: "uri"`, as nested [`Url`](crate::kinds::Url) fields carry) or the field asks for
//! it ([`Sanitizer::check_nested_urls`]); see [`nested`] for what is and is not checked. Keys are
//! judged as text; numbers, booleans and nulls are left alone. `money` fields accept
//! non-negative integers and the currency codes of [`Currency`](crate::kinds::Currency) only.
//!
//! The value passed on is the original minus what was stripped; it is never "corrected" (no
//! decoding, no case change), with one exception: a URL goes on as the normalized serialization
//! that was checked ([`ResolvedUrl::url`]), never as sent, so the handler fetches exactly what
//! was judged. The argument limits the dispatcher applies before parsing are configured here too
//! ([`Sanitizer::argument_limits`], see [`limits`]).
//!
//! # Character policy
//! | class | `text` | `name` | `identifier`, `email`, `url`, `path`, `money` |
//! | --- | --- | --- | --- |
//! | zero-width U+200B–U+200D, U+2060 | stripped; ZWJ kept inside an emoji ZWJ sequence, ZWJ/ZWNJ kept between letters of joining scripts (Arabic, Indic...) | as `text` | blocks `invisible_char` |
//! | other format `Cf` (U+00AD, U+FEFF, U+180E, U+200E/F, U+2061–U+2064, fillers) | stripped | stripped | blocks `invisible_char` |
//! | variation selectors | one U+FE0E/U+FE0F kept right after an emoji base, one U+E0100–U+E01EF kept after a Han ideograph; others stripped | as `text` | blocks `invisible_char` |
//! | bidi controls U+202A–U+202E, U+2066–U+2069 | blocks `bidi_control` | blocks | blocks |
//! | tag characters U+E0000–U+E007F | blocks `tag_character`, except the three RGI subdivision flags (🏴 + `gbeng`/`gbsct`/`gbwls` + cancel tag) | as `text` | blocks |
//! | tab, line feed | kept | blocks `control_char` | blocks `control_char` |
//! | carriage return, U+2028, U+2029 | stripped | stripped | blocks `control_char` |
//! | other C0/C1 controls, control pictures (U+2400 block: `␀`, `␊`, `␛`) | blocks `control_char` | blocks | blocks |
//! | private use | stripped | stripped | blocks `private_use` |
//! | unassigned, noncharacters | stripped | stripped | blocks `unassigned` |
//!
//! More than [`MAX_COMBINING_MARKS`] combining marks on one base block `excessive_combining`
//! ("Zalgo" text) in `text` and `name`.
//!
//! # Decisions
//! - **Emoji**: ZWJ sequences (`👨‍👩‍👧`), skin tones, keycaps (`1️⃣`), flags and one VS16 after
//!   an emoji are kept untouched, so legitimate emoji never change; a ZWJ or selector anywhere
//!   else is stripped and reported. Tag characters are refused except inside the three RGI
//!   subdivision flags (England, Scotland, Wales).
//! - **Shell substitution in `text`**: `$(...)` (with any spacing, seed 000's gap),
//!   `$((...))`, `${...}`, `<(...)` and back-ticked commands block with `command_substitution`:
//!   a memo has no honest use for them and some handler may pass it to a shell or template.
//!   Accounting negatives (`$(1,200)`) and back-ticked flags (`` `--verbose` ``) stay clean.
//! - **SQL in `text`**: apostrophes, semicolons and SQL words are ordinary prose and pass
//!   ("O'Brien", "drop it off; thanks"); SQL safety belongs to parameterized queries. Identifier
//!   fields refuse every such character by charset.
//! - **Scripts in `name`**: a word mixing scripts (`Pаypal` with a Cyrillic `а`) blocks; a word
//!   written wholly in one script passes even when it looks Latin (`Вера`), because it is a real
//!   name. IDN host labels are stricter (whole-script look-alikes of Latin block too).
//! - **Strict kinds** (`identifier`, `email`, `url`, `path`, `money`) never strip: an invisible
//!   character there blocks, so the value passed on is exactly what was checked.
//! - **Encodings**: the canonical form decodes percent-encoding (also `%uXXXX`), HTML references
//!   (also numeric ones without `;`: `&#105gnore`), `\uXXXX`/`\xXX`/octal escapes and `\/` in up
//!   to three rounds; base64 runs of 12+ characters (and base64 inside them) and hexadecimal runs
//!   of 16+ digits are decoded and judged too. Decoding is for matching only; the value passed
//!   on keeps its encoding.
//! - **Combining marks** (`Mn`, `Me`) are dropped from the matching form, so strike-through or
//!   underlined letters (`ign\u{0336}ore`) match what the plain word matches; clean text keeps
//!   them. More than [`MAX_COMBINING_MARKS`] on one letter still blocks.
//! - **Markup links**: markdown images and links and HTML `<img>`/`<a>`/`<iframe>`... pointing at
//!   an external URL block `text` with `markup_link` (a renderer would fetch them); a bare URL in
//!   prose passes; [`Sanitizer::allow_markup_links`] allows them per field.
//! - **Identifiers starting with `-`** block (`identifier_leading_dash`): a handler passing one
//!   to a command line turns it into an option; [`Sanitizer::allow_leading_dash`] allows them
//!   per field.
//! - **URLs** are refused when parsers disagree on their host (`url_ambiguous`, see
//!   [`url::check_url`]) and passed on normalized.
//! - **Resolution**: URL host names are not resolved unless a [`HostResolver`] is set
//!   ([`Sanitizer::with_resolver`]); with one, every resolved address is checked and the
//!   addresses are returned in [`SanitizeReport::resolved`] for the handler to connect to (DNS
//!   rebinding). Without one, a name like `127.0.0.1.nip.io` is only caught at use, through
//!   [`crate::kinds::Url::resolve_with`].
//! - **Paths** fail closed: a path field with no root (neither [`FieldRule::root`] nor
//!   [`Sanitizer::path_root`]) blocks with `path_no_root`.
//!
//! # Reason codes
//! Stable snake_case codes of [`SanitizeReport::reason`]; a blocked report never carries the
//! payload.
//!
//! | code | meaning |
//! | --- | --- |
//! | `bidi_control` | a bidi embedding/override/isolate control (also when revealed by decoding) |
//! | `tag_character` | a tag character outside an RGI flag sequence (also when revealed by decoding) |
//! | `control_char` | a C0/C1 control the kind does not allow (also when revealed by decoding: `%0d%0a`, `%00`, `&#0;`), or a control picture (`␊`, `␀`) that imitates one |
//! | `invisible_char` | a zero-width, format or variation-selector character in a strict kind |
//! | `private_use` | a private-use code point in a strict kind |
//! | `unassigned` | an unassigned code point or noncharacter in a strict kind |
//! | `excessive_combining` | more than [`MAX_COMBINING_MARKS`] combining marks on one character |
//! | `excessive_encoding` | still percent/entity-encoded after [`canon::MAX_DECODE_ROUNDS`] rounds |
//! | `prompt_injection` | a role tag, special token or instruction-override phrase |
//! | `command_substitution` | shell `$(...)` (any spacing), `${...}`, `<(...)` or back-ticked command |
//! | `identifier_charset` | an identifier with a character other than ASCII letters, digits, `_`, `-` |
//! | `identifier_length` | an identifier that is empty or longer than its limit (default 128) |
//! | `identifier_punctuation` | an identifier of `_` and `-` only (`_`, `--`, `-_-`): no letter or digit names anything |
//! | `identifier_leading_dash` | an identifier starting with `-` (unless [`Sanitizer::allow_leading_dash`]) |
//! | `markup_link` | markdown or HTML in `text` that links or loads an external URL (unless [`Sanitizer::allow_markup_links`]) |
//! | `name_charset` | a name with a character other than letters, marks, spaces, apostrophes, hyphens, periods, or without any letter |
//! | `mixed_script` | a word of a name, or a label of an e-mail domain, mixing scripts (`Pаypal` with a Cyrillic `а`); a name written wholly in one script is fine (`Вера`); an e-mail domain label (Unicode or `xn--`) wholly made of Latin look-alikes blocks too, as URL hosts do |
//! | `email_invalid` | not a plain RFC 5322 `local@domain` address (display names, domain literals, no TLD, quoted local parts, and `` ` `` `$` `{` `}` in the local part refused) |
//! | `email_domain_not_allowed` | a recipient domain outside the field's allowlist |
//! | `url_invalid` | not an absolute URL with a host, or with white space or control characters anywhere |
//! | `url_ambiguous` | a URL whose host parsers read differently: a backslash or percent-encoded byte in the authority, anything but exactly `scheme://` before it (`http:\\h`, `http:/h`, `http:h`, `http:///h`), or a Unicode host written other than as its own form (fullwidth letters, `。`) |
//! | `url_scheme` | a scheme outside the allowlist (default `https`, `http`) |
//! | `url_userinfo` | user name or password (an `@` in the authority) in the URL |
//! | `url_private_address` | an IP literal (any notation) or resolved address that is loopback, private, link-local, CGNAT, unspecified, broadcast, multicast, unique-local or reserved |
//! | `url_internal_host` | `localhost`, `*.localhost`, `*.local`, `*.internal`, `*.home.arpa`, reverse-DNS zones, and single-label (intranet) names |
//! | `url_mixed_script` | an IDN host label mixing scripts, or wholly made of letters that look Latin (Cyrillic `аррӏе`) |
//! | `url_host_not_allowed` | a host outside the field's allowlist |
//! | `url_unresolvable` | the configured resolver could not resolve the host |
//! | `path_no_root` | a path field with no confinement root configured |
//! | `path_root_missing` | the configured root does not exist |
//! | `path_invalid` | an empty path or one the file system cannot walk |
//! | `path_nul` | a NUL byte in a path |
//! | `path_absolute` | an absolute path, drive prefix or `~` |
//! | `path_traversal` | a `..` component (also percent- or entity-encoded) |
//! | `path_escape` | a symlink leading out of the root (or dangling) |
//! | `money_invalid` | a negative or fractional amount, or a currency code that is not a [`Currency`](crate::kinds::Currency) |
//! | `amount_too_precise`, `amount_negative`, `amount_too_large`, `amount_not_a_number` | a number of a money field with a declared scale ([`FieldRule::scale`]) that is not an exact amount of minor units ([`kinds::minor_units`]) |
//! | `invalid_key` | a nested object key that is not clean text (the field named is the object holding it, never the key) |
//!
//! Modification codes ([`Modification::what`]): `zero_width`, `format_char`,
//! `variation_selector`, `control_char`, `line_separator`, `private_use`, `unassigned`.

pub mod canon;
pub mod chars;
pub mod destination;
mod email;
pub mod fast;
mod field;
pub mod fold;
pub mod json;
pub mod kinds;
pub mod limits;
pub mod markup;
pub mod nested;
pub mod path;
pub mod patterns;
pub mod phrases;
pub mod url;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use unicode_security::MixedScript;

use field::TextField;
pub use field::{Field, FieldKind, FieldRule, Fields, ToolRules};
pub use limits::Limits;

pub use self::url::{
    HostResolver, NoResolution, Resolution, ResolvedUrl, SystemResolver, UrlPolicy, is_forbidden_ip,
};
use chars::CharClass;
pub(crate) use email::check_email;

/// Default maximum length of an identifier, in characters.
pub const DEFAULT_IDENTIFIER_MAX_LEN: usize = 128;

/// Most combining marks accepted on one base character in `text` and `name`.
pub const MAX_COMBINING_MARKS: usize = 8;

/// The sanitizer's decision for a whole arguments object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Verdict {
    /// Nothing to do.
    #[default]
    Clean,
    /// Something was removed; the cleaned value goes on.
    Stripped,
    /// The call is refused.
    Blocked,
}

impl Verdict {
    /// The snake_case name (`clean`, `stripped`, `blocked`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Clean => "clean",
            Verdict::Stripped => "stripped",
            Verdict::Blocked => "blocked",
        }
    }
}

/// One change the sanitizer made to a field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modification {
    /// JSON pointer of the field.
    pub field: String,
    /// What was removed (a class code such as `zero_width`).
    pub what: String,
    /// How many characters were removed.
    pub count: usize,
    /// Character positions (in the original value) of the removed characters.
    pub positions: Vec<usize>,
}

/// What the sanitizer did to an arguments object. Never carries a blocked payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub struct SanitizeReport {
    /// Overall verdict.
    pub verdict: Verdict,
    /// Reason code of a block (e.g. `bidi_control`, `prompt_injection`).
    pub reason: Option<String>,
    /// JSON pointer of the field that blocked.
    pub field: Option<String>,
    /// Changes made, for `stripped`.
    pub modifications: Vec<Modification>,
    /// The checked URLs of `url` fields, with the addresses to pin (see [`ResolvedUrl`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved: Vec<ResolvedUrl>,
}

impl SanitizeReport {
    /// True when the call must not go on.
    pub fn is_blocked(&self) -> bool {
        self.verdict == Verdict::Blocked
    }

    /// The checked URL of the field at JSON pointer `field`.
    pub fn resolved_url(&self, field: &str) -> Option<&ResolvedUrl> {
        self.resolved.iter().find(|r| r.field == field)
    }
}

/// The judgement of one string (see [`Sanitizer::sanitize_str`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StrOutcome {
    /// `clean`, `stripped` or `blocked`.
    pub verdict: Verdict,
    /// Reason code when blocked.
    pub reason: Option<&'static str>,
    /// The value to pass on: the original when clean, the original minus what was stripped when
    /// stripped, `None` when blocked.
    pub value: Option<String>,
    /// What was stripped (with an empty `field`; [`Sanitizer::sanitize`] fills in pointers).
    pub modifications: Vec<Modification>,
    /// The checked URL of a `url` value.
    pub resolved: Option<ResolvedUrl>,
}

/// The judgement of one string as the sanitizer works with it: [`StrOutcome`] without a copy
/// of a value that goes on unchanged.
struct Judged {
    verdict: Verdict,
    reason: Option<&'static str>,
    /// What goes on instead of the value: the stripped value, or a URL's normalized
    /// serialization; `None` when the value goes on as it is (or is blocked).
    replacement: Option<String>,
    modifications: Vec<Modification>,
    resolved: Option<ResolvedUrl>,
}

impl Judged {
    fn blocked(reason: &'static str) -> Self {
        Judged {
            verdict: Verdict::Blocked,
            reason: Some(reason),
            replacement: None,
            modifications: Vec::new(),
            resolved: None,
        }
    }
}

/// Per-(tool, field) configuration.
#[derive(Debug, Clone, Default)]
struct FieldPolicy {
    email_domains: Option<Vec<String>>,
    url: UrlPolicy,
    root: Option<PathBuf>,
    markup_links: bool,
    leading_dash: bool,
    nested_urls: bool,
}

/// Per-field sanitization rules of a dispatcher.
///
/// ```
/// use toolguard_sanitize::Sanitizer;
/// let s = Sanitizer::new()
///     .allow_email_domains("send_email", "to", ["example.com"])
///     .allow_url_hosts("fetch", "url", ["*.example.org"])
///     .path_root("read_file", "path", "/srv/files");
/// # let _ = s;
/// ```
#[derive(Clone)]
pub struct Sanitizer {
    /// Field rules by tool, then field: looked up without building a key. Ordered maps: a few
    /// string comparisons find a rule (no hashing per judged string), and the build-time name
    /// check lists them in a stable order.
    fields: BTreeMap<String, BTreeMap<String, FieldPolicy>>,
    resolver: Arc<dyn HostResolver>,
    identifier_max_len: usize,
    limits: Limits,
}

impl Default for Sanitizer {
    fn default() -> Self {
        Sanitizer {
            fields: BTreeMap::new(),
            resolver: Arc::new(NoResolution),
            identifier_max_len: DEFAULT_IDENTIFIER_MAX_LEN,
            limits: Limits::default(),
        }
    }
}

impl fmt::Debug for Sanitizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sanitizer")
            .field("fields", &self.fields)
            .field("identifier_max_len", &self.identifier_max_len)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

fn lower_all<I, S>(items: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    items
        .into_iter()
        .map(|s| s.into().trim().to_ascii_lowercase())
        .collect()
}

impl Sanitizer {
    /// A sanitizer with default rules: no e-mail domain allowlist, URL schemes `https` and `http`,
    /// any public host, no resolution, no path roots beyond [`FieldRule::root`].
    pub fn new() -> Self {
        Sanitizer::default()
    }

    fn policy_mut(&mut self, tool: &str, field: &str) -> &mut FieldPolicy {
        self.fields
            .entry(tool.to_string())
            .or_default()
            .entry(field.to_string())
            .or_default()
    }

    /// The (tool, field) pairs that have rules, for the dispatcher's build-time name check.
    pub fn configured_fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields.iter().flat_map(|(tool, fields)| {
            fields
                .keys()
                .map(move |field| (tool.as_str(), field.as_str()))
        })
    }

    /// Whether field `field` of tool `tool` admits only allowlisted destinations: an e-mail
    /// domain allowlist or a URL host allowlist (the provenance flow check of `egress` tools).
    pub fn destination_allowlisted(&self, tool: &str, field: &str) -> bool {
        self.policy(tool, field).is_some_and(|p| {
            p.email_domains.as_ref().is_some_and(|d| !d.is_empty()) || !p.url.hosts.is_empty()
        })
    }

    fn policy(&self, tool: &str, field: &str) -> Option<&FieldPolicy> {
        self.fields.get(tool)?.get(field)
    }

    /// Allows only these recipient domains (exact, case-insensitive; `*.example.com` for
    /// sub-domains) in e-mail field `field` of tool `tool`. Calls add up.
    #[must_use]
    pub fn allow_email_domains<I, S>(mut self, tool: &str, field: &str, domains: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let p = self.policy_mut(tool, field);
        p.email_domains
            .get_or_insert_with(Vec::new)
            .extend(lower_all(domains));
        self
    }

    /// Allows only these URL schemes in field `field` of tool `tool` (replacing the default
    /// `https`, `http`). Calls add up.
    #[must_use]
    pub fn allow_url_schemes<I, S>(mut self, tool: &str, field: &str, schemes: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.policy_mut(tool, field)
            .url
            .schemes
            .extend(lower_all(schemes));
        self
    }

    /// Allows only these hosts (exact, or `*.example.com` for sub-domains) in URL field `field`
    /// of tool `tool`. Calls add up.
    #[must_use]
    pub fn allow_url_hosts<I, S>(mut self, tool: &str, field: &str, hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.policy_mut(tool, field)
            .url
            .hosts
            .extend(lower_all(hosts));
        self
    }

    /// Confines path field `field` of tool `tool` below `root` (takes precedence over
    /// [`FieldRule::root`]).
    #[must_use]
    pub fn path_root(mut self, tool: &str, field: &str, root: impl Into<PathBuf>) -> Self {
        self.policy_mut(tool, field).root = Some(root.into());
        self
    }

    /// Lets `text` field `field` of tool `tool` (or the strings nested in that `opaque` field)
    /// hold markdown or HTML that links or loads an external URL, refused by default as
    /// `markup_link` (see [`markup`]). For fields whose text is never rendered, or whose
    /// renderer does not fetch.
    #[must_use]
    pub fn allow_markup_links(mut self, tool: &str, field: &str) -> Self {
        self.policy_mut(tool, field).markup_links = true;
        self
    }

    /// Lets identifier field `field` of tool `tool` start with `-`, refused by default as
    /// `identifier_leading_dash` (a handler passing it to a command line would make it an
    /// option: `-rf`, `--upload-pack=...`). For identifiers that are never arguments of a
    /// command, or are always passed after `--`.
    #[must_use]
    pub fn allow_leading_dash(mut self, tool: &str, field: &str) -> Self {
        self.policy_mut(tool, field).leading_dash = true;
        self
    }

    /// Judges every string nested in `opaque` field `field` of tool `tool` that starts like a
    /// URL (`http:`, `https:`, `ftp:`, `//`) with the URL checks of that field, in addition to
    /// the positions the input schema declares URLs (see [`nested`]). For `serde_json::Value`
    /// and map fields whose URLs the schema cannot name.
    #[must_use]
    pub fn check_nested_urls(mut self, tool: &str, field: &str) -> Self {
        self.policy_mut(tool, field).nested_urls = true;
        self
    }

    /// Resolves URL host names through `resolver`, so their addresses are checked and returned
    /// for pinning in [`SanitizeReport::resolved`].
    #[must_use]
    pub fn with_resolver(mut self, resolver: impl HostResolver + 'static) -> Self {
        self.resolver = Arc::new(resolver);
        self
    }

    /// Maximum identifier length when the field sets no `max_len` (default 128).
    #[must_use]
    pub fn identifier_max_len(mut self, max: usize) -> Self {
        self.identifier_max_len = max;
        self
    }

    /// Sets the argument limits the dispatcher's gate applies to every call before parsing
    /// (see [`limits`]; default [`Limits::default`]).
    #[must_use]
    pub fn argument_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The argument limits of the gate.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Sanitizes `args` (an object valid under `spec.input_schema`) in place.
    ///
    /// On `stripped`, `args` holds the cleaned values. On `blocked`, `args` may be partly cleaned
    /// and must not be used; the report names the reason and field only.
    pub fn sanitize<T: ToolRules + ?Sized>(&self, spec: &T, args: &mut Value) -> SanitizeReport {
        let mut report = SanitizeReport::default();
        // The JSON pointer of the value being judged, in a buffer the thread reuses: it is copied
        // into the report only where something is reported.
        let mut pointer = POINTER.take();
        pointer.clear();
        let result = match args {
            Value::Object(map) => {
                let mut r = Ok(());
                for (key, value) in map.iter_mut() {
                    let field: &dyn FieldRule = match spec.field_rule(key) {
                        Some(field) => field,
                        None => &TextField,
                    };
                    pointer.clear();
                    push_pointer(&mut pointer, key);
                    r = if field.kind() == FieldKind::Opaque {
                        if spec.settled(key) {
                            // Decided when the tool was registered: nothing here to judge.
                            continue;
                        }
                        let at = nested::SchemaAt::field(spec.input_schema(), key);
                        self.walk_opaque(
                            spec.tool_name(),
                            field,
                            at,
                            value,
                            &mut pointer,
                            &mut report,
                        )
                    } else {
                        self.walk(spec.tool_name(), field, value, &mut pointer, &mut report)
                    };
                    if r.is_err() {
                        break;
                    }
                }
                r
            }
            other => self.walk(
                spec.tool_name(),
                &TextField,
                other,
                &mut pointer,
                &mut report,
            ),
        };
        match result {
            Ok(()) => {
                if !report.modifications.is_empty() {
                    report.verdict = Verdict::Stripped;
                }
            }
            Err(reason) => {
                report.verdict = Verdict::Blocked;
                report.reason = Some(reason.to_string());
                report.field = Some(pointer.clone());
                report.modifications.clear();
                report.resolved.clear();
            }
        }
        if pointer.capacity() <= MAX_KEPT_POINTER {
            POINTER.set(pointer);
        }
        report
    }

    fn walk(
        &self,
        tool: &str,
        field: &dyn FieldRule,
        value: &mut Value,
        pointer: &mut String,
        report: &mut SanitizeReport,
    ) -> Result<(), &'static str> {
        if field.kind() == FieldKind::Opaque {
            // An opaque value outside an arguments object: no schema to read.
            let root = Value::Null;
            let at = nested::SchemaAt::field(&root, "");
            return self.walk_opaque(tool, field, at, value, pointer, report);
        }
        match (field.kind(), value) {
            (_, Value::String(s)) => {
                self.judge_string(tool, field, field.kind(), s, pointer, report)
            }
            (FieldKind::Money, Value::Number(n)) => match field.scale() {
                // A decimal in major units, read exactly from the number's text.
                Some(scale) => kinds::minor_units(&n.to_string(), scale)
                    .map(|_| ())
                    .map_err(kinds::DecimalError::code),
                None if n.as_u64().is_some() => Ok(()),
                None => Err("money_invalid"),
            },
            (_, Value::Array(items)) => {
                let len = pointer.len();
                for (i, item) in items.iter_mut().enumerate() {
                    pointer.truncate(len);
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    self.walk(tool, field, item, pointer, report)?;
                }
                pointer.truncate(len);
                Ok(())
            }
            (_, Value::Object(map)) => {
                let len = pointer.len();
                for (key, item) in map.iter_mut() {
                    pointer.truncate(len);
                    push_pointer(pointer, key);
                    // The members a money amount is made of are words of the kind itself, not
                    // text from the caller; any other key is judged.
                    let kind_member = field.kind() == FieldKind::Money
                        && matches!(key.as_str(), "amount" | "currency");
                    if !kind_member {
                        self.check_key(tool, key, pointer, len)?;
                    }
                    self.walk(tool, field, item, pointer, report)?;
                }
                pointer.truncate(len);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Walks an `opaque` value (struct, map, `serde_json::Value`, vector of structs): nested
    /// strings are judged as `text`, or as `url` where the schema at `at` declares a URL or the
    /// field asks for [`Sanitizer::check_nested_urls`]; keys are judged as text; numbers,
    /// booleans and nulls are left alone.
    fn walk_opaque(
        &self,
        tool: &str,
        field: &dyn FieldRule,
        at: nested::SchemaAt<'_>,
        value: &mut Value,
        pointer: &mut String,
        report: &mut SanitizeReport,
    ) -> Result<(), &'static str> {
        match value {
            // One of the schema's own constants (an enum's member): nothing to judge.
            Value::String(s) if at.lists(s) => Ok(()),
            Value::String(s) => {
                let by_option = self
                    .policy(tool, field.name())
                    .is_some_and(|p| p.nested_urls)
                    && nested::looks_like_url(s);
                let kind = if at.is_url() || by_option {
                    FieldKind::Url
                } else {
                    FieldKind::Text
                };
                self.judge_string(tool, field, kind, s, pointer, report)
            }
            Value::Array(items) => {
                let len = pointer.len();
                for (i, item) in items.iter_mut().enumerate() {
                    pointer.truncate(len);
                    pointer.push('/');
                    pointer.push_str(&i.to_string());
                    self.walk_opaque(tool, field, at.item(i), item, pointer, report)?;
                }
                pointer.truncate(len);
                Ok(())
            }
            Value::Object(map) => {
                let len = pointer.len();
                for (key, item) in map.iter_mut() {
                    pointer.truncate(len);
                    push_pointer(pointer, key);
                    self.check_key(tool, key, pointer, len)?;
                    self.walk_opaque(tool, field, at.property(key), item, pointer, report)?;
                }
                pointer.truncate(len);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// A nested object key must be clean text; the report then names the object holding the
    /// key (`pointer` cut back to `len`), never the key itself.
    fn check_key(
        &self,
        tool: &str,
        key: &str,
        pointer: &mut String,
        len: usize,
    ) -> Result<(), &'static str> {
        if self.judge(tool, &TextField, FieldKind::Text, key).verdict != Verdict::Clean {
            pointer.truncate(len);
            return Err("invalid_key");
        }
        Ok(())
    }

    /// Judges one string in place: the value passed on replaces it, modifications and checked
    /// URLs go to the report under `pointer`.
    fn judge_string(
        &self,
        tool: &str,
        field: &dyn FieldRule,
        kind: FieldKind,
        s: &mut String,
        pointer: &str,
        report: &mut SanitizeReport,
    ) -> Result<(), &'static str> {
        let out = self.judge(tool, field, kind, s);
        if out.verdict == Verdict::Blocked {
            return Err(out.reason.unwrap_or("blocked"));
        }
        if let Some(v) = out.replacement.filter(|v| v != s) {
            *s = v;
        }
        for mut m in out.modifications {
            m.field = pointer.to_string();
            report.modifications.push(m);
        }
        if let Some(mut r) = out.resolved {
            r.field = pointer.to_string();
            report.resolved.push(r);
        }
        Ok(())
    }

    /// Judges one string as a value of `field` of tool `tool` (the per-string step of
    /// [`Sanitizer::sanitize`]).
    pub fn sanitize_str(&self, tool: &str, field: &dyn FieldRule, value: &str) -> StrOutcome {
        let judged = self.judge(tool, field, field.kind(), value);
        let value = match judged.verdict {
            Verdict::Blocked => None,
            _ => Some(judged.replacement.unwrap_or_else(|| value.to_string())),
        };
        StrOutcome {
            verdict: judged.verdict,
            reason: judged.reason,
            value,
            modifications: judged.modifications,
            resolved: judged.resolved,
        }
    }

    /// Judges one string as a value of kind `kind` of `field` of tool `tool` (whose policy
    /// applies), without copying a value that goes on unchanged.
    fn judge(&self, tool: &str, field: &dyn FieldRule, kind: FieldKind, value: &str) -> Judged {
        // A string inside an `opaque` value (a struct, map or `serde_json::Value`) is free text.
        let kind = match kind {
            FieldKind::Opaque => FieldKind::Text,
            kind => kind,
        };
        let (cleaned, modifications) = match scan(value, kind) {
            Ok(x) => x,
            Err(reason) => return Judged::blocked(reason),
        };
        let current: &str = cleaned.as_deref().unwrap_or(value);
        // Looked up only by the kinds and paths that read it: most judged strings need no rule.
        let policy = || self.policy(tool, field.name());
        let mut resolved = None;
        let mut namespaced = None;
        let kind_result = match kind {
            FieldKind::Identifier => {
                let max = field
                    .max_len()
                    .map(|m| m as usize)
                    .unwrap_or(self.identifier_max_len);
                check_identifier(current, max).and_then(|()| {
                    if current.starts_with('-') && !policy().is_some_and(|p| p.leading_dash) {
                        Err("identifier_leading_dash")
                    } else {
                        Ok(())
                    }
                })
            }
            FieldKind::Text => markers(current, || !policy().is_some_and(|p| p.markup_links)),
            FieldKind::Name => check_name(current).and_then(|()| markers(current, || false)),
            FieldKind::Email => {
                check_email(current, policy().and_then(|p| p.email_domains.as_deref()))
                    .and_then(|()| markers(current, || false))
            }
            FieldKind::Url => {
                let default = UrlPolicy::default();
                let up = policy().map(|p| &p.url).unwrap_or(&default);
                let with_scheme = url::with_default_scheme(current, field.default_scheme());
                match url::check_url(&with_scheme, up, self.resolver.as_ref()) {
                    Ok(r) => {
                        resolved = Some(r);
                        markers(current, || false)
                    }
                    Err(e) => Err(e),
                }
            }
            FieldKind::Path if field.upstream_namespace() => {
                match path::normalize_relative(current) {
                    Ok(normal) => {
                        if normal != current {
                            namespaced = Some(normal);
                        }
                        markers(current, || false)
                    }
                    Err(e) => Err(e),
                }
            }
            FieldKind::Path => {
                let root = policy()
                    .and_then(|p| p.root.clone())
                    .or_else(|| field.root().map(PathBuf::from));
                match root {
                    None => Err("path_no_root"),
                    Some(root) => {
                        path::confine(current, &root).and_then(|_| markers(current, || false))
                    }
                }
            }
            FieldKind::Money => check_currency(current),
            FieldKind::Opaque => markers(current, || true),
        };
        if let Err(reason) = kind_result {
            return Judged::blocked(reason);
        }
        match cleaned {
            None => Judged {
                verdict: Verdict::Clean,
                reason: None,
                // A URL goes on as the serialization that was checked, never as sent; an
                // upstream path as its normalized form.
                replacement: resolved.as_ref().map(|r| r.url.clone()).or(namespaced),
                modifications,
                resolved,
            },
            Some(v) => Judged {
                verdict: Verdict::Stripped,
                reason: None,
                replacement: Some(v),
                modifications,
                resolved,
            },
        }
    }
}

/// Longest pointer buffer a thread keeps between calls (a longer one, made for deeply nested or
/// long keys, is freed after use).
const MAX_KEPT_POINTER: usize = 4096;

std::thread_local! {
    /// The thread's JSON-pointer buffer, reused from one [`Sanitizer::sanitize`] to the next.
    static POINTER: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// Appends `/key` with JSON-pointer escaping.
fn push_pointer(pointer: &mut String, key: &str) {
    pointer.push('/');
    if !key.bytes().any(|b| b == b'~' || b == b'/') {
        pointer.push_str(key);
        return;
    }
    for c in key.chars() {
        match c {
            '~' => pointer.push_str("~0"),
            '/' => pointer.push_str("~1"),
            c => pointer.push(c),
        }
    }
}

/// What the scan does with one character.
enum Action {
    Keep,
    Strip,
    Block(&'static str),
}

fn is_lenient(kind: FieldKind) -> bool {
    matches!(kind, FieldKind::Text | FieldKind::Name)
}

/// Length of a valid RGI subdivision-flag tag run starting at `chars[i]` (the first tag after
/// U+1F3F4), including the cancel tag; 0 if none.
fn flag_tag_run(chars: &[char], i: usize) -> usize {
    const FLAGS: [&str; 3] = ["gbeng", "gbsct", "gbwls"];
    let mut letters = String::new();
    let mut j = i;
    while j < chars.len() && j - i < 8 {
        let c = chars[j] as u32;
        if c == 0xE007F {
            return if FLAGS.contains(&letters.as_str()) {
                j - i + 1
            } else {
                0
            };
        }
        if (0xE0061..=0xE007A).contains(&c) || (0xE0030..=0xE0039).contains(&c) {
            letters.push(char::from_u32(c - 0xE0000).unwrap_or('?'));
            j += 1;
        } else {
            return 0;
        }
    }
    0
}

/// The character scan. Returns the cleaned value (`None` when nothing was stripped) and the
/// modifications, or a reason code.
fn scan(value: &str, kind: FieldKind) -> Result<(Option<String>, Vec<Modification>), &'static str> {
    // Fast path: printable ASCII (plus tab/newline in text) has nothing to strip or block here.
    if chars::is_printable_ascii(value.as_bytes())
        || (kind == FieldKind::Text
            && value
                .bytes()
                .all(|b| (0x20..0x7f).contains(&b) || b == b'\t' || b == b'\n'))
    {
        return Ok((None, Vec::new()));
    }
    let chars: Vec<char> = value.chars().collect();
    let lenient = is_lenient(kind);
    let mut keep = vec![true; chars.len()];
    let mut stripped: Vec<(CharClass, usize)> = Vec::new();
    let mut marks_run = 0usize;
    let mut flag_tags_left = 0usize;
    // The last kept character that is not a variation selector or emoji component, and the last
    // character (kept or not) that is not a combining mark: what `keep_joiner` looks back at,
    // tracked here so runs of joiners cost O(n), not O(n²).
    let mut last_base: Option<char> = None;
    let mut last_non_mark: Option<char> = None;
    for (i, &c) in chars.iter().enumerate() {
        let info = chars::info(c);
        let class = info.class;
        let action = if flag_tags_left > 0 {
            flag_tags_left -= 1;
            Action::Keep
        } else {
            if c == '\u{1F3F4}' && lenient && class == CharClass::Normal {
                flag_tags_left = flag_tag_run(&chars, i + 1);
            }
            let context = Context {
                kind,
                lenient,
                last_base,
                last_non_mark,
                next: chars.get(i + 1).copied(),
            };
            char_action(c, class, &context, &chars, &keep, i)
        };
        let is_mark = info.mark;
        if !is_mark {
            last_non_mark = Some(c);
        }
        match action {
            Action::Keep => {
                if class != CharClass::VariationSelector && !info.emoji_component {
                    last_base = Some(c);
                }
                if is_mark {
                    marks_run += 1;
                    if lenient && marks_run > MAX_COMBINING_MARKS {
                        return Err("excessive_combining");
                    }
                } else if class == CharClass::Normal {
                    marks_run = 0;
                }
            }
            Action::Strip => {
                keep[i] = false;
                stripped.push((class, i));
            }
            Action::Block(reason) => return Err(reason),
        }
    }
    if stripped.is_empty() {
        return Ok((None, Vec::new()));
    }
    let cleaned: String = chars
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(c, _)| *c)
        .collect();
    Ok((Some(cleaned), modifications(stripped)))
}

/// What the scan knows around one character.
struct Context {
    kind: FieldKind,
    lenient: bool,
    /// The last kept character that is not a variation selector or emoji component.
    last_base: Option<char>,
    /// The last character (kept or not) that is not a combining mark.
    last_non_mark: Option<char>,
    /// The character after this one.
    next: Option<char>,
}

/// What the scan does with character `c` (at `i` of `chars`) of class `class`.
fn char_action(
    c: char,
    class: CharClass,
    cx: &Context,
    chars: &[char],
    keep: &[bool],
    i: usize,
) -> Action {
    let lenient = cx.lenient;
    match class {
        CharClass::Normal => Action::Keep,
        CharClass::Tab | CharClass::Newline if cx.kind == FieldKind::Text => Action::Keep,
        CharClass::Tab | CharClass::Newline => Action::Block("control_char"),
        CharClass::CarriageReturn | CharClass::LineSeparator if lenient => Action::Strip,
        CharClass::CarriageReturn | CharClass::LineSeparator => Action::Block("control_char"),
        CharClass::Control => Action::Block("control_char"),
        CharClass::Bidi => Action::Block("bidi_control"),
        CharClass::Tag => Action::Block("tag_character"),
        CharClass::ZeroWidth if lenient => {
            if keep_joiner(c, cx.last_base, cx.last_non_mark, cx.next) {
                Action::Keep
            } else {
                Action::Strip
            }
        }
        CharClass::VariationSelector if lenient => {
            if keep_selector(chars, keep, i) {
                Action::Keep
            } else {
                Action::Strip
            }
        }
        CharClass::Format | CharClass::PrivateUse | CharClass::Unassigned if lenient => {
            Action::Strip
        }
        CharClass::ZeroWidth | CharClass::Format | CharClass::VariationSelector => {
            Action::Block("invisible_char")
        }
        CharClass::PrivateUse => Action::Block("private_use"),
        CharClass::Unassigned => Action::Block("unassigned"),
    }
}

/// The stripped characters grouped by what they were, with their positions.
fn modifications(stripped: Vec<(CharClass, usize)>) -> Vec<Modification> {
    let mut mods: Vec<Modification> = Vec::new();
    for (class, pos) in stripped {
        let what = match class {
            CharClass::CarriageReturn => "control_char",
            other => other.code(),
        };
        match mods.iter_mut().find(|m| m.what == what) {
            Some(m) => {
                m.count += 1;
                m.positions.push(pos);
            }
            None => mods.push(Modification {
                field: String::new(),
                what: what.to_string(),
                count: 1,
                positions: vec![pos],
            }),
        }
    }
    mods
}

/// ZWJ inside an emoji ZWJ sequence, or ZWJ/ZWNJ between letters of a joining script.
///
/// `prev` is the last kept character before the joiner that is not a variation selector or emoji
/// component, `prev_letter` the last character before it that is not a combining mark, `next` the
/// character after it.
fn keep_joiner(c: char, prev: Option<char>, prev_letter: Option<char>, next: Option<char>) -> bool {
    if c != '\u{200D}' && c != '\u{200C}' {
        return false;
    }
    let Some(prev) = prev else {
        return false;
    };
    let Some(next) = next else {
        return false;
    };
    if c == '\u{200D}'
        && !prev.is_ascii()
        && chars::is_emoji_base(prev)
        && !next.is_ascii()
        && chars::is_emoji_base(next)
    {
        return true;
    }
    matches!(prev_letter, Some(p) if chars::joins_in_script(p)) && chars::joins_in_script(next)
}

/// One emoji presentation selector after an emoji base, one ideographic variation selector after
/// a Han ideograph.
fn keep_selector(chars: &[char], keep: &[bool], i: usize) -> bool {
    if i == 0 || !keep[i - 1] {
        return false;
    }
    let prev = chars[i - 1];
    match chars[i] {
        '\u{FE0E}' | '\u{FE0F}' => {
            chars::is_emoji_base(prev) && chars::classify(prev) == CharClass::Normal
        }
        '\u{E0100}'..='\u{E01EF}' => chars::is_han(prev),
        _ => false,
    }
}

/// Marker patterns on the canonical form, on the payloads hidden in base64 or hex runs, and
/// (prompt injection only) on the leetspeak readings; where `links` says so, also exfiltration
/// markup (`markup_link`). `links` is asked only when the fast path cannot prove the value clean.
fn markers(value: &str, links: impl FnOnce() -> bool) -> Result<(), &'static str> {
    if fast::proves_clean(value) {
        return Ok(());
    }
    full_markers(value, links())
}

/// [`markers`] without the ASCII fast path: the canonical form and every pattern.
fn full_markers(value: &str, links: bool) -> Result<(), &'static str> {
    let canon = canon::canonical(value)?;
    if let Some(hidden) = canon.hidden {
        return Err(hidden);
    }
    if let Some(reason) = patterns::find_marker(&canon.text, true) {
        return Err(reason);
    }
    if links && markup::find(&canon.text) {
        return Err("markup_link");
    }
    if value.len() >= canon::MIN_BASE64_RUN {
        // The payloads are judged together: the fast path, then one canonical form and one
        // pass of the patterns over all of them (a space between two), so a value of many short
        // runs costs what one long decoded text costs. A marker inside one payload is inside
        // the joined text; the patterns' squashed form spans words anyway, as it does over the
        // value itself.
        let joined = canon::joined_payloads(value);
        if !joined.is_empty() && !fast::proves_clean(&joined) {
            let inner = canon::canonical(&joined)?;
            if let Some(reason) = patterns::find_marker(&inner.text, true) {
                return Err(reason);
            }
        }
    }
    for variant in fold::leet_variants(&canon.text) {
        if patterns::find_marker(&variant, false) == Some("prompt_injection") {
            return Err("prompt_injection");
        }
    }
    Ok(())
}

/// The identifier rule, shared by the `identifier` field kind and
/// [`kinds::Identifier`](crate::kinds::Identifier): ASCII letters, digits, `_` and `-`, 1 to
/// `max` of them, at least one a letter or digit.
pub(crate) fn check_identifier(value: &str, max: usize) -> Result<(), &'static str> {
    if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err("identifier_charset");
    }
    if value.is_empty() || value.len() > max {
        return Err("identifier_length");
    }
    if !value.bytes().any(|b| b.is_ascii_alphanumeric()) {
        return Err("identifier_punctuation");
    }
    Ok(())
}

fn is_name_char(c: char) -> bool {
    matches!(
        c,
        ' ' | '\''
            | '\u{2019}'
            | '\u{02BC}'
            | '-'
            | '\u{2010}'
            | '\u{2011}'
            | '.'
            | '\u{200C}'
            | '\u{200D}'
    ) || chars::is_letter_or_mark(c)
        || chars::classify(c) == CharClass::VariationSelector
}

fn check_name(value: &str) -> Result<(), &'static str> {
    if !value.chars().all(is_name_char) || !value.chars().any(char::is_alphabetic) {
        return Err("name_charset");
    }
    for word in value
        .split(|c: char| !chars::is_letter_or_mark(c))
        .filter(|w| !w.is_empty())
    {
        if !word.is_single_script() {
            return Err("mixed_script");
        }
    }
    Ok(())
}

/// A currency code of [`crate::kinds::Currency`].
fn check_currency(value: &str) -> Result<(), &'static str> {
    use serde::de::value::{Error, StrDeserializer};
    crate::kinds::Currency::deserialize(StrDeserializer::<Error>::new(value))
        .map(|_| ())
        .map_err(|_| "money_invalid")
}

#[cfg(test)]
mod tests;
