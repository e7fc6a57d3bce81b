use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Serialize, Serializer};

use super::{KindError, deserialize_via_new};
use crate::{HostResolver, NoResolution, ResolvedUrl, UrlPolicy, url::check_url};

/// An absolute URL with a host, in the normalized form that was checked, plus its parsed
/// [`url::Url`].
///
/// Construction refuses what no tool should fetch whatever its scheme: user info, IP literals in
/// any notation that are loopback/private/link-local/..., and internal host names (`localhost`,
/// `*.internal`, ...). Scheme and host allowlists are the
/// [`Sanitizer`](crate::Sanitizer::allow_url_hosts)'s, per tool and field.
///
/// Host names are not resolved here. Connect through [`Url::resolve_with`] (or the
/// [`ResolvedUrl`] of the sanitize report) and use the returned addresses, so a DNS answer that
/// changes between check and use (rebinding) cannot point the request inside.
///
/// ```
/// use toolguard_sanitize::kinds::Url;
/// let u = Url::new("https://example.com/a?b=1").unwrap();
/// assert_eq!(u.url().host_str(), Some("example.com"));
/// assert!(Url::new("http://0x7f.1/").is_err());
/// ```
#[derive(Clone)]
pub struct Url {
    raw: String,
    parsed: ::url::Url,
}

impl Url {
    /// Checks and wraps `value`.
    ///
    /// The value kept is the normalized serialization that was checked (`HTTPS://Ex.COM/a/../b`
    /// becomes `https://ex.com/b`), never the string as sent; URLs whose host parsers disagree
    /// on are refused (`url_ambiguous`, see [`crate`]).
    pub fn new(value: impl Into<String>) -> Result<Self, KindError> {
        let sent = value.into();
        let parsed = ::url::Url::parse(&sent).map_err(|_| KindError::new("Url", "url_invalid"))?;
        let policy = UrlPolicy {
            schemes: vec![parsed.scheme().to_string()],
            hosts: Vec::new(),
        };
        let checked =
            check_url(&sent, &policy, &NoResolution).map_err(|r| KindError::new("Url", r))?;
        Ok(Url {
            raw: checked.url,
            parsed,
        })
    }

    /// The checked URL, as the `url` crate serializes it.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The parsed URL.
    pub fn url(&self) -> &::url::Url {
        &self.parsed
    }

    /// Re-checks the URL and resolves its host through `resolver`; every address is checked and
    /// the result lists the addresses to connect to.
    pub fn resolve_with(&self, resolver: &dyn HostResolver) -> Result<ResolvedUrl, KindError> {
        let policy = UrlPolicy {
            schemes: vec![self.parsed.scheme().to_string()],
            hosts: Vec::new(),
        };
        check_url(&self.raw, &policy, resolver).map_err(|r| KindError::new("Url", r))
    }
}

impl PartialEq for Url {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl Eq for Url {}

impl fmt::Debug for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Url").field(&self.raw).finish()
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl Serialize for Url {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.raw)
    }
}

deserialize_via_new!(Url);

impl JsonSchema for Url {
    fn schema_name() -> Cow<'static, str> {
        "Url".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "string", "format": "uri", "maxLength": 2048 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Resolution;
    use std::net::IpAddr;

    struct Fixed(&'static str);
    impl HostResolver for Fixed {
        fn resolve(&self, _: &str, _: u16) -> Resolution {
            Resolution::Addresses(vec![self.0.parse::<IpAddr>().unwrap()])
        }
    }

    #[test]
    fn refuses_internal_targets() {
        let u: Url = serde_json::from_str("\"https://example.com/x\"").unwrap();
        assert_eq!(u.as_str(), "https://example.com/x");
        let n: Url = serde_json::from_str("\"HTTPS://Example.com/a/../b\"").unwrap();
        assert_eq!(n.as_str(), "https://example.com/b");
        assert_eq!(
            Url::new("http://a.example\\@b.example/")
                .unwrap_err()
                .reason,
            "url_ambiguous"
        );
        for bad in [
            "\"http://127.1/\"",
            "\"http://user@example.com/\"",
            "\"http://localhost/\"",
            "\"nope\"",
        ] {
            assert!(serde_json::from_str::<Url>(bad).is_err(), "{bad}");
        }
        assert_eq!(
            u.resolve_with(&Fixed("10.0.0.5")).unwrap_err().reason,
            "url_private_address"
        );
        assert!(u.resolve_with(&Fixed("93.184.216.34")).unwrap().is_pinned());
        let schema = serde_json::to_value(crate::kinds::schema_for::<Url>()).unwrap();
        assert_eq!(schema["format"], "uri");
    }
}
