//! URL checks: scheme and host allowlists, userinfo, IP literals in every notation, internal host
//! names, and resolved addresses through a [`HostResolver`] (so the handler can pin them and a
//! DNS rebinding between check and use has nothing to rebind).
//!
//! Host parsing is the WHATWG host parser of the `url` crate, which already turns decimal
//! (`2130706433`), octal (`0177.0.0.1`), hexadecimal (`0x7f.1`), short (`127.1`) and
//! percent-encoded IPv4 forms into one [`Ipv4Addr`], and bracketed IPv6 into an [`Ipv6Addr`].
//! IPv6 forms that embed IPv4 (mapped `::ffff:a.b.c.d`, translated `::ffff:0:a.b.c.d`,
//! compatible `::a.b.c.d`, NAT64
//! `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the embedded address too.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use serde::{Deserialize, Serialize};
use unicode_security::MixedScript;

/// What a [`HostResolver`] found for a host name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The resolver does not resolve (the default): the handler must resolve and check at use.
    NotResolved,
    /// The addresses the name resolves to (all of them are checked).
    Addresses(Vec<IpAddr>),
    /// The name does not resolve (or the lookup failed): the URL is refused.
    Failed,
}

/// Resolves host names so their addresses can be checked and pinned.
///
/// Synchronous on purpose: the sanitizer runs in the dispatcher's thread. An implementation
/// backed by an async resolver may block on it or consult a cache.
pub trait HostResolver: Send + Sync {
    /// Resolves `host` (a DNS name, never an IP literal) for a connection to `port`.
    fn resolve(&self, host: &str, port: u16) -> Resolution;
}

/// The default resolver: resolves nothing ([`Resolution::NotResolved`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoResolution;

impl HostResolver for NoResolution {
    fn resolve(&self, _host: &str, _port: u16) -> Resolution {
        Resolution::NotResolved
    }
}

/// Resolves through the operating system (`getaddrinfo` via [`ToSocketAddrs`]); blocking.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl HostResolver for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> Resolution {
        match (host, port).to_socket_addrs() {
            Ok(addrs) => {
                let mut v: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
                v.sort();
                v.dedup();
                if v.is_empty() {
                    Resolution::Failed
                } else {
                    Resolution::Addresses(v)
                }
            }
            Err(_) => Resolution::Failed,
        }
    }
}

/// A URL that passed the checks, with the addresses it was checked against.
///
/// When `addrs` is not empty the handler must connect to one of them (with `host` as the TLS
/// server name / `Host` header) instead of resolving `host` again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ResolvedUrl {
    /// JSON pointer of the field (empty outside an arguments object).
    pub field: String,
    /// The URL as the `url` crate serializes it.
    pub url: String,
    /// The host (ASCII, IPv6 without brackets).
    pub host: String,
    /// The port, explicit or the scheme's default.
    pub port: u16,
    /// The checked addresses: the IP literal itself, or what the resolver returned; empty when the
    /// resolver did not resolve.
    pub addrs: Vec<IpAddr>,
}

impl ResolvedUrl {
    /// True when the addresses are known and the handler can connect to them only.
    pub fn is_pinned(&self) -> bool {
        !self.addrs.is_empty()
    }

    /// The checked socket addresses to connect to.
    pub fn socket_addrs(&self) -> Vec<SocketAddr> {
        self.addrs
            .iter()
            .map(|ip| SocketAddr::new(*ip, self.port))
            .collect()
    }
}

/// Scheme and host rules of a URL field.
#[derive(Clone, Default)]
pub struct UrlPolicy {
    /// Allowed schemes (lower case); empty means `https` and `http`.
    pub schemes: Vec<String>,
    /// Allowed hosts; empty means any public host. `*.example.com` allows sub-domains.
    pub hosts: Vec<String>,
}

impl fmt::Debug for UrlPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UrlPolicy")
            .field("schemes", &self.schemes)
            .field("hosts", &self.hosts)
            .finish()
    }
}

