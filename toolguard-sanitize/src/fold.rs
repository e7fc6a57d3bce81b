//! Look-alike folding for the [canonical form](super::canon): symbols that NFKC and the UTS #39
//! confusable skeleton leave alone but that read as ASCII to a model, and leetspeak.
//!
//! - **Brackets and bars**: `‹ › ⟨ ⟩ 〈 〉 ˂ ˃ ᐸ ᐳ ❮ ❯ ❬ ❭ ⧼ ⧽` read `<` `>`; `ǀ ∣ │ ┃ ❘ ￨ ⏐ ׀ ¦`
//!   read `|`; `【 】 〔 〕 ⟦ ⟧ ⁅ ⁆` read `[` `]`; `∕ ⁄ ⧸` read `/` (so `‹/system›` and
//!   `⟨ǀim_startǀ⟩` are role tags). `« »` stay: they are French quotation marks.
//! - **Letter-like symbols**: small capitals (`ɪɢɴᴏʀᴇ`), regional indicators (`🇮🇬🇳🇴🇷🇪`), negative
//!   circled and squared letters (`🅘🅖🅝`, `🅸🅶🅽`) read as their letters.
//! - **Leetspeak** ([`leet_variants`]): in a word that mixes letters with `0 1 3 4 5 7 8 9 @ $ !`,
//!   those read as `o i e a s t b g a s i` (and `1` as `l` in a second variant), so
//!   `1gn0r3 pr3v10u5 1n5truct10n5` reads `ignore previous instructions`. Only the
//!   prompt-injection markers are matched on these variants.

/// The ASCII character a look-alike symbol or letter-like symbol reads as; `None` for anything
/// else.
pub fn fold_symbol(c: char) -> Option<char> {
    let folded = match c {
        '\u{2039}' | '\u{27E8}' | '\u{3008}' | '\u{2329}' | '\u{02C2}' | '\u{1438}'
        | '\u{276E}' | '\u{276C}' | '\u{29FC}' | '\u{FE64}' | '\u{2A79}' => '<',
        '\u{203A}' | '\u{27E9}' | '\u{3009}' | '\u{232A}' | '\u{02C3}' | '\u{1433}'
        | '\u{276F}' | '\u{276D}' | '\u{29FD}' | '\u{FE65}' | '\u{2A7A}' => '>',
        '\u{01C0}' | '\u{2223}' | '\u{2502}' | '\u{2503}' | '\u{2758}' | '\u{FFE8}'
        | '\u{23D0}' | '\u{05C0}' | '\u{00A6}' | '\u{FF5C}' => '|',
        '\u{3010}' | '\u{3014}' | '\u{27E6}' | '\u{2045}' | '\u{FF3B}' => '[',
        '\u{3011}' | '\u{3015}' | '\u{27E7}' | '\u{2046}' | '\u{FF3D}' => ']',
        '\u{2215}' | '\u{2044}' | '\u{29F8}' => '/',
        '\u{1F1E6}'..='\u{1F1FF}' => offset(c, 0x1F1E6),
        '\u{1F150}'..='\u{1F169}' => offset(c, 0x1F150),
        '\u{1F170}'..='\u{1F189}' => offset(c, 0x1F170),
        '\u{1F130}'..='\u{1F149}' => offset(c, 0x1F130),
        _ => return small_capital(c),
    };
    Some(folded)
}

/// `a` + (c - base).
fn offset(c: char, base: u32) -> char {
    char::from_u32(u32::from(b'a') + (c as u32 - base)).unwrap_or('?')
}

/// The letter a small capital reads as.
fn small_capital(c: char) -> Option<char> {
    Some(match c {
        '\u{1D00}' => 'a',
        '\u{0299}' => 'b',
        '\u{1D04}' => 'c',
        '\u{1D05}' => 'd',
        '\u{1D07}' => 'e',
        '\u{A730}' => 'f',
        '\u{0262}' => 'g',
        '\u{029C}' => 'h',
        '\u{026A}' => 'i',
        '\u{1D0A}' => 'j',
        '\u{1D0B}' => 'k',
        '\u{029F}' => 'l',
        '\u{1D0D}' => 'm',
        '\u{0274}' => 'n',
        '\u{1D0F}' => 'o',
        '\u{1D18}' => 'p',
        '\u{A7AF}' => 'q',
        '\u{0280}' => 'r',
        '\u{A731}' => 's',
        '\u{1D1B}' => 't',
        '\u{1D1C}' => 'u',
        '\u{1D20}' => 'v',
        '\u{1D21}' => 'w',
        '\u{028F}' => 'y',
        '\u{1D22}' => 'z',
        _ => return None,
    })
}

/// The letter a leetspeak character reads as (`one` is what `1` becomes).
fn leet(c: u8, one: u8) -> Option<u8> {
    Some(match c {
        b'0' => b'o',
        b'1' => one,
        b'3' => b'e',
        b'4' | b'@' => b'a',
        b'5' | b'$' => b's',
        b'7' => b't',
        b'8' => b'b',
        b'9' => b'g',
        b'!' => b'i',
        _ => return None,
    })
}

/// The leetspeak readings of a canonical string (`1` as `i`, then as `l`); empty when no word
/// mixes letters and leet characters.
pub fn leet_variants(canonical: &str) -> Vec<String> {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'@' | b'$' | b'!');
    let bytes = canonical.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_word(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_word(bytes[i]) {
            i += 1;
        }
        let word = &bytes[start..i];
        let letters = word.iter().any(u8::is_ascii_alphabetic);
        if letters && word.iter().any(|&b| leet(b, b'i').is_some()) {
            spans.push((start, i));
        }
    }
    if spans.is_empty() {
        return Vec::new();
    }
    let ones: &[u8] = if spans.iter().any(|&(s, e)| bytes[s..e].contains(&b'1')) {
        b"il"
    } else {
        b"i"
    };
    ones.iter()
        .map(|&one| {
            let mut out = bytes.to_vec();
            for &(s, e) in &spans {
                for b in &mut out[s..e] {
                    if let Some(l) = leet(*b, one) {
                        *b = l;
                    }
                }
            }
            // Only ASCII bytes were replaced by ASCII bytes.
            String::from_utf8(out).unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_fold() {
        let fold = |s: &str| -> String { s.chars().map(|c| fold_symbol(c).unwrap_or(c)).collect() };
        assert_eq!(fold("‹/system›"), "</system>");
        assert_eq!(fold("⟨ǀim_startǀ⟩"), "<|im_start|>");
        assert_eq!(fold("〈system〉【INST】"), "<system>[INST]");
        assert_eq!(fold("ɪɢɴᴏʀᴇ"), "ignore");
        assert_eq!(fold("🇮🇬🇳🇴🇷🇪"), "ignore");
        assert_eq!(fold("🅘🅖🅝🅞🅡🅔 🅸🅶🅽🅾🆁🅴"), "ignore ignore");
        assert_eq!(fold("«quoted» café"), "«quoted» café");
    }

    #[test]
    fn leet_words_only() {
        assert_eq!(
            leet_variants("1gn0r3 pr3v10u5 1n5truct10n5"),
            vec![
                "ignore previous instructions".to_string(),
                "lgnore prevlous lnstructlons".to_string()
            ]
        );
        assert_eq!(
            leet_variants("5y5t3m pr0mpt"),
            vec!["system prompt".to_string()]
        );
        // Numbers alone stay numbers; nothing to read.
        assert!(leet_variants("order 1234 costs $5, 30% off").is_empty());
    }
}
