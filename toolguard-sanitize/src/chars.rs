//! Character classes the sanitizer cares about, taken from the Unicode properties of the
//! `unicode-properties` and `unicode-script` crates (no hand-kept tables).

use unicode_properties::{GeneralCategory, UnicodeEmoji, UnicodeGeneralCategory};
use unicode_script::{Script, UnicodeScript};

/// What a single code point is, for sanitization purposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CharClass {
    /// An ordinary visible character (or space).
    Normal,
    /// `U+0009` tab.
    Tab,
    /// `U+000A` line feed.
    Newline,
    /// `U+000D` carriage return.
    CarriageReturn,
    /// Any other C0/C1 control (`Cc`), and the control pictures U+2400–U+2426 (`␀`, `␊`, `␛`,
    /// `␤`), which stand in for one where text shows them.
    Control,
    /// Zero-width space/joiners: U+200B–U+200D, U+2060.
    ZeroWidth,
    /// Other format characters (`Cf`) and default-ignorable fillers: soft hyphen, U+FEFF,
    /// U+180E, U+2061–U+2064, U+200E/U+200F, Hangul fillers, combining grapheme joiner.
    Format,
    /// Bidirectional embedding/override/isolate controls: U+202A–U+202E, U+2066–U+2069.
    Bidi,
    /// Tag characters U+E0000–U+E007F.
    Tag,
    /// Variation selectors U+FE00–U+FE0F, U+E0100–U+E01EF and Mongolian free variation selectors.
    VariationSelector,
    /// U+2028 line separator, U+2029 paragraph separator.
    LineSeparator,
    /// Private-use code points (`Co`).
    PrivateUse,
    /// Unassigned code points and noncharacters (`Cn`).
    Unassigned,
}

impl CharClass {
    /// The stable code used in [`Modification::what`](super::Modification::what) and reasons.
    pub fn code(self) -> &'static str {
        match self {
            CharClass::Normal => "normal",
            CharClass::Tab
            | CharClass::Newline
            | CharClass::CarriageReturn
            | CharClass::Control => "control_char",
            CharClass::ZeroWidth => "zero_width",
            CharClass::Format => "format_char",
            CharClass::Bidi => "bidi_control",
            CharClass::Tag => "tag_character",
            CharClass::VariationSelector => "variation_selector",
            CharClass::LineSeparator => "line_separator",
            CharClass::PrivateUse => "private_use",
            CharClass::Unassigned => "unassigned",
        }
    }
}

/// Classifies one code point.
pub fn classify(c: char) -> CharClass {
    if c.is_ascii() {
        return match c {
            '\t' => CharClass::Tab,
            '\n' => CharClass::Newline,
            '\r' => CharClass::CarriageReturn,
            '\0'..='\x1f' | '\x7f' => CharClass::Control,
            _ => CharClass::Normal,
        };
    }
    match c {
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => return CharClass::Bidi,
        '\u{E0000}'..='\u{E007F}' => return CharClass::Tag,
        '\u{FE00}'..='\u{FE0F}'
        | '\u{E0100}'..='\u{E01EF}'
        | '\u{180B}'..='\u{180D}'
        | '\u{180F}' => return CharClass::VariationSelector,
        '\u{200B}'..='\u{200D}' | '\u{2060}' => return CharClass::ZeroWidth,
        // Default-ignorable code points that are not `Cf`: combining grapheme joiner, Hangul
        // fillers, Khmer inherent vowels. They render as nothing and split keywords.
        '\u{034F}' | '\u{115F}' | '\u{1160}' | '\u{3164}' | '\u{FFA0}' | '\u{17B4}'
        | '\u{17B5}' => return CharClass::Format,
        '\u{2028}' | '\u{2029}' => return CharClass::LineSeparator,
        // The Control Pictures block: a picture of a control imitates it (a `␊Human:` reads
        // as a turn of its own where it is rendered). The rest of the block is unassigned.
        '\u{2400}'..='\u{243F}' => return CharClass::Control,
        _ => {}
    }
    match c.general_category() {
        GeneralCategory::Control => CharClass::Control,
        GeneralCategory::Format => CharClass::Format,
        GeneralCategory::PrivateUse => CharClass::PrivateUse,
        GeneralCategory::Unassigned | GeneralCategory::Surrogate => CharClass::Unassigned,
        _ => CharClass::Normal,
    }
}

/// True for a character that can start or continue an emoji sequence as a visible base
/// (`Emoji=Yes`, including digits, `#` and `*` of keycap sequences).
pub fn is_emoji_base(c: char) -> bool {
    c.is_emoji_char()
}

/// True for skin-tone modifiers and other emoji components that may sit between a base and a
/// joiner (U+1F3FB–U+1F3FF, U+20E3 combining keycap).
pub fn is_emoji_component(c: char) -> bool {
    !c.is_ascii() && c.is_emoji_component()
}

