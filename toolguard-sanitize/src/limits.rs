//! Argument limits: the size, depth, keys, items and string lengths every call meets before any
//! other check spends time on it, whether the arguments arrive as JSON text or already parsed.
//!
//! The limits ([`Limits`]) are the size in bytes of the compact JSON serialization (for text: of
//! the text as sent), the nesting depth, the keys of one object, the keys of the whole document,
//! the array elements and object members of the whole document and the length in bytes of one
//! string (keys included). Text is measured by one pass over its bytes before it is parsed
//! ([`check_text`]), so an oversized or too deeply nested document is never built; a parsed value
//! is walked without recursion ([`check_value`]). When several limits are crossed, the first
//! [`Exceeded`] variant in declaration order is named, for text and parsed values alike.
//!
//! ```
//! use toolguard_sanitize::limits::{Exceeded, Limits, check_text};
//! let deep = format!("{{\"a\":{}{}}}", "[".repeat(40), "]".repeat(40));
//! assert_eq!(check_text(deep.as_bytes(), &Limits::default()), Err(Exceeded::Depth));
//! ```

use serde_json::Value;
use smallvec::SmallVec;

/// Default largest argument document, in bytes ([`Limits::max_bytes`]).
pub const MAX_ARGUMENT_BYTES: usize = 1 << 20;

/// The argument limits of the gate. `Limits::default()` holds the defaults named in the module
/// documentation; each setter replaces one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub struct Limits {
    /// Most bytes of the arguments (the text as sent, or the compact serialization of a value).
    pub max_bytes: usize,
    /// Most nested arrays and objects (the arguments object itself is depth 1).
    pub max_depth: usize,
    /// Most keys in one object.
    pub max_object_keys: usize,
    /// Most keys in the whole document.
    pub max_total_keys: usize,
    /// Most array elements and object members in the whole document.
    pub max_items: usize,
    /// Most bytes in one string or key (as decoded, UTF-8).
    pub max_string_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_bytes: MAX_ARGUMENT_BYTES,
            max_depth: 32,
            max_object_keys: 512,
            max_total_keys: 8192,
            max_items: 16_384,
            max_string_bytes: 256 << 10,
        }
    }
}

impl Limits {
    /// Sets [`Limits::max_bytes`].
    pub fn max_bytes(mut self, n: usize) -> Self {
        self.max_bytes = n;
        self
    }

    /// Sets [`Limits::max_depth`].
    pub fn max_depth(mut self, n: usize) -> Self {
        self.max_depth = n;
        self
    }

    /// Sets [`Limits::max_object_keys`].
    pub fn max_object_keys(mut self, n: usize) -> Self {
        self.max_object_keys = n;
        self
    }

    /// Sets [`Limits::max_total_keys`].
    pub fn max_total_keys(mut self, n: usize) -> Self {
        self.max_total_keys = n;
        self
    }

    /// Sets [`Limits::max_items`].
    pub fn max_items(mut self, n: usize) -> Self {
        self.max_items = n;
        self
    }

    /// Sets [`Limits::max_string_bytes`].
    pub fn max_string_bytes(mut self, n: usize) -> Self {
        self.max_string_bytes = n;
        self
    }
}

/// Which limit was crossed; when several are, the first in this order is reported, so text and
/// parsed values name the same one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Exceeded {
    /// [`Limits::max_bytes`]: `too_large`.
    Bytes,
    /// [`Limits::max_depth`]: `too_deep`.
    Depth,
    /// [`Limits::max_object_keys`]: `too_many_keys`.
    ObjectKeys,
    /// [`Limits::max_total_keys`]: `too_many_keys_total`.
    TotalKeys,
    /// [`Limits::max_items`]: `too_many_items`.
    Items,
    /// [`Limits::max_string_bytes`]: `string_too_long`.
    LongString,
}

impl Exceeded {
    /// The reason code and the sentence that says which limit and what to do.
    pub fn describe(self, limits: &Limits) -> (&'static str, String) {
        let (code, message) = match self {
            Exceeded::Bytes => (
                "too_large",
                format!(
                    "arguments exceed {} bytes; send less data",
                    limits.max_bytes
                ),
            ),
            Exceeded::Depth => (
                "too_deep",
                format!(
                    "arguments nest deeper than {} levels; flatten them",
                    limits.max_depth
                ),
            ),
            Exceeded::ObjectKeys => (
                "too_many_keys",
                format!(
                    "an object of the arguments has more than {} keys",
                    limits.max_object_keys
                ),
            ),
            Exceeded::TotalKeys => (
                "too_many_keys_total",
                format!(
                    "the arguments have more than {} keys in all",
                    limits.max_total_keys
                ),
            ),
            Exceeded::Items => (
                "too_many_items",
                format!(
                    "the arguments have more than {} array elements and object members in all",
                    limits.max_items
                ),
            ),
            Exceeded::LongString => (
                "string_too_long",
                format!(
                    "a string of the arguments is longer than {} bytes",
                    limits.max_string_bytes
                ),
            ),
        };
        (code, message)
    }
}

