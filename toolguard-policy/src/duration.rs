//! Durations as a policy file writes them: a whole number and a unit, `"500ms"`, `"90s"`,
//! `"30m"`, `"2h"`, `"1d"`.
//!
//! ```
//! use std::time::Duration;
//! use toolguard_policy::Span;
//!
//! assert_eq!("30m".parse::<Span>().unwrap().duration(), Duration::from_secs(1800));
//! assert!("30".parse::<Span>().is_err()); // a unit is always written
//! assert!("0s".parse::<Span>().is_err()); // and the duration is not empty
//! ```

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// A positive duration written with its unit (`"30m"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span(Duration);

impl Span {
    /// The duration.
    pub fn duration(self) -> Duration {
        self.0
    }
}

/// Why a duration was refused: it says how to write one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanError(String);

impl fmt::Display for SpanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`\"{}\"` is not a duration: write a whole number and a unit, e.g. \"30m\", \"2h\", \"90s\" or \"500ms\"",
            self.0
        )
    }
}

impl std::error::Error for SpanError {}

impl FromStr for Span {
    type Err = SpanError;

    fn from_str(text: &str) -> Result<Span, SpanError> {
        let refuse = || SpanError(text.to_owned());
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let (number, unit) = text.split_at(digits);
        let n: u64 = number.parse().map_err(|_| refuse())?;
        let millis = match unit {
            "ms" => Some(n),
            "s" => n.checked_mul(1_000),
            "m" => n.checked_mul(60_000),
            "h" => n.checked_mul(3_600_000),
            "d" => n.checked_mul(86_400_000),
            _ => None,
        };
        match millis {
            Some(ms) if ms > 0 => Ok(Span(Duration::from_millis(ms))),
            _ => Err(refuse()),
        }
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Span, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_number_a_unit_and_some_length() {
        assert_eq!("500ms".parse(), Ok(Span(Duration::from_millis(500))));
        assert_eq!("90s".parse(), Ok(Span(Duration::from_secs(90))));
        assert_eq!("2h".parse(), Ok(Span(Duration::from_secs(7200))));
        assert_eq!("1d".parse(), Ok(Span(Duration::from_secs(86_400))));
        for bad in [
            "",
            "m",
            "30",
            "0m",
            "-5m",
            "1.5h",
            "30 m",
            "30min",
            "99999999999999999999d",
        ] {
            let err = bad.parse::<Span>().unwrap_err().to_string();
            assert!(err.contains("e.g. \"30m\""), "{bad}: {err}");
        }
    }
}
