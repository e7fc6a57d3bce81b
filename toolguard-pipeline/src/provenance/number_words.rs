//! Amounts written in number words, read as the number a model asked to pay them writes in
//! digits: English (`one thousand two hundred and fifty`, `12 thousand`) and the number words of
//! German and Dutch (`zwölfhundertfünfzig`, `twaalfhonderd`), French (`mille deux cent
//! cinquante`, `quatre-vingt-dix`), Spanish (`mil doscientos cincuenta`), Italian
//! (`milleduecentocinquanta`) and Portuguese (`mil e duzentos`), whose words join into one
//! (`zweitausenddreihundert`) or stand apart.
//!
//! Only a reading of two words (or pieces of one word) or more counts: one number word alone is
//! prose (`one of them`, `Otto`, `elf`), and the amounts a text states in digits are read
//! elsewhere.

/// At most this many tokens are read for one amount.
const MAX_TOKENS: usize = 16;

/// The value of an English number word (`twelve`, `ninety`), or of a scale (`hundred` as
/// `Err(100)`, `thousand`, `million`, `billion`).
pub(super) fn number_word(w: &str) -> Option<Result<u64, u64>> {
    let n = match w {
        "zero" => 0,
        "one" | "a" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        "eleven" => 11,
        "twelve" => 12,
        "thirteen" => 13,
        "fourteen" => 14,
        "fifteen" => 15,
        "sixteen" => 16,
        "seventeen" => 17,
        "eighteen" => 18,
        "nineteen" => 19,
        "twenty" => 20,
        "thirty" => 30,
        "forty" => 40,
        "fifty" => 50,
        "sixty" => 60,
        "seventy" => 70,
        "eighty" => 80,
        "ninety" => 90,
        "hundred" => return Some(Err(100)),
        "thousand" => return Some(Err(1_000)),
        "million" => return Some(Err(1_000_000)),
        "billion" => return Some(Err(1_000_000_000)),
        _ => return None,
    };
    Some(Ok(n))
}

/// An amount written in English words from `first` on (`twelve thousand`, `one thousand two
/// hundred and fifty`, `twenty-five hundred`), or a number and a scale (`12 thousand`): a model
/// asked to pay it writes the digits. Only a reading with a scale or of two words or more.
/// `next` gives the first byte of the token after `first`, `rest` the tokens after it.
#[inline]
pub(super) fn worded_amount<'a>(
    first: &'a str,
    next: impl FnOnce() -> Option<u8>,
    rest: impl Iterator<Item = &'a str>,
) -> Option<u64> {
    let starts = if first.bytes().all(|b| b.is_ascii_digit()) {
        // A number, then a scale word: look at the next word's first letter before reading it.
        first.len() <= 12 && matches!(next(), Some(b'h' | b't' | b'm' | b'b'))
    } else {
        // A plain loop: a searcher costs more on words this short.
        let head = &first[..first.bytes().position(|c| c == b'-').unwrap_or(first.len())];
        head.len() <= 9 && number_word(head).is_some_and(|n| n.is_ok())
    };
    if !starts {
        return None;
    }
    let (mut total, mut current, mut words, mut scaled) = (0u64, 0u64, 0, false);
    for (i, token) in std::iter::once(first)
        .chain(rest)
        .take(MAX_TOKENS)
        .enumerate()
    {
        if token == "and" && i > 0 {
            continue;
        }
        // `a thousand`, but `twelve thousand a month` is twelve thousand.
        if token == "a" && i > 0 {
            break;
        }
        if token.bytes().all(|b| b.is_ascii_digit()) {
            let n: u64 = token.parse().ok()?;
            match i {
                0 => current = n,
                // The rest of the amount in digits after a scale (`9 thousand 950`, `99 hundred
                // 50`): fewer than the scale's.
                _ if token.len() <= 3
                    && (current == 0 && scaled || current % 100 == 0 && current > 0 && n < 100) =>
                {
                    current = current.checked_add(n)?;
                }
                _ => break,
            }
            words += 1;
            continue;
        }
        let mut any = false;
        for part in token.split('-') {
            match number_word(part) {
                Some(Ok(n)) if n < 100 && current % 100 == 0 || n < 10 && current % 10 == 0 => {
                    current = current.checked_add(n)?;
                }
                Some(Err(100)) => current = current.max(1).checked_mul(100)?,
                Some(Err(scale)) => {
                    total = total.checked_add(current.max(1).checked_mul(scale)?)?;
                    current = 0;
                    scaled = true;
                }
                _ => break,
            }
            any = true;
        }
        if !any {
            break;
        }
        words += 1;
    }
    (scaled || words >= 2).then_some(total.checked_add(current)?)
}

