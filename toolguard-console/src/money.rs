//! Amounts and instants as a reviewer reads them: `20,000.00 USD`, `2026-12-03 09:40:00 UTC`.

use serde_json::Value;
use toolguard_pipeline::Currency;

/// `minor` units of `currency` with thousands separators: `2,000,000` cents → `20,000.00 USD`.
/// Without a known currency, the minor units are shown as they are.
pub fn format_amount(minor: u64, currency: Option<Currency>) -> String {
    let Some(currency) = currency else {
        return format!("{} (minor units)", group(minor));
    };
    let digits = currency.minor_digits();
    let scale = 10u64.pow(digits);
    let whole = group(minor / scale);
    let code = currency.code();
    if digits == 0 {
        format!("{whole} {code}")
    } else {
        let frac = minor % scale;
        format!("{whole}.{frac:0width$} {code}", width = digits as usize)
    }
}

/// The currency named by a tool's `currency` argument, if it is one.
pub fn currency_of(arguments: &Value) -> Option<Currency> {
    serde_json::from_value(arguments.get("currency")?.clone()).ok()
}

fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn format_instant(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A duration in whole seconds as `1 h 02 min`, `4 min 05 s`, `9 s`.
pub fn format_remaining(secs: u64) -> String {
    match secs {
        0 => "expired".to_owned(),
        s if s >= 3600 => format!("{} h {:02} min", s / 3600, s % 3600 / 60),
        s if s >= 60 => format!("{} min {:02} s", s / 60, s % 60),
        s => format!("{s} s"),
    }
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_read_as_a_teller_writes_them() {
        assert_eq!(
            format_amount(2_000_000, Some(Currency::USD)),
            "20,000.00 USD"
        );
        assert_eq!(format_amount(5, Some(Currency::EUR)), "0.05 EUR");
        assert_eq!(
            format_amount(1_234_567, Some(Currency::JPY)),
            "1,234,567 JPY"
        );
        assert_eq!(format_amount(999, None), "999 (minor units)");
        assert_eq!(
            format_amount(u64::MAX, Some(Currency::USD)),
            "184,467,440,737,095,516.15 USD"
        );
    }

    #[test]
    fn the_currency_comes_from_the_arguments() {
        let args = serde_json::json!({"currency": "GBP"});
        assert_eq!(currency_of(&args), Some(Currency::GBP));
        assert_eq!(currency_of(&serde_json::json!({"currency": "XXX"})), None);
        assert_eq!(currency_of(&serde_json::json!({})), None);
    }

    #[test]
    fn instants_are_utc_dates() {
        assert_eq!(format_instant(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_instant(1_796_290_800_000), "2026-12-03 09:40:00 UTC");
        assert_eq!(format_instant(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_remaining(3725), "1 h 02 min");
        assert_eq!(format_remaining(245), "4 min 05 s");
        assert_eq!(format_remaining(0), "expired");
    }
}