/// True when `ip` must never be a target: loopback, private, link-local (cloud metadata at
/// 169.254.169.254), CGNAT/shared, unspecified, broadcast, multicast, documentation, benchmark,
/// reserved, unique-local, site-local, and IPv6 forms embedding such an IPv4 address.
pub fn is_forbidden_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_forbidden_v4(v4),
        IpAddr::V6(v6) => is_forbidden_v6(v6),
    }
}

fn is_forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    a == 0                                  // "this network", unspecified
        || a == 10                          // private
        || a == 127                         // loopback
        || (a == 100 && (64..128).contains(&b)) // CGNAT / shared address space
        || (a == 169 && b == 254)           // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 168)           // private
        || (a == 192 && b == 0 && c == 0)   // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)   // documentation
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // documentation
        || (a == 203 && b == 0 && c == 113) // documentation
        || a >= 224 // multicast, reserved, broadcast
}

fn is_forbidden_v6(ip: Ipv6Addr) -> bool {
    let seg = ip.segments();
    if ip.is_unspecified() || ip.is_loopback() {
        return true;
    }
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_forbidden_v4(v4);
    }
    // IPv4-translated ::ffff:0:a.b.c.d (RFC 2765 SIIT).
    if seg[..4].iter().all(|s| *s == 0) && seg[4] == 0xffff && seg[5] == 0 {
        let [.., a, b, c, d] = ip.octets();
        return is_forbidden_v4(Ipv4Addr::new(a, b, c, d));
    }
    // IPv4-compatible ::a.b.c.d (deprecated, still routed by some stacks).
    if seg[..6].iter().all(|s| *s == 0) {
        return true;
    }
    // NAT64 well-known prefix 64:ff9b::/96 and local-use 64:ff9b:1::/48.
    if seg[0] == 0x64 && seg[1] == 0xff9b {
        if seg[2..6].iter().all(|s| *s == 0) {
            let [.., a, b, c, d] = ip.octets();
            return is_forbidden_v4(Ipv4Addr::new(a, b, c, d));
        }
        return true;
    }
    // 6to4 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD.
    if seg[0] == 0x2002 {
        let o = ip.octets();
        return is_forbidden_v4(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
    }
    (seg[0] & 0xfe00) == 0xfc00          // unique local fc00::/7
        || (seg[0] & 0xffc0) == 0xfe80   // link-local fe80::/10
        || (seg[0] & 0xffc0) == 0xfec0   // site-local fec0::/10
        || (seg[0] & 0xff00) == 0xff00   // multicast
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        || (seg[0] == 0x2001 && seg[1] == 0) // Teredo tunnels
        || (seg[0] == 0x0100 && seg[1..4].iter().all(|s| *s == 0)) // discard-only
}

/// True for names that only ever mean this host or an internal network.
fn is_internal_name(host: &str) -> bool {
    let h = host.trim_end_matches('.');
    h == "localhost"
        || h.ends_with(".localhost")
        || h == "localhost.localdomain"
        || h.ends_with(".local")
        || h.ends_with(".internal")
        || h.ends_with(".home.arpa")
        || !h.contains('.')
        || h.ends_with(".in-addr.arpa")
        || h.ends_with(".ip6.arpa")
}

pub(crate) fn host_allowed(host: &str, hosts: &[String]) -> bool {
    let h = host.trim_end_matches('.');
    hosts.iter().any(|allowed| {
        let a = allowed.trim_end_matches('.').to_ascii_lowercase();
        match a.strip_prefix("*.") {
            Some(suffix) => {
                h.len() > suffix.len()
                    && h.ends_with(suffix)
                    && h[..h.len() - suffix.len()].ends_with('.')
            }
            None => h == a,
        }
    })
}