/// The digit an English word says when numbers are read out digit by digit (`oh` for zero, as
/// in a phone number).
fn digit_word(w: &str) -> Option<u8> {
    let d = match w {
        "zero" | "oh" => b'0',
        "one" => b'1',
        "two" => b'2',
        "three" => b'3',
        "four" => b'4',
        "five" => b'5',
        "six" => b'6',
        "seven" => b'7',
        "eight" => b'8',
        "nine" => b'9',
        _ => return None,
    };
    Some(d)
}

/// Fewest digits read out one by one that [`spelled_digits`] reads as a number.
const MIN_SPELLED_DIGITS: usize = 4;

/// A number read out digit by digit from `first` on (`five five five one two three four`,
/// `nine-nine-five-zero`, `double five`, `triple nine`), written to `buf` as its digits: a
/// phone number, an account or an amount a model writes in digits. Only four digits or more.
#[inline]
pub(super) fn spelled_digits<'a>(
    first: &'a str,
    rest: impl Iterator<Item = &'a str>,
    buf: &mut String,
) -> bool {
    // The first word's first three bytes before the rest: most words are no digit.
    let b = first.as_bytes();
    let head = [
        b.first().copied().unwrap_or(0),
        b.get(1).copied().unwrap_or(0),
        b.get(2).copied().unwrap_or(0),
    ];
    let oh = head[0] == b'o' && head[1] == b'h' && matches!(head[2], 0 | b'-');
    if !oh
        && !matches!(
            &head,
            b"zer"
                | b"one"
                | b"two"
                | b"thr"
                | b"fou"
                | b"fiv"
                | b"six"
                | b"sev"
                | b"eig"
                | b"nin"
                | b"dou"
                | b"tri"
        )
    {
        return false;
    }
    buf.clear();
    let mut times = 1;
    for token in std::iter::once(first).chain(rest).take(MAX_TOKENS * 2) {
        let mut any = false;
        for part in token.split('-') {
            match (part, digit_word(part)) {
                ("double", _) if times == 1 => times = 2,
                ("triple", _) if times == 1 => times = 3,
                (_, Some(d)) => {
                    buf.extend(std::iter::repeat_n(char::from(d), times));
                    times = 1;
                }
                _ => break,
            }
            any = true;
        }
        if !any || buf.len() > 34 {
            break;
        }
    }
    buf.len() >= MIN_SPELLED_DIGITS
}

/// A fraction of a scale (`half a million`, `a quarter million`, `three quarters of a
/// million`): the amount a model writes in digits.
#[inline]
pub(super) fn fraction_of_scale<'a>(
    first: &'a str,
    mut rest: impl Iterator<Item = &'a str>,
) -> Option<u64> {
    let (times, mut parts) = match first {
        "half" => (1, Some(2)),
        "quarter" => (1, Some(4)),
        "a" | "one" => (1, None),
        "three" => (3, None),
        _ => return None,
    };
    let mut token = rest.next()?;
    if parts.is_none() {
        parts = match token {
            "half" => Some(2),
            "quarter" | "quarters" => Some(4),
            _ => return None,
        };
        token = rest.next()?;
    }
    let parts = parts?;
    if times == 3 && parts != 4 {
        return None;
    }
    // `half a million`, `a quarter of a million`, `a half million`.
    for word in ["of", "a"] {
        if token == word {
            token = rest.next()?;
        }
    }
    let Some(Err(scale)) = number_word(token) else {
        return None;
    };
    Some(scale / parts * times)
}

/// What a piece of a number word of another language stands for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Piece {
    /// A number added to the group being read (`zwei`, `quinientos`, `vingt`).
    Value(u64),
    /// Times a hundred: the group read so far, or one (`hundert`, `cent`, `cento`, `ciento`).
    Hundred,
    /// Times this power of ten, ending the group (`tausend`, `mille`, `mil`, `millones`).
    Scale(u64),
    /// A word that joins two numbers (`und`, `et`, `y`, `e`, `en`).
    Join,
}

use Piece::{Hundred, Join, Scale, Value};

const THOUSAND: Piece = Scale(1_000);
const MILLION: Piece = Scale(1_000_000);
const BILLION: Piece = Scale(1_000_000_000);