/// True for a letter or mark (`L*`, `M*`).
pub fn is_letter_or_mark(c: char) -> bool {
    use unicode_properties::GeneralCategoryGroup as G;
    matches!(c.general_category_group(), G::Letter | G::Mark)
}

/// True for a combining mark (`Mn`, `Mc`, `Me`).
pub fn is_mark(c: char) -> bool {
    use unicode_properties::GeneralCategoryGroup as G;
    c.general_category_group() == G::Mark
}

/// True for a letter or mark of a script that uses ZWJ/ZWNJ in ordinary spelling (anything but
/// Latin, Greek, Cyrillic, Common and Inherited): Arabic, Persian, Indic scripts and so on.
pub fn joins_in_script(c: char) -> bool {
    if c.is_ascii() || !is_letter_or_mark(c) {
        return false;
    }
    !matches!(
        c.script(),
        Script::Latin | Script::Greek | Script::Cyrillic | Script::Common | Script::Inherited
    )
}

/// True for a Han ideograph (base of an ideographic variation sequence).
pub fn is_han(c: char) -> bool {
    c.script() == Script::Han
}

/// A non-Latin word whose every letter has an ASCII Latin skeleton (Cyrillic `Рауре` reads as
/// "Payne"): a whole-script confusable.
pub fn whole_script_confusable(word: &str) -> bool {
    if word.is_ascii() || word.chars().any(|c| c.script() == Script::Latin) {
        return false;
    }
    let mut letters = 0;
    for c in word.chars().filter(|c| !is_mark(*c)) {
        letters += 1;
        let mut buf = [0u8; 4];
        let mut skel = unicode_security::skeleton(c.encode_utf8(&mut buf)).filter(|s| !is_mark(*s));
        let ascii = match (skel.next(), skel.next()) {
            (Some(s), None) => s.is_ascii_alphabetic(),
            _ => false,
        };
        if !ascii {
            return false;
        }
    }
    letters > 1
}

/// True for a non-spacing or enclosing combining mark (`Mn`, `Me`): what the matching form
/// drops, so `ign\u{0336}ore` (strike-through) reads `ignore`.
pub fn is_nonspacing_mark(c: char) -> bool {
    matches!(
        c.general_category(),
        GeneralCategory::NonspacingMark | GeneralCategory::EnclosingMark
    )
}

/// The properties of one character the character scan looks at, worked out together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CharInfo {
    /// Its class ([`classify`]).
    pub class: CharClass,
    /// A combining mark ([`is_mark`]).
    pub mark: bool,
    /// An emoji component ([`is_emoji_component`]).
    pub emoji_component: bool,
}

impl CharInfo {
    fn of(c: char) -> Self {
        CharInfo {
            class: classify(c),
            mark: is_mark(c),
            emoji_component: is_emoji_component(c),
        }
    }
}

/// A direct-mapped cache of [`CharInfo`] by character, one per thread: text uses few distinct
/// characters, so the Unicode property tables are searched once per character, not at every
/// occurrence.
struct InfoCache {
    slots: Box<[(char, CharInfo)]>,
}

const INFO_SLOTS: usize = 4096;

thread_local! {
    static INFO_CACHE: std::cell::RefCell<InfoCache> = std::cell::RefCell::new(InfoCache {
        // `'\0'` is ASCII and never cached, so it marks an empty slot.
        slots: vec![('\0', CharInfo::of('\0')); INFO_SLOTS].into_boxed_slice(),
    });
}

/// [`classify`], [`is_mark`] and [`is_emoji_component`] of `c` at once, cached per thread for
/// characters outside ASCII.
pub fn info(c: char) -> CharInfo {
    if c.is_ascii() {
        return CharInfo {
            class: classify(c),
            mark: false,
            emoji_component: false,
        };
    }
    INFO_CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let slot = &mut cache.slots[c as usize % INFO_SLOTS];
        if slot.0 != c {
            *slot = (c, CharInfo::of(c));
        }
        slot.1
    })
}

/// True when every byte of `bytes` is printable ASCII (`0x20..=0x7E`), the text the character
/// scan keeps as it is. Reads eight bytes at a time.
pub fn is_printable_ascii(bytes: &[u8]) -> bool {
    all_words(bytes, printable_word, printable_byte)
}

/// True when every byte of `bytes` is printable ASCII other than `"` and `\`: a string JSON
/// writes as it is between its quotes (and its own NFC form). Reads eight bytes at a time.
pub fn is_plain_json_text(bytes: &[u8]) -> bool {
    all_words(
        bytes,
        |x| printable_word(x) && !has_byte(x, b'"') && !has_byte(x, b'\\'),
        |b| printable_byte(b) && b != b'"' && b != b'\\',
    )
}

/// One in every byte of a word.
const ONES: u64 = 0x0101_0101_0101_0101;
/// The high bit of every byte of a word.
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether `word` holds for every eight bytes of `bytes` (read as little-endian words) and
/// `byte` for the bytes after the last whole word.
fn all_words(bytes: &[u8], word: impl Fn(u64) -> bool, byte: impl Fn(u8) -> bool) -> bool {
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(chunk);
        if !word(u64::from_le_bytes(eight)) {
            return false;
        }
    }
    words.remainder().iter().all(|&b| byte(b))
}

