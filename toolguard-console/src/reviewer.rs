//! Who is looking at the console: the host's authentication turns a request into a
//! [`Principal`]. The console never authenticates anyone itself.

use axum::http::HeaderMap;
use toolguard_pipeline::{BoxFuture, Principal};

/// The host's side of reviewer identity: its session cookie, header or token → a [`Principal`]
/// (tenant, subject, roles, `session_id` of the reviewer's login session, `authenticated_at`).
///
/// The console binds its CSRF tokens to `session_id`, so it must change at every login. Return
/// `None` for a request without a valid session: the console answers `401` and does nothing.
///
/// ```
/// use axum::http::HeaderMap;
/// use toolguard_pipeline::{BoxFuture, Principal};
/// use toolguard_console::ReviewerAuth;
///
/// /// Trusts a header set by the host's authenticating proxy.
/// struct ProxyHeader;
/// impl ReviewerAuth for ProxyHeader {
///     fn reviewer<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Option<Principal>> {
///         Box::pin(async move {
///             let user = headers.get("x-authenticated-user")?.to_str().ok()?;
///             Some(Principal::new("acme", user, "proxy-session").with_role("teller"))
///         })
///     }
/// }
/// ```
pub trait ReviewerAuth: Send + Sync + 'static {
    /// The signed-in reviewer of a request with these headers, if any.
    fn reviewer<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Option<Principal>>;
}

impl<T: ReviewerAuth> ReviewerAuth for std::sync::Arc<T> {
    fn reviewer<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Option<Principal>> {
        (**self).reviewer(headers)
    }
}