/// The pieces number words of German (with `ä`, `ö`, `ü` also written `ae`, `oe`, `ue` and
/// without their dots, `ß` as `ss`), Dutch, French, Spanish, Italian (with the elided tens of
/// `ventuno`, `trentotto`) and Portuguese are made of, by their first letter. Words that are
/// English number words too (`six`) are read by [`worded_amount`].
const fn pieces(first: u8) -> &'static [(&'static str, Piece)] {
    match first {
        b'a' => &[
            ("acht", Value(8)),
            ("achtzehn", Value(18)),
            ("achtzig", Value(80)),
            ("achttien", Value(18)),
        ],
        b'c' => &[
            ("catorce", Value(14)),
            ("catorze", Value(14)),
            ("cem", Hundred),
            ("cent", Hundred),
            ("cents", Hundred),
            ("cento", Hundred),
            ("cien", Hundred),
            ("ciento", Hundred),
            ("cinco", Value(5)),
            ("cincuenta", Value(50)),
            ("cinq", Value(5)),
            ("cinquant", Value(50)),
            ("cinquanta", Value(50)),
            ("cinquante", Value(50)),
            ("cinque", Value(5)),
            ("cinquenta", Value(50)),
            ("cuarenta", Value(40)),
            ("cuatro", Value(4)),
            ("cuatrocientas", Value(400)),
            ("cuatrocientos", Value(400)),
        ],
        b'd' => &[
            ("dertien", Value(13)),
            ("dertig", Value(30)),
            ("deux", Value(2)),
            ("dez", Value(10)),
            ("dezanove", Value(19)),
            ("dezasseis", Value(16)),
            ("dezassete", Value(17)),
            ("dezenove", Value(19)),
            ("dezesseis", Value(16)),
            ("dezessete", Value(17)),
            ("dezoito", Value(18)),
            ("diciannove", Value(19)),
            ("diciassette", Value(17)),
            ("diciotto", Value(18)),
            ("dieci", Value(10)),
            ("dieciséis", Value(16)),
            ("dieciseis", Value(16)),
            ("diez", Value(10)),
            ("dix", Value(10)),
            ("dodici", Value(12)),
            ("dois", Value(2)),
            ("dos", Value(2)),
            ("doscientas", Value(200)),
            ("doscientos", Value(200)),
            ("doce", Value(12)),
            ("douze", Value(12)),
            ("doze", Value(12)),
            ("drei", Value(3)),
            ("dreißig", Value(30)),
            ("dreissig", Value(30)),
            ("dreizehn", Value(13)),
            ("drie", Value(3)),
            ("duas", Value(2)),
            ("due", Value(2)),
            ("duizend", THOUSAND),
            ("duzentas", Value(200)),
            ("duzentos", Value(200)),
        ],
        b'e' => &[
            ("e", Join),
            ("een", Value(1)),
            ("ein", Value(1)),
            ("eine", Value(1)),
            ("eins", Value(1)),
            ("elf", Value(11)),
            ("en", Join),
            ("et", Join),
        ],
        b'f' => &[
            ("fuenf", Value(5)),
            ("fuenfzehn", Value(15)),
            ("fuenfzig", Value(50)),
            ("funf", Value(5)),
            ("funfzehn", Value(15)),
            ("funfzig", Value(50)),
            ("fünf", Value(5)),
            ("fünfzehn", Value(15)),
            ("fünfzig", Value(50)),
        ],
        b'h' => &[
            ("honderd", Hundred),
            ("huit", Value(8)),
            ("hundert", Hundred),
        ],
        b'm' => &[
            ("mil", THOUSAND),
            ("mila", THOUSAND),
            ("milhao", MILLION),
            ("milhão", MILLION),
            ("milhoes", MILLION),
            ("milhões", MILLION),
            ("miliardi", BILLION),
            ("miliardo", BILLION),
            ("milione", MILLION),
            ("milioni", MILLION),
            ("miljard", BILLION),
            ("miljoen", MILLION),
            ("mille", THOUSAND),
            ("milliard", BILLION),
            ("milliarde", BILLION),
            ("milliarden", BILLION),
            ("milliards", BILLION),
            ("million", MILLION),
            ("millionen", MILLION),
            ("millions", MILLION),
            ("millon", MILLION),
            ("millón", MILLION),
            ("millones", MILLION),
        ],
        b'n' => &[
            ("negen", Value(9)),
            ("negentien", Value(19)),
            ("negentig", Value(90)),
            ("neuf", Value(9)),
            ("neun", Value(9)),
            ("neunzehn", Value(19)),
            ("neunzig", Value(90)),
            ("novant", Value(90)),
            ("novanta", Value(90)),
            ("nove", Value(9)),
            ("novecientas", Value(900)),
            ("novecientos", Value(900)),
            ("novecentas", Value(900)),
            ("novecentos", Value(900)),
            ("noventa", Value(90)),
            ("nueve", Value(9)),
        ],
        b'o' => &[
            ("ochenta", Value(80)),
            ("ocho", Value(8)),
            ("ochocientas", Value(800)),
            ("ochocientos", Value(800)),
            ("oitenta", Value(80)),
            ("oito", Value(8)),
            ("oitocentas", Value(800)),
            ("oitocentos", Value(800)),
            ("once", Value(11)),
            ("onze", Value(11)),
            ("ottant", Value(80)),
            ("ottanta", Value(80)),
            ("otto", Value(8)),
        ],
        b'q' => &[
            ("quarant", Value(40)),
            ("quaranta", Value(40)),
            ("quarante", Value(40)),
            ("quarenta", Value(40)),
            ("quatorze", Value(14)),
            ("quatre", Value(4)),
            ("quatro", Value(4)),
            ("quatrocentas", Value(400)),
            ("quatrocentos", Value(400)),
            ("quattordici", Value(14)),
            ("quattro", Value(4)),
            ("quince", Value(15)),
            ("quindici", Value(15)),
            ("quinhentas", Value(500)),
            ("quinhentos", Value(500)),
            ("quinientas", Value(500)),
            ("quinientos", Value(500)),
            ("quinze", Value(15)),
        ],
        b's' => &[
            ("sechs", Value(6)),
            ("sechzehn", Value(16)),
            ("sechzig", Value(60)),
            ("sedici", Value(16)),
            ("sei", Value(6)),
            ("seis", Value(6)),
            ("seiscentas", Value(600)),
            ("seiscentos", Value(600)),
            ("seiscientas", Value(600)),
            ("seiscientos", Value(600)),
            ("seize", Value(16)),
            ("sept", Value(7)),
            ("sesenta", Value(60)),
            ("sessant", Value(60)),
            ("sessanta", Value(60)),
            ("sessenta", Value(60)),
            ("sete", Value(7)),
            ("setecentas", Value(700)),
            ("setecentos", Value(700)),
            ("setecientas", Value(700)),
            ("setecientos", Value(700)),
            ("setenta", Value(70)),
            ("settant", Value(70)),
            ("settanta", Value(70)),
            ("sette", Value(7)),
            ("sieben", Value(7)),
            ("siebzehn", Value(17)),
            ("siebzig", Value(70)),
            ("siete", Value(7)),
            ("soixante", Value(60)),
        ],
        b't' => &[
            ("tachtig", Value(80)),
            ("tausend", THOUSAND),
            ("tien", Value(10)),
            ("trece", Value(13)),
            ("tredici", Value(13)),
            ("treinta", Value(30)),
            ("treize", Value(13)),
            ("trent", Value(30)),
            ("trenta", Value(30)),
            ("trente", Value(30)),
            ("tre", Value(3)),
            ("tres", Value(3)),
            ("trescientas", Value(300)),
            ("trescientos", Value(300)),
            ("treze", Value(13)),
            ("trezentas", Value(300)),
            ("trezentos", Value(300)),
            ("trinta", Value(30)),
            ("trois", Value(3)),
            ("tré", Value(3)),
            ("trés", Value(3)),
            ("três", Value(3)),
            ("twaalf", Value(12)),
            ("twee", Value(2)),
            ("twintig", Value(20)),
        ],
        b'u' => &[
            ("um", Value(1)),
            ("uma", Value(1)),
            ("un", Value(1)),
            ("una", Value(1)),
            ("und", Join),
            ("undici", Value(11)),
            ("une", Value(1)),
            ("uno", Value(1)),
        ],
        b'v' => &[
            ("veertien", Value(14)),
            ("veertig", Value(40)),
            ("veinte", Value(20)),
            ("veinti", Value(20)),
            ("veintidós", Value(22)),
            ("veintiséis", Value(26)),
            ("veintitrés", Value(23)),
            ("veintiún", Value(21)),
            ("vent", Value(20)),
            ("venti", Value(20)),
            ("vier", Value(4)),
            ("vierzehn", Value(14)),
            ("vierzig", Value(40)),
            ("vijf", Value(5)),
            ("vijftien", Value(15)),
            ("vijftig", Value(50)),
            ("vingt", Value(20)),
            ("vingts", Value(20)),
            ("vinte", Value(20)),
        ],
        b'y' => &[("y", Join)],
        b'z' => &[
            ("zehn", Value(10)),
            ("zes", Value(6)),
            ("zestien", Value(16)),
            ("zestig", Value(60)),
            ("zeven", Value(7)),
            ("zeventien", Value(17)),
            ("zeventig", Value(70)),
            ("zwanzig", Value(20)),
            ("zwei", Value(2)),
            ("zwo", Value(2)),
            ("zwoelf", Value(12)),
            ("zwolf", Value(12)),
            ("zwölf", Value(12)),
        ],
        _ => &[],
    }
}

