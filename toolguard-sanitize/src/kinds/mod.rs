//! Argument newtypes that carry a field kind: the `#[tool]` macro maps each type name to its
//! [`FieldKind`](crate::FieldKind), so the sanitizer applies the right rules, and each type checks
//! its own invariant again when it is deserialized (defence in depth: a value that reaches a
//! handler as one of these types is valid whatever path it took).
//!
//! | type | field kind | JSON Schema |
//! | --- | --- | --- |
//! | [`Identifier`] | `identifier` | string, `^[A-Za-z0-9_-]+$`, 1 to 128 characters |
//! | [`Email`] | `email` | string, `format: email` |
//! | [`Url`] | `url` | string, `format: uri` |
//! | [`SafePath`] | `path` | string (relative) |
//! | [`Cents`], [`Money`] | `money` | integer ≥ 0; `{amount, currency}` |
//! | [`Currency`] | `money` | enum of ISO 4217 codes |

mod email;
mod identifier;
mod money;
mod path;
mod url;

use std::fmt;

pub use email::Email;
pub use identifier::Identifier;
pub use money::{Cents, Currency, DecimalError, MAX_SIGNIFICANT_DIGITS, Money, minor_units};
pub use path::SafePath;
pub use url::Url;

/// Why a value is not a valid instance of a kind newtype.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct KindError {
    /// The newtype (`Identifier`, `Email`, ...).
    pub kind: &'static str,
    /// The sanitizer reason code (see [`crate`]), e.g. `identifier_charset`.
    pub reason: &'static str,
}

impl KindError {
    pub(crate) fn new(kind: &'static str, reason: &'static str) -> Self {
        KindError { kind, reason }
    }
}

impl fmt::Display for KindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid {}: {}", self.kind, self.reason)
    }
}

impl std::error::Error for KindError {}

/// Implements `Deserialize` through a `TryFrom<String>` constructor.
macro_rules! deserialize_via_new {
    ($ty:ty) => {
        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                <$ty>::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use deserialize_via_new;

/// The JSON Schema (draft 2020-12) of `T`, as the pipeline generates it for a tool's arguments.
#[cfg(test)]
pub(crate) fn schema_for<T: schemars::JsonSchema>() -> serde_json::Value {
    let schema = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    serde_json::to_value(schema).unwrap_or(serde_json::Value::Bool(false))
}
