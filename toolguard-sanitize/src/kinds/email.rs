use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::{KindError, deserialize_via_new};

/// A plain e-mail address `local@domain`, checked by the `email_address` parser (RFC 5322
/// addr-spec): no display name, no domain literal, a domain with a TLD, no control characters.
///
/// Recipient-domain allowlists are configured on the
/// [`Sanitizer`](crate::Sanitizer::allow_email_domains), per tool and field.
///
/// ```
/// use toolguard_sanitize::kinds::Email;
/// let e = Email::new("ann@example.com").unwrap();
/// assert_eq!(e.domain(), "example.com");
/// assert!(Email::new("Ann <ann@example.com>").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    /// Checks and wraps `value`.
    pub fn new(value: impl Into<String>) -> Result<Self, KindError> {
        let value = value.into();
        if value.chars().any(|c| c.is_control()) {
            return Err(KindError::new("Email", "control_char"));
        }
        crate::check_email(&value, None).map_err(|r| KindError::new("Email", r))?;
        Ok(Email(value))
    }

    /// The address.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part before the last `@`.
    pub fn local_part(&self) -> &str {
        self.0.rsplit_once('@').map(|(l, _)| l).unwrap_or("")
    }

    /// The part after the last `@`.
    pub fn domain(&self) -> &str {
        self.0.rsplit_once('@').map(|(_, d)| d).unwrap_or("")
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Email {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

deserialize_via_new!(Email);

impl JsonSchema for Email {
    fn schema_name() -> Cow<'static, str> {
        "Email".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "email", "maxLength": 254 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_addresses_only() {
        let e: Email = serde_json::from_str("\"o'brien@example.co.uk\"").unwrap();
        assert_eq!(e.local_part(), "o'brien");
        assert_eq!(e.domain(), "example.co.uk");
        for bad in [
            "\"x\"",
            "\"a@b\"",
            "\"a@[10.0.0.1]\"",
            "\"A <a@b.com>\"",
            "\"a@b.com\\r\\nBcc: c@d.com\"",
        ] {
            assert!(serde_json::from_str::<Email>(bad).is_err(), "{bad}");
        }
        let schema = serde_json::to_value(crate::kinds::schema_for::<Email>()).unwrap();
        assert_eq!(schema["format"], "email");
    }
}