/// The third bytes the pieces starting with each two bytes go on with, by the index
/// ([`letter`]) of their first and second byte: bit `letter(third)`. A word whose first three
/// bytes start no piece is no number word, two look-ups to tell: most words are not.
const STARTS: [[u32; 27]; 26] = {
    let mut table = [[0u32; 27]; 26];
    let mut first = 0;
    while first < 26 {
        let list = pieces(b'a' + first as u8);
        let mut i = 0;
        while i < list.len() {
            let w = list[i].0.as_bytes();
            table[first][letter(w, 1)] |= 1 << letter(w, 2);
            i += 1;
        }
        first += 1;
    }
    table
};

/// The index of the byte at `i` of `w`: `0..26` for an ASCII lower-case letter, 26 for any
/// other byte or none.
const fn letter(w: &[u8], i: usize) -> usize {
    if i < w.len() && w[i].is_ascii_lowercase() {
        (w[i] - b'a') as usize
    } else {
        26
    }
}

/// Whether the token `t` may start with a piece of a number word of another language (its first
/// three bytes start one, or it is a piece of one or two letters: no word starts with such a
/// piece and goes on with another).
fn may_be_number_word(t: &[u8]) -> bool {
    match t.first() {
        Some(&f @ b'a'..=b'z') => {
            STARTS[usize::from(f - b'a')][letter(t, 1)] & (1 << letter(t, 2)) != 0
        }
        _ => false,
    }
}