fn printable_byte(b: u8) -> bool {
    (0x20..=0x7e).contains(&b)
}

/// Whether all eight bytes of `x` are printable ASCII:
/// - a byte below `0x20` is the only way subtracting `0x20` from every byte can set a high bit
///   that the byte itself does not have (the lowest such byte borrows nothing from below it);
/// - a byte above `0x7E` either has its high bit set or gets it by adding 1 to every byte (and
///   only such a byte can carry into the next one).
fn printable_word(x: u64) -> bool {
    let below = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
    let above = (x.wrapping_add(ONES) | x) & HIGH;
    below | above == 0
}

/// Whether a byte of `x` is `byte`: the bytes equal to it are the zero bytes of `x ^ byte…`,
/// and subtracting 1 from every byte sets a high bit not already set only below a zero byte
/// (exact for whether there is one, not for which).
fn has_byte(x: u64, byte: u8) -> bool {
    let y = x ^ (ONES * u64::from(byte));
    y.wrapping_sub(ONES) & !y & HIGH != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_of_the_brief() {
        for c in ['\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}'] {
            assert_eq!(classify(c), CharClass::ZeroWidth, "{:X}", c as u32);
        }
        for c in [
            '\u{200E}', '\u{200F}', '\u{2061}', '\u{2062}', '\u{2063}', '\u{2064}', '\u{FEFF}',
            '\u{00AD}', '\u{180E}', '\u{3164}',
        ] {
            assert_eq!(classify(c), CharClass::Format, "{:X}", c as u32);
        }
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2069}',
        ] {
            assert_eq!(classify(c), CharClass::Bidi);
        }
        for c in ['\u{E0000}', '\u{E0001}', '\u{E0041}', '\u{E007F}'] {
            assert_eq!(classify(c), CharClass::Tag);
        }
        for c in ['\u{FE00}', '\u{FE0F}', '\u{E0100}', '\u{E01EF}'] {
            assert_eq!(classify(c), CharClass::VariationSelector);
        }
        assert_eq!(classify('\u{0000}'), CharClass::Control);
        assert_eq!(classify('\u{0085}'), CharClass::Control);
        assert_eq!(classify('\u{009B}'), CharClass::Control);
        assert_eq!(classify('\t'), CharClass::Tab);
        assert_eq!(classify('\n'), CharClass::Newline);
        assert_eq!(classify('\u{E000}'), CharClass::PrivateUse);
        assert_eq!(classify('\u{F0000}'), CharClass::PrivateUse);
        assert_eq!(classify('\u{FFFF}'), CharClass::Unassigned);
        assert_eq!(classify('\u{2028}'), CharClass::LineSeparator);
        for c in ['a', '\u{0301}', '\u{1F3FB}', 'Д', '\u{200B}', '\u{202E}'] {
            // Twice: once worked out, once from the cache.
            for _ in 0..2 {
                let i = info(c);
                assert_eq!(i.class, classify(c));
                assert_eq!(i.mark, is_mark(c));
                assert_eq!(i.emoji_component, is_emoji_component(c));
            }
        }
        for c in ['a', 'é', '李', 'Д', '😀', ' ', '\u{00A0}', '\''] {
            assert_eq!(classify(c), CharClass::Normal, "{c}");
        }
    }

    /// Every byte value at every position of buffers of 0 to 19 bytes (so in the words and in
    /// the remainder), next to printable and unprintable neighbours.
    #[test]
    fn printable_ascii_of_every_byte_at_every_position() {
        let naive = |bytes: &[u8]| bytes.iter().all(|b| (0x20..=0x7e).contains(b));
        for len in 0..20 {
            for fill in [b'a', b' ', b'~', 0x1f, 0x7f, 0xff, 0x00, 0x80] {
                for at in 0..len {
                    for b in 0..=255u8 {
                        let mut buf = vec![fill; len];
                        buf[at] = b;
                        assert_eq!(is_printable_ascii(&buf), naive(&buf), "{buf:?}");
                    }
                }
            }
        }
    }

    /// The same for text JSON writes as it is, next to quotes and backslashes too.
    #[test]
    fn plain_json_text_of_every_byte_at_every_position() {
        let naive = |bytes: &[u8]| {
            bytes
                .iter()
                .all(|&b| (0x20..=0x7e).contains(&b) && b != b'"' && b != b'\\')
        };
        for len in 0..20 {
            for fill in [
                b'a', b' ', b'~', b'"', b'\\', b'!', b']', 0x1f, 0x7f, 0xff, 0x00,
            ] {
                for at in 0..len {
                    for b in 0..=255u8 {
                        let mut buf = vec![fill; len];
                        buf[at] = b;
                        assert_eq!(is_plain_json_text(&buf), naive(&buf), "{buf:?}");
                    }
                }
            }
        }
    }
}
