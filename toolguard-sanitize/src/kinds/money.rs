use serde::{Deserialize, Serialize};

use schemars::JsonSchema;

/// An amount in integer minor units of its currency (cents, pence, yen): never a float.
///
/// ```
/// use toolguard_sanitize::kinds::Cents;
/// let c: Cents = serde_json::from_str("1250").unwrap();
/// assert_eq!(c.get(), 1250);
/// assert!(serde_json::from_str::<Cents>("12.5").is_err());
/// assert!(serde_json::from_str::<Cents>("-1").is_err());
/// ```
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(transparent)]
// The schema's description is the one tool schemas have always carried (goldens pin it).
#[schemars(
    description = "An amount in integer minor units of its currency (cents, pence, yen): never a float.\n\n```\nuse toolguard::kinds::Cents;\nlet c: Cents = serde_json::from_str(\"1250\").unwrap();\nassert_eq!(c.get(), 1250);\nassert!(serde_json::from_str::<Cents>(\"12.5\").is_err());\nassert!(serde_json::from_str::<Cents>(\"-1\").is_err());\n```"
)]
pub struct Cents(pub u64);

impl Cents {
    /// Zero.
    pub const ZERO: Cents = Cents(0);

    /// The amount in minor units.
    pub fn get(self) -> u64 {
        self.0
    }

    /// `self + other`, `None` on overflow.
    pub fn checked_add(self, other: Cents) -> Option<Cents> {
        self.0.checked_add(other.0).map(Cents)
    }

    /// `self - other`, `None` when negative.
    pub fn checked_sub(self, other: Cents) -> Option<Cents> {
        self.0.checked_sub(other.0).map(Cents)
    }
}

/// ISO 4217 currency codes accepted in [`Money`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum Currency {
    /// United States dollar.
    USD,
    /// Euro.
    EUR,
    /// Pound sterling.
    GBP,
    /// Japanese yen (no minor unit).
    JPY,
    /// Swiss franc.
    CHF,
    /// Canadian dollar.
    CAD,
    /// Australian dollar.
    AUD,
    /// New Zealand dollar.
    NZD,
    /// Chinese yuan.
    CNY,
    /// Hong Kong dollar.
    HKD,
    /// Singapore dollar.
    SGD,
    /// Swedish krona.
    SEK,
    /// Norwegian krone.
    NOK,
    /// Danish krone.
    DKK,
    /// Polish złoty.
    PLN,
    /// Czech koruna.
    CZK,
    /// Indian rupee.
    INR,
    /// Brazilian real.
    BRL,
    /// Mexican peso.
    MXN,
    /// South African rand.
    ZAR,
    /// South Korean won (no minor unit).
    KRW,
}

impl Currency {
    /// The ISO 4217 code.
    pub fn code(self) -> &'static str {
        match self {
            Currency::USD => "USD",
            Currency::EUR => "EUR",
            Currency::GBP => "GBP",
            Currency::JPY => "JPY",
            Currency::CHF => "CHF",
            Currency::CAD => "CAD",
            Currency::AUD => "AUD",
            Currency::NZD => "NZD",
            Currency::CNY => "CNY",
            Currency::HKD => "HKD",
            Currency::SGD => "SGD",
            Currency::SEK => "SEK",
            Currency::NOK => "NOK",
            Currency::DKK => "DKK",
            Currency::PLN => "PLN",
            Currency::CZK => "CZK",
            Currency::INR => "INR",
            Currency::BRL => "BRL",
            Currency::MXN => "MXN",
            Currency::ZAR => "ZAR",
            Currency::KRW => "KRW",
        }
    }

    /// Digits of the minor unit (2 for cents, 0 for yen and won).
    pub fn minor_digits(self) -> u32 {
        match self {
            Currency::JPY | Currency::KRW => 0,
            _ => 2,
        }
    }
}

/// An amount of money: integer minor units and a currency.
///
/// ```
/// use toolguard_sanitize::kinds::{Cents, Currency, Money};
/// let m: Money = serde_json::from_str(r#"{"amount": 800000, "currency": "USD"}"#).unwrap();
/// assert_eq!(m, Money { amount: Cents(800000), currency: Currency::USD });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
// The schema's description is the one tool schemas have always carried (goldens pin it).
#[schemars(
    description = "An amount of money: integer minor units and a currency.\n\n```\nuse toolguard::kinds::{Cents, Currency, Money};\nlet m: Money = serde_json::from_str(r#\"{\"amount\": 800000, \"currency\": \"USD\"}\"#).unwrap();\nassert_eq!(m, Money { amount: Cents(800000), currency: Currency::USD });\n```"
)]
pub struct Money {
    /// Amount in minor units.
    pub amount: Cents,
    /// Currency.
    pub currency: Currency,
}

