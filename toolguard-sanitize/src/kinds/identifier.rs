use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::{KindError, deserialize_via_new};
use crate::DEFAULT_IDENTIFIER_MAX_LEN;

/// An identifier: 1 to 128 ASCII letters, digits, `_` or `-`, at least one a letter or digit
/// (account ids, order numbers, slugs).
///
/// Safe to put in logs, URLs and (parameterized) queries; no quote, space, semicolon or shell
/// metacharacter can be in it.
///
/// ```
/// use toolguard_sanitize::kinds::Identifier;
/// assert!(Identifier::new("acct_42").is_ok());
/// assert!(Identifier::new("1'; DROP TABLE x;--").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identifier(String);

impl Identifier {
    /// Longest accepted identifier, in characters.
    pub const MAX_LEN: usize = DEFAULT_IDENTIFIER_MAX_LEN;
    /// The pattern of the JSON Schema.
    pub const PATTERN: &'static str = "^[A-Za-z0-9_-]+$";

    /// Checks and wraps `value`.
    pub fn new(value: impl Into<String>) -> Result<Self, KindError> {
        let value = value.into();
        crate::check_identifier(&value, Self::MAX_LEN)
            .map_err(|reason| KindError::new("Identifier", reason))?;
        Ok(Identifier(value))
    }

    /// The identifier.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The inner string.
    pub fn into_inner(self) -> String {
        self.0
    }
}

impl fmt::Display for Identifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Identifier {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for Identifier {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

deserialize_via_new!(Identifier);

impl JsonSchema for Identifier {
    fn schema_name() -> Cow<'static, str> {
        "Identifier".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": Self::PATTERN,
            "minLength": 1,
            "maxLength": Self::MAX_LEN,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let id: Identifier = serde_json::from_str("\"order-77_A\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"order-77_A\"");
        for bad in [
            "\"\"",
            "\"a b\"",
            "\"a;b\"",
            "\"ä\"",
            "\"$(id)\"",
            "\"_\"",
            "\"--\"",
            "\"-_-\"",
        ] {
            assert!(serde_json::from_str::<Identifier>(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Identifier::new("x".repeat(129)).unwrap_err().reason,
            "identifier_length"
        );
        assert_eq!(
            Identifier::new("__").unwrap_err().reason,
            "identifier_punctuation"
        );
        let schema = serde_json::to_value(crate::kinds::schema_for::<Identifier>()).unwrap();
        assert_eq!(schema["maxLength"], 128);
        assert_eq!(schema["pattern"], Identifier::PATTERN);
    }
}