/// Per-object state of the text scan: is it an object, how many keys so far.
struct Frame {
    object: bool,
    keys: usize,
}

/// Checks JSON text against `limits` in one pass over its bytes, without building anything; invalid
/// JSON text is left to the parser.
///
/// One pass over JSON text: depth, keys and string lengths, without building anything. Strings
/// are measured as written (an escape such as `\u00e9` counts its six bytes), which bounds the
/// decoded length from above within a factor of six; over-long escapes are rare in honest input.
///
/// The pass stops early: at once on [`Exceeded::Bytes`] (before reading) and
/// [`Exceeded::Depth`] (nothing ranks above it), and once another limit is crossed it only
/// looks for a higher-ranked one (strings are then skipped without being measured).
pub fn check_text(bytes: &[u8], limits: &Limits) -> Result<(), Exceeded> {
    scan_text(bytes, limits, false)
}

/// [`check_text`] for a reader that only needs to know whether the text is within `limits`:
/// the pass stops at the first limit crossed, in reading order ([`Exceeded::Bytes`] first), so
/// a message of a million keys costs the scan of its first [`Limits::max_object_keys`] keys.
/// The limit named may differ from [`check_text`]'s when several are crossed.
pub fn check_text_quick(bytes: &[u8], limits: &Limits) -> Result<(), Exceeded> {
    scan_text(bytes, limits, true)
}

fn scan_text(bytes: &[u8], limits: &Limits, first_wins: bool) -> Result<(), Exceeded> {
    if bytes.len() > limits.max_bytes {
        return Err(Exceeded::Bytes);
    }
    let mut scan = TextScan {
        limits,
        stack: SmallVec::new(),
        total_keys: 0,
        items: 0,
        first: false,
        found: Found(None),
        first_wins,
    };
    scan.run(bytes)
}

/// The state of [`check_text`]'s pass.
struct TextScan<'l> {
    limits: &'l Limits,
    // Ordinary arguments nest a few levels: their frames stay on the stack (no allocation).
    stack: SmallVec<[Frame; 16]>,
    total_keys: usize,
    items: usize,
    // Set right after an opening bracket or brace: the next token is the container's first
    // item unless it closes it.
    first: bool,
    found: Found,
    /// Stop at the first limit crossed ([`check_text_quick`]).
    first_wins: bool,
}

impl TextScan<'_> {
    fn run(&mut self, bytes: &[u8]) -> Result<(), Exceeded> {
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if self.first && !b.is_ascii_whitespace() {
                self.first = false;
                if b != b']' && b != b'}' {
                    self.items += 1;
                }
            }
            match b {
                b',' => self.items += 1,
                b'"' => {
                    // Measured only while a string could still be the limit named.
                    let cap = if self.found.ranks_above(Exceeded::LongString) {
                        self.limits.max_string_bytes
                    } else {
                        0
                    };
                    let (end, over) = string_end(bytes, i + 1, cap);
                    if over {
                        self.found.add(Exceeded::LongString);
                    }
                    i = end;
                }
                b'{' | b'[' => {
                    if self.stack.len() >= self.limits.max_depth {
                        // Nothing ranks above it: stop here.
                        return Err(Exceeded::Depth);
                    }
                    self.stack.push(Frame {
                        object: b == b'{',
                        keys: 0,
                    });
                    self.first = true;
                }
                b'}' | b']' => {
                    self.stack.pop();
                }
                b':' => self.key(),
                _ => {}
            }
            if self.first_wins {
                if self.items > self.limits.max_items {
                    self.found.add(Exceeded::Items);
                }
                self.found.result()?;
            }
            i += 1;
        }
        if self.items > self.limits.max_items {
            self.found.add(Exceeded::Items);
        }
        self.found.result()
    }

    /// A member of the innermost object.
    fn key(&mut self) {
        if let Some(frame) = self.stack.last_mut().filter(|f| f.object) {
            frame.keys += 1;
            self.total_keys += 1;
            if frame.keys > self.limits.max_object_keys {
                self.found.add(Exceeded::ObjectKeys);
            }
            if self.total_keys > self.limits.max_total_keys {
                self.found.add(Exceeded::TotalKeys);
            }
        }
    }
}

/// The most important limit crossed so far.
#[derive(Clone, Copy)]
struct Found(Option<Exceeded>);