/// `raw` with `scheme` put in front when it has none (`www.example.com/x` with `https` is
/// `https://www.example.com/x`); unchanged without a default scheme or with a scheme of its own
/// (`scheme://`, or `mailto:`-like `name:` before any `/`, `?` or `#`).
pub fn with_default_scheme<'a>(raw: &'a str, scheme: Option<&str>) -> std::borrow::Cow<'a, str> {
    let Some(scheme) = scheme else {
        return raw.into();
    };
    let head = raw.split(['/', '?', '#']).next().unwrap_or("");
    let has_scheme = raw.contains("://")
        || head.split_once(':').is_some_and(|(s, rest)| {
            // `host:port` is not a scheme: a scheme is followed by something not all digits.
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !rest.chars().all(|c| c.is_ascii_digit())
        });
    if has_scheme || raw.starts_with("//") {
        raw.into()
    } else {
        format!("{scheme}://{raw}").into()
    }
}

/// True when a label of an internationalized domain mixes scripts (`pаypal` with a Cyrillic `а`).
pub(crate) fn idn_mixed_script(ascii_host: &str) -> bool {
    if !ascii_host.split('.').any(|l| l.starts_with("xn--")) {
        return false;
    }
    let (unicode, res) = idna::domain_to_unicode(ascii_host);
    if res.is_err() {
        return true;
    }
    unicode
        .split('.')
        .any(|label| !label.is_single_script() || super::chars::whole_script_confusable(label))
}

/// Refuses a URL that parsers read differently, so the host judged here is the host every
/// client connects to: white space or control characters anywhere (`url_invalid`); an `@` in the
/// authority (`url_userinfo`); for special schemes anything but exactly `scheme://host`
/// (`http:\\h`, `http:/h`, `http:h`, `http:///h`), and a backslash or a percent-encoded byte
/// in the authority (`url_ambiguous`: `http://a.example\@b.example` is `a.example` to WHATWG
/// parsers and `b.example` to others).
fn check_unambiguous(raw: &str, parsed: &url::Url) -> Result<(), &'static str> {
    if raw.is_empty() || raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("url_invalid");
    }
    let Some((_, rest)) = raw.split_once(':') else {
        return Err("url_invalid");
    };
    let Some(after) = rest.strip_prefix("//") else {
        // No authority: a special scheme would still find a host (`http:\\h`, `http:h`).
        return if parsed.is_special() || rest.starts_with('\\') {
            Err("url_ambiguous")
        } else {
            Ok(())
        };
    };
    if after.starts_with(['/', '\\']) {
        return Err("url_ambiguous");
    }
    let authority = &after[..after.find(['/', '?', '#']).unwrap_or(after.len())];
    if authority.contains('\\') || authority.contains('%') {
        return Err("url_ambiguous");
    }
    if authority.contains('@') {
        return Err("url_userinfo");
    }
    if !authority.is_ascii() {
        // An IDN host must be written as its own Unicode form: fullwidth letters or ideographic
        // full stops (`example\u{3002}com`) are mapped by WHATWG parsers and not by others.
        let host = authority.rsplit_once(':').map_or(authority, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                authority
            }
        });
        let (unicode, res) = idna::domain_to_unicode(parsed.host_str().unwrap_or(""));
        if res.is_err()
            || unicode.trim_end_matches('.') != host.to_lowercase().trim_end_matches('.')
        {
            return Err("url_ambiguous");
        }
    }
    Ok(())
}

