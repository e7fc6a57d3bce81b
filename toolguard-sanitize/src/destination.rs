//! Where an address points: the host of a URL, the domain of an e-mail address, and whether it
//! lies in a set of host patterns (`example.com`, `*.example.com` for its sub-domains), matched
//! as URL host allowlists are.
//!
//! ```
//! use toolguard_sanitize::destination::{address_host, is_inside};
//! use toolguard_sanitize::FieldKind;
//!
//! let internal = ["example.com".to_owned(), "*.example.com".to_owned()];
//! assert_eq!(address_host(FieldKind::Email, "Ann@Mail.Example.com").as_deref(), Some("mail.example.com"));
//! assert!(is_inside(FieldKind::Email, "ann@mail.example.com", &internal));
//! assert!(!is_inside(FieldKind::Url, "https://example.org/x", &internal));
//! // An address that cannot be read is never inside.
//! assert!(!is_inside(FieldKind::Email, "not an address", &internal));
//! ```

use crate::FieldKind;

/// The host an address of `kind` points to, in lower case: an e-mail address's domain (after
/// its last `@`), a URL's host; `None` for another kind or a value that names none.
pub fn address_host(kind: FieldKind, value: &str) -> Option<String> {
    let host = match kind {
        FieldKind::Email => {
            let (local, domain) = value.trim().rsplit_once('@')?;
            if local.is_empty() || domain.is_empty() {
                return None;
            }
            idna::domain_to_ascii(domain).ok()?
        }
        FieldKind::Url => url::Url::parse(value.trim()).ok()?.host_str()?.to_owned(),
        _ => return None,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

/// Whether the address `value` of `kind` points inside `internal` (host patterns); an address
/// that cannot be read is outside.
pub fn is_inside(kind: FieldKind, value: &str, internal: &[String]) -> bool {
    address_host(kind, value).is_some_and(|host| crate::url::host_allowed(&host, internal))
}