impl Money {
    /// `amount` minor units of `currency`.
    pub fn new(amount: u64, currency: Currency) -> Self {
        Money {
            amount: Cents(amount),
            currency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_and_serde() {
        let schema = crate::kinds::schema_for::<Money>();
        let amount = &schema["properties"]["amount"];
        assert!(
            amount["minimum"] == 0 || amount["$ref"].is_string(),
            "{schema}"
        );
        let cents = crate::kinds::schema_for::<Cents>();
        assert_eq!(cents["minimum"], 0, "{cents}");
        assert!(serde_json::from_str::<Money>(r#"{"amount": 1.5, "currency": "USD"}"#).is_err());
        assert!(serde_json::from_str::<Money>(r#"{"amount": 1, "currency": "XXX"}"#).is_err());
        assert_eq!(Currency::JPY.minor_digits(), 0);
        assert_eq!(
            serde_json::to_string(&Money::new(5, Currency::EUR)).unwrap(),
            r#"{"amount":5,"currency":"EUR"}"#
        );
    }
}

/// Why a decimal amount cannot be read as minor units ([`minor_units`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DecimalError {
    /// Not a JSON number's text.
    NotANumber,
    /// Below zero.
    Negative,
    /// More decimal places than the scale allows.
    TooPrecise,
    /// More significant digits than a JSON number carries exactly between two programs (15),
    /// or more minor units than a `u64` holds.
    TooLarge,
}

impl DecimalError {
    /// The reason code (`amount_not_a_number`, `amount_negative`, `amount_too_precise`,
    /// `amount_too_large`).
    pub fn code(self) -> &'static str {
        match self {
            DecimalError::NotANumber => "amount_not_a_number",
            DecimalError::Negative => "amount_negative",
            DecimalError::TooPrecise => "amount_too_precise",
            DecimalError::TooLarge => "amount_too_large",
        }
    }
}

/// Most significant digits an amount may have: what an IEEE double, as most servers read a JSON
/// number, holds exactly, so the gateway and the server agree on the amount.
pub const MAX_SIGNIFICANT_DIGITS: usize = 15;

/// The amount a JSON number's text (`12.34`, `1e3`, `0.5E-1`) is, in minor units of a currency
/// with `scale` decimal places: `"12.34"` at scale 2 is 1234. Read from the decimal digits alone,
/// never through a float; refused when negative, with more decimals than `scale` (trailing zeros
/// aside), with more than [`MAX_SIGNIFICANT_DIGITS`] significant digits, or too large.
///
/// ```
/// use toolguard_sanitize::kinds::{DecimalError, minor_units};
/// assert_eq!(minor_units("12.34", 2), Ok(1234));
/// assert_eq!(minor_units("1.5e2", 2), Ok(15000));
/// assert_eq!(minor_units("0.10", 2), Ok(10));
/// assert_eq!(minor_units("999999.99", 2), Ok(99999999));
/// assert_eq!(minor_units("12.345", 2), Err(DecimalError::TooPrecise));
/// assert_eq!(minor_units("-1", 2), Err(DecimalError::Negative));
/// ```
pub fn minor_units(text: &str, scale: u8) -> Result<u64, DecimalError> {
    let text = text.trim();
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => {
            let exp: i64 = rest[at + 1..]
                .trim_start_matches('+')
                .parse()
                .map_err(|_| DecimalError::NotANumber)?;
            (&rest[..at], exp)
        }
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_ok = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits_ok(whole) || !digits_ok(fraction) {
        return Err(DecimalError::NotANumber);
    }
    // All digits, and where the decimal point sits after the exponent moves it.
    let digits: String = format!("{whole}{fraction}");
    let point = i64::try_from(whole.len())
        .ok()
        .and_then(|w| w.checked_add(exponent))
        .ok_or(DecimalError::TooLarge)?;
    let significant = digits.trim_start_matches('0');
    let significant = significant.trim_end_matches('0');
    if significant.is_empty() {
        return Ok(0);
    }
    if negative {
        return Err(DecimalError::Negative);
    }
    if significant.len() > MAX_SIGNIFICANT_DIGITS {
        return Err(DecimalError::TooLarge);
    }
    // The minor units are the digits up to `point + scale`; any non-zero digit after is too precise.
    let cut = point
        .checked_add(i64::from(scale))
        .ok_or(DecimalError::TooLarge)?;
    let lead = i64::try_from(digits.len() - digits.trim_start_matches('0').len())
        .map_err(|_| DecimalError::TooLarge)?;
    let last = lead + i64::try_from(significant.len()).map_err(|_| DecimalError::TooLarge)?;
    if last > cut {
        return Err(DecimalError::TooPrecise);
    }
    let zeros = u32::try_from(cut - last).map_err(|_| DecimalError::TooLarge)?;
    let base: u64 = significant.parse().map_err(|_| DecimalError::TooLarge)?;
    10u64
        .checked_pow(zeros)
        .and_then(|p| base.checked_mul(p))
        .ok_or(DecimalError::TooLarge)
}