/// Checks one URL string; returns the checked form (with [`ResolvedUrl::url`], the normalized
/// serialization to pass on instead of `raw`) or a reason code. A URL whose host parsers read
/// differently is refused first (`url_ambiguous`, `url_userinfo`, `url_invalid`; see the
/// reason table of [`crate`]).
pub fn check_url(
    raw: &str,
    policy: &UrlPolicy,
    resolver: &dyn HostResolver,
) -> Result<ResolvedUrl, &'static str> {
    if raw.is_empty() || raw.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return Err("url_invalid");
    }
    let url = url::Url::parse(raw).map_err(|_| "url_invalid")?;
    check_unambiguous(raw, &url)?;
    let scheme = url.scheme();
    let scheme_ok = if policy.schemes.is_empty() {
        scheme == "https" || scheme == "http"
    } else {
        policy
            .schemes
            .iter()
            .any(|s| s.eq_ignore_ascii_case(scheme))
    };
    if !scheme_ok {
        return Err("url_scheme");
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url_userinfo");
    }
    let host = url.host().ok_or("url_invalid")?;
    // Non-special schemes (`sftp:`, `ssh:`...) keep an opaque host that the parser does not read
    // as an IP address: judge it as the WHATWG host parser of a special scheme reads it.
    let reparsed;
    let host = match host {
        url::Host::Domain(d) if !url.is_special() => {
            reparsed = url::Url::parse(&format!("http://{d}/")).map_err(|_| "url_invalid")?;
            reparsed.host().ok_or("url_invalid")?
        }
        other => other,
    };
    let port = url.port_or_known_default().unwrap_or(0);
    let (host_str, addrs) = match host {
        url::Host::Ipv4(v4) => {
            if is_forbidden_v4(v4) {
                return Err("url_private_address");
            }
            (v4.to_string(), vec![IpAddr::V4(v4)])
        }
        url::Host::Ipv6(v6) => {
            if is_forbidden_v6(v6) {
                return Err("url_private_address");
            }
            (v6.to_string(), vec![IpAddr::V6(v6)])
        }
        url::Host::Domain(d) => {
            let d = d.to_ascii_lowercase();
            if d.is_empty() {
                return Err("url_invalid");
            }
            if is_internal_name(&d) {
                return Err("url_internal_host");
            }
            if idn_mixed_script(&d) {
                return Err("url_mixed_script");
            }
            (d, Vec::new())
        }
    };
    if !policy.hosts.is_empty() && !host_allowed(&host_str, &policy.hosts) {
        return Err("url_host_not_allowed");
    }
    let addrs = if addrs.is_empty() {
        match resolver.resolve(&host_str, port) {
            Resolution::NotResolved => Vec::new(),
            Resolution::Failed => return Err("url_unresolvable"),
            Resolution::Addresses(v) if v.is_empty() => return Err("url_unresolvable"),
            Resolution::Addresses(v) => {
                if v.iter().any(|ip| is_forbidden_ip(*ip)) {
                    return Err("url_private_address");
                }
                v
            }
        }
    } else {
        addrs
    };
    Ok(ResolvedUrl {
        field: String::new(),
        url: url.to_string(),
        host: host_str,
        port,
        addrs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &str) -> Result<ResolvedUrl, &'static str> {
        check_url(s, &UrlPolicy::default(), &NoResolution)
    }

    #[test]
    fn every_ipv4_notation_of_loopback() {
        for s in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0177.0.0.1/",
            "http://0x7f.1/",
            "http://0x7f000001/",
            "http://127.1/",
            "http://017700000001/",
            "http://[::ffff:127.0.0.1]/",
            "http://[::ffff:7f00:1]/",
            "http://[::ffff:0:127.0.0.1]/",
            "http://[::ffff:0:7f00:1]/",
            "http://[::1]/",
            "http://[::]/",
            "http://[::127.0.0.1]/",
            "http://[64:ff9b::7f00:1]/",
            "http://[2002:7f00:1::]/",
            "http://0/",
        ] {
            assert_eq!(check(s).unwrap_err(), "url_private_address", "{s}");
        }
    }

    #[test]
    fn private_ranges() {
        for s in [
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.1/",
            "http://172.16.5.4/",
            "http://192.168.1.1/",
            "http://100.64.0.1/",
            "http://255.255.255.255/",
            "http://[fd00::1]/",
            "http://[fe80::1]/",
            "http://[::ffff:169.254.169.254]/",
        ] {
            assert_eq!(check(s).unwrap_err(), "url_private_address", "{s}");
        }
    }

    #[test]
    fn other_refusals() {
        assert_eq!(check("ftp://example.com/").unwrap_err(), "url_scheme");
        assert_eq!(check("javascript:alert(1)").unwrap_err(), "url_scheme");
        assert_eq!(
            check("http://user:pw@example.com/").unwrap_err(),
            "url_userinfo"
        );
        assert_eq!(check("https://:@example.com/").unwrap_err(), "url_userinfo");
        assert_eq!(
            check("http://example.com@127.0.0.1/").unwrap_err(),
            "url_userinfo"
        );
        assert_eq!(
            check("http://localhost:8080/").unwrap_err(),
            "url_internal_host"
        );
        assert_eq!(
            check("http://LOCALHOST./").unwrap_err(),
            "url_internal_host"
        );
        assert_eq!(
            check("http://metadata.google.internal/").unwrap_err(),
            "url_internal_host"
        );
        assert_eq!(check("not a url").unwrap_err(), "url_invalid");
        let idn = idna::domain_to_ascii("p\u{0430}ypal.com").unwrap();
        assert!(idn.starts_with("xn--"));
        assert_eq!(
            check(&format!("http://{idn}/")).unwrap_err(),
            "url_mixed_script"
        );
        assert!(
            check(&format!(
                "http://{}/",
                idna::domain_to_ascii("münchen.de").unwrap()
            ))
            .is_ok()
        );
    }

    #[test]
    fn public_urls_pass() {
        let r = check("https://example.com/a?b=c#d").unwrap();
        assert_eq!(r.host, "example.com");
        assert_eq!(r.port, 443);
        assert!(!r.is_pinned());
        let r = check("http://93.184.216.34:8080/").unwrap();
        assert_eq!(r.addrs, vec!["93.184.216.34".parse::<IpAddr>().unwrap()]);
        assert!(check("https://[2606:4700::1111]/").is_ok());
        // IPv4-translated addresses are judged by the embedded IPv4 address.
        assert!(check("https://[::ffff:0:93.184.216.34]/").is_ok());
        assert_eq!(
            check("https://[::ffff:0:a9fe:a9fe]/").unwrap_err(),
            "url_private_address"
        );
    }

    #[test]
    fn a_default_scheme_goes_only_where_none_is_written() {
        let https = Some("https");
        for (raw, read) in [
            ("www.example.com/x", "https://www.example.com/x"),
            ("example.com:8443/a", "https://example.com:8443/a"),
            ("http://example.com/", "http://example.com/"),
            ("mailto:ann@example.com", "mailto:ann@example.com"),
            ("javascript:alert(1)", "javascript:alert(1)"),
        ] {
            assert_eq!(with_default_scheme(raw, https), read, "{raw}");
        }
        assert_eq!(
            with_default_scheme("www.example.com", None),
            "www.example.com"
        );
        // What the default makes of a scheme-less URL is checked like any URL.
        let none = NoResolution;
        let read = with_default_scheme("www.example.com/news", https);
        assert_eq!(
            check_url(&read, &UrlPolicy::default(), &none).unwrap().url,
            "https://www.example.com/news"
        );
        let internal = with_default_scheme("127.0.0.1/admin", https);
        assert!(check_url(&internal, &UrlPolicy::default(), &none).is_err());
    }

    #[test]
    fn host_allowlist() {
        let p = UrlPolicy {
            schemes: vec![],
            hosts: vec!["example.com".into(), "*.docs.rs".into()],
        };
        assert!(check_url("https://example.com/", &p, &NoResolution).is_ok());
        assert!(check_url("https://serde.docs.rs/", &p, &NoResolution).is_ok());
        assert_eq!(
            check_url("https://docs.rs/", &p, &NoResolution).unwrap_err(),
            "url_host_not_allowed"
        );
        assert_eq!(
            check_url("https://evilexample.com/", &p, &NoResolution).unwrap_err(),
            "url_host_not_allowed"
        );
    }

    #[test]
    fn opaque_hosts_of_other_schemes_are_read_as_ip() {
        let p = UrlPolicy {
            schemes: vec!["sftp".into(), "ssh".into()],
            hosts: vec![],
        };
        for s in [
            "sftp://127.0.0.1/x",
            "sftp://0x7f.1/",
            "ssh://2130706433/",
            "sftp://[::1]/",
            "ssh://localhost/",
        ] {
            assert!(check_url(s, &p, &NoResolution).is_err(), "{s}");
        }
        assert!(check_url("sftp://files.example.com/x", &p, &NoResolution).is_ok());
    }

    #[test]
    fn confusable_and_intranet_hosts() {
        let munich = idna::domain_to_ascii("münchen.de").unwrap();
        assert!(check(&format!("http://{munich}/")).is_ok());
        let apple = idna::domain_to_ascii("\u{0430}\u{0440}\u{0440}\u{04CF}\u{0435}.com").unwrap();
        assert_eq!(
            check(&format!("https://{apple}/")).unwrap_err(),
            "url_mixed_script"
        );
        assert_eq!(check("http://intranet/").unwrap_err(), "url_internal_host");
    }

    #[test]
    fn hosts_parsers_disagree_on_are_refused() {
        for (s, why) in [
            ("http://allowed.example\\@evil.example/", "url_ambiguous"),
            ("http://allowed.example\\.evil.example/", "url_ambiguous"),
            ("https:\\\\evil.example/", "url_ambiguous"),
            ("https:/\\evil.example/", "url_ambiguous"),
            ("https:\\/evil.example/", "url_ambiguous"),
            ("https:evil.example/", "url_ambiguous"),
            ("https:/evil.example/", "url_ambiguous"),
            ("https:///evil.example/", "url_ambiguous"),
            ("http://evil.example%2f@allowed.example/", "url_ambiguous"),
            ("http://allowed.example%40evil.example/", "url_invalid"),
            ("http://%31%32%37.0.0.1/", "url_ambiguous"),
            ("http://exa%6dple.com/", "url_ambiguous"),
            ("http://example\u{3002}com/", "url_ambiguous"),
            ("http://\u{ff45}xample.com/", "url_ambiguous"),
            ("http://allowed.example@evil.example/", "url_userinfo"),
            ("http://exa\tmple.com/", "url_invalid"),
            ("http://example.com/\u{0}", "url_invalid"),
            ("http://example.com/a\u{85}b", "url_invalid"),
            (" http://example.com/", "url_invalid"),
        ] {
            assert_eq!(check(s).unwrap_err(), why, "{s:?}");
        }
    }

    #[test]
    fn the_checked_form_is_the_normalized_serialization() {
        for (raw, normalized) in [
            (
                "HTTPS://Example.COM/a/../b?x#y",
                "https://example.com/b?x#y",
            ),
            ("https://example.com:443/p\\q", "https://example.com/p/q"),
            ("http://m\u{fc}nchen.de/", "http://xn--mnchen-3ya.de/"),
            (
                "https://example.com/caf\u{e9}",
                "https://example.com/caf%C3%A9",
            ),
        ] {
            assert_eq!(check(raw).unwrap().url, normalized, "{raw:?}");
            assert_eq!(check(normalized).unwrap().url, normalized);
        }
    }

    struct Fixed(Vec<IpAddr>);
    impl HostResolver for Fixed {
        fn resolve(&self, _host: &str, _port: u16) -> Resolution {
            Resolution::Addresses(self.0.clone())
        }
    }

    #[test]
    fn resolved_addresses_are_checked_and_pinned() {
        let p = UrlPolicy::default();
        let rebinding = Fixed(vec![
            "93.184.216.34".parse().unwrap(),
            "127.0.0.1".parse().unwrap(),
        ]);
        assert_eq!(
            check_url("https://rebind.example/", &p, &rebinding).unwrap_err(),
            "url_private_address"
        );
        let ok = Fixed(vec!["93.184.216.34".parse().unwrap()]);
        let r = check_url("https://ok.example/", &p, &ok).unwrap();
        assert!(r.is_pinned());
        assert_eq!(
            r.socket_addrs(),
            vec!["93.184.216.34:443".parse::<SocketAddr>().unwrap()]
        );
    }
}