/// The piece `s` starts with, the longest of those that match, and its length.
fn piece_at(s: &str) -> Option<(Piece, usize)> {
    pieces(*s.as_bytes().first()?)
        .iter()
        .filter(|(w, _)| s.starts_with(w))
        .max_by_key(|(w, _)| w.len())
        .map(|&(w, p)| (p, w.len()))
}

/// An amount being read piece by piece.
#[derive(Default)]
struct Reading {
    /// The groups closed by a scale.
    total: u64,
    /// The group being read.
    group: u64,
    /// Pieces read (joining words left out).
    pieces: usize,
    /// The value of the last piece, to read French `quatre-vingt(s)` as eighty.
    last: Option<u64>,
}

impl Reading {
    /// Adds a piece (`None` on overflow).
    fn push(&mut self, piece: Piece) -> Option<()> {
        match piece {
            Join => {
                self.last = None;
                return Some(());
            }
            Value(20) if self.last == Some(4) => self.group = self.group.checked_add(76)?,
            Value(n) => self.group = self.group.checked_add(n)?,
            Hundred => self.group = self.group.max(1).checked_mul(100)?,
            // A larger scale right after a smaller one scales it: `mil millones` is a billion.
            Scale(s) if self.group == 0 && self.total > 0 && self.total < s => {
                self.total = self.total.checked_mul(s)?;
            }
            Scale(s) => {
                self.total = self.total.checked_add(self.group.max(1).checked_mul(s)?)?;
                self.group = 0;
            }
        }
        self.last = match piece {
            Value(n) => Some(n),
            _ => None,
        };
        self.pieces += 1;
        Some(())
    }