impl Found {
    fn add(&mut self, over: Exceeded) {
        self.0 = Some(self.0.map_or(over, |o| o.min(over)));
    }

    /// Whether finding `over` now would change the limit named.
    fn ranks_above(&self, over: Exceeded) -> bool {
        self.0.is_none_or(|found| over < found)
    }

    fn result(self) -> Result<(), Exceeded> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Index of the closing quote of the string whose content starts at `start` (or the end of the
/// input when it is unterminated: the parser reports that), and whether its content is longer
/// than `cap` bytes as written (`cap == 0`: not measured). Finds quotes and backslashes with
/// `memchr`, a word at a time.
fn string_end(bytes: &[u8], start: usize, cap: usize) -> (usize, bool) {
    let mut j = start;
    while let Some(k) = memchr::memchr2(b'"', b'\\', &bytes[j.min(bytes.len())..]) {
        let at = j + k;
        if bytes[at] == b'"' {
            return (at, cap != 0 && at - start > cap);
        }
        // A backslash escapes the next byte.
        j = at + 2;
    }
    (
        bytes.len(),
        cap != 0 && bytes.len().saturating_sub(start) > cap,
    )
}

/// Walks a parsed value without recursion, adding up its compact serialized size; stops as
/// soon as the size limit is crossed, and before looking inside a string, array or object whose
/// smallest serialization would cross it (a 50 MB string is refused by its length, an object of
/// a million keys by its member count, neither read). [`Exceeded::Bytes`] comes first in the
/// ranking of limits, so stopping early names the limit the full walk would name.
pub fn check_value(value: &Value, limits: &Limits) -> Result<(), Exceeded> {
    // (value, depth of the container holding it)
    let mut todo: Vec<(&Value, usize)> = vec![(value, 0)];
    let mut bytes = 0usize;
    let mut total_keys = 0usize;
    let mut item_count = 0usize;
    let mut found = Found(None);
    while let Some((v, depth)) = todo.pop() {
        // The least this value adds: a string its bytes and quotes, an array one byte and a
        // comma per element, an object `"":0,` per member.
        let least = match v {
            Value::String(s) => s.len().saturating_add(2),
            Value::Array(items) => items.len().saturating_mul(2).saturating_add(1),
            Value::Object(map) => map.len().saturating_mul(5).saturating_add(1),
            _ => 0,
        };
        if bytes.saturating_add(least) > limits.max_bytes {
            return Err(Exceeded::Bytes);
        }
        bytes = bytes.saturating_add(scalar_size(v, limits, &mut found));
        match v {
            Value::Array(items) => {
                if depth >= limits.max_depth {
                    found.add(Exceeded::Depth);
                }
                // Brackets and commas.
                bytes = bytes.saturating_add(items.len().max(1) + 1);
                item_count += items.len();
                todo.extend(items.iter().map(|item| (item, depth + 1)));
            }
            Value::Object(map) => {
                if depth >= limits.max_depth {
                    found.add(Exceeded::Depth);
                }
                if map.len() > limits.max_object_keys {
                    found.add(Exceeded::ObjectKeys);
                }
                total_keys += map.len();
                if total_keys > limits.max_total_keys {
                    found.add(Exceeded::TotalKeys);
                }
                bytes = bytes.saturating_add(map.len().max(1) + 1);
                item_count += map.len();
                for (key, item) in map {
                    if bytes.saturating_add(key.len()) > limits.max_bytes {
                        return Err(Exceeded::Bytes);
                    }
                    // The key, its quotes and the colon.
                    bytes = bytes.saturating_add(string_size(key, limits, &mut found) + 1);
                    todo.push((item, depth + 1));
                }
            }
            _ => {}
        }
        if bytes > limits.max_bytes {
            return Err(Exceeded::Bytes);
        }
    }
    if item_count > limits.max_items {
        found.add(Exceeded::Items);
    }
    found.result()
}

/// Serialized size of a scalar (0 for arrays and objects, whose parts are counted apart).
fn scalar_size(v: &Value, limits: &Limits, found: &mut Found) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => number_size(n),
        Value::String(s) => string_size(s, limits, found),
        Value::Array(_) | Value::Object(_) => 0,
    }
}

/// Serialized size of a string (quotes and escapes included); notes an over-long string.
fn string_size(s: &str, limits: &Limits, found: &mut Found) -> usize {
    if s.len() > limits.max_string_bytes {
        found.add(Exceeded::LongString);
    }
    let escaped: usize = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    s.len() + escaped + 2
}

/// Length of a number as serde_json writes it.
fn number_size(n: &serde_json::Number) -> usize {
    use std::fmt::Write as _;
    struct Count(usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing to a counter cannot fail.
    let _ = write!(c, "{n}");
    c.0
}