    /// Reads the whole of `word` (its parts between hyphens, each made of pieces); `false`,
    /// and nothing read, if it is not a number word.
    fn word(&mut self, word: &str) -> Option<bool> {
        let mut pieces: [Piece; 12] = [Join; 12];
        let mut n = 0;
        for part in word.split('-') {
            let mut s = part;
            while !s.is_empty() {
                let Some((piece, len)) = piece_at(s) else {
                    return Some(false);
                };
                if n == pieces.len() {
                    return Some(false);
                }
                pieces[n] = piece;
                n += 1;
                s = &s[len..];
            }
        }
        // A joining word alone joins what was read to what follows; it starts nothing.
        if n == 0 || self.pieces == 0 && pieces[..n].iter().all(|&p| p == Join) {
            return Some(false);
        }
        for &p in &pieces[..n] {
            self.push(p)?;
        }
        Some(true)
    }
}

/// An amount in number words of another language from `first` on, as one word or several
/// (`zwölfhundertfünfzig`, `deux mille cinq cents`, `dos mil quinientos`, `duemila`): read
/// only when it is two pieces or more.
#[inline]
pub(super) fn other_language_amount<'a>(
    first: &str,
    rest: impl Iterator<Item = &'a str>,
) -> Option<u64> {
    if !may_be_number_word(first.as_bytes()) {
        return None;
    }
    let mut reading = Reading::default();
    if !reading.word(first)? {
        return None;
    }
    for token in rest.take(MAX_TOKENS - 1) {
        if !may_be_number_word(token.as_bytes()) || !reading.word(token)? {
            break;
        }
    }
    (reading.pieces >= 2).then_some(reading.total.checked_add(reading.group)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Option<u64> {
        let mut words = text.split(' ');
        let first = words.next()?;
        other_language_amount(first, words)
    }

    #[test]
    fn number_words_of_other_languages_read_as_their_value() {
        for (text, value) in [
            ("zwölfhundertfünfzig", 1250),
            ("zwoelfhundert", 1200),
            ("eintausendzweihundert", 1200),
            ("zweitausenddreihundertfünfundvierzig", 2345),
            ("fünfundzwanzigtausend", 25_000),
            ("vierundzwanzig", 24),
            ("zwei millionen", 2_000_000),
            ("hundertfünfzig", 150),
            ("twaalfhonderd", 1200),
            ("eenentwintig", 21),
            ("mille deux cent cinquante", 1250),
            ("deux mille cinq cents", 2500),
            ("quatre-vingt-dix-neuf", 99),
            ("quatre-vingts", 80),
            ("soixante-dix", 70),
            ("vingt et un", 21),
            ("trois cent mille", 300_000),
            ("mil doscientos cincuenta", 1250),
            ("dos mil quinientos", 2500),
            ("veintitrés mil", 23_000),
            ("treinta y cinco", 35),
            ("cien mil", 100_000),
            ("milleduecentocinquanta", 1250),
            ("duemila", 2000),
            ("ventotto", 28),
            ("trentatré", 33),
            ("mil e duzentos", 1200),
            ("três mil", 3000),
            ("mil millones", 1_000_000_000),
            ("dos mil millones", 2_000_000_000),
            ("cien mil millones", 100_000_000_000),
            ("tausend millionen", 1_000_000_000),
            ("zwei millionen dreihunderttausend", 2_300_000),
        ] {
            assert_eq!(read(text), Some(value), "{text}");
        }
        // One piece alone is no reading.
        for text in ["tausend", "dezessete", "quatre", "mille", "zwölf"] {
            assert_eq!(read(text), None, "{text}");
        }
    }

    #[test]
    fn prose_is_no_amount() {
        for text in [
            "elf",
            "otto von bismarck",
            "un peu",
            "dos and donts",
            "mila kunis",
            "e la",
            "und zwar",
            "y tu",
            "sei gentile",
            "the cent",
            "tre",
            "eine",
        ] {
            assert_eq!(read(text), None, "{text}");
        }
    }

    #[test]
    fn the_quick_filter_lets_every_piece_through() {
        for first in b'a'..=b'z' {
            for (w, _) in pieces(first) {
                assert!(
                    w.as_bytes()[0] == first,
                    "{w} is filed under {}",
                    first as char
                );
                assert!(may_be_number_word(w.as_bytes()), "{w}");
            }
        }
        // Most words are told apart by their first three bytes.
        for english in [
            "the", "to", "of", "and", "please", "invoice", "payment", "send", "service",
            "transfer", "details", "customer", "number", "other", "question", "very", "email",
            "either", "might", "how", "can", "time", "two", "new", "one", "end",
        ] {
            assert!(!may_be_number_word(english.as_bytes()), "{english}");
        }
    }
}
