//! The reviewer's side of toolguard approvals.
//!
//! - [`Console`] (feature `console`): the console's pages, served on a listener of the host
//!   ([`Console::serve`]) or, with feature `axum`, as an axum router the host nests into its own
//!   app. Reviewers see the pending requests of their tenant with the exact preview of what
//!   will execute, approve or reject them (every decision goes through
//!   [`Dispatcher::approvals`](toolguard_pipeline::Dispatcher::approvals)), and see a history. The same
//!   routes answer JSON under `/api` for hosts with their own front end. See [`routes`] for the
//!   route table and the security headers.
//! - [`webhook::WebhookNotifier`] (feature `webhook`): an
//!   [`ApprovalNotifier`](toolguard_pipeline::notify::ApprovalNotifier) that POSTs signed JSON.
//!
//! ```no_run
//! # #[cfg(feature = "console")]
//! # async fn mount(dispatcher: toolguard_pipeline::Dispatcher<()>, auth: impl toolguard_console::ReviewerAuth) -> std::io::Result<()> {
//! use toolguard_console::{Console, History};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! Console::new(dispatcher, auth)
//!     .mounted_at("/console")
//!     .history(History::new())
//!     .serve(listener)
//!     .await
//! # }
//! ```

#![warn(missing_docs)]

mod history;
pub mod money;

pub use history::{HISTORY_CAPACITY, History};

#[cfg(feature = "console")]
mod console;
#[cfg(feature = "console")]
mod csrf;
#[cfg(feature = "console")]
mod decide;
#[cfg(feature = "console")]
mod pages;
#[cfg(feature = "console")]
mod reviewer;
#[cfg(feature = "console")]
pub mod routes;
#[cfg(feature = "console")]
pub mod view;

#[cfg(feature = "console")]
pub use console::{HISTORY_PAGE, Ineligible, MAX_REASON_CHARS};
#[cfg(feature = "console")]
pub use reviewer::ReviewerAuth;

#[cfg(feature = "webhook")]
pub mod webhook;

#[cfg(feature = "console")]
mod builder {
    use std::sync::Arc;

    use toolguard_pipeline::{Clock, Dispatcher};

    use crate::console::{Ineligible, Shared, system_clock};
    use crate::csrf::CsrfKey;
    use crate::{History, ReviewerAuth};

    /// An approval console for one dispatcher; [`Console::router`] makes the axum router.
    #[must_use]
    pub struct Console<S: Send + Sync + 'static> {
        shared: Shared<S>,
    }

    impl<S: Send + Sync + 'static> std::fmt::Debug for Console<S> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Console").finish_non_exhaustive()
        }
    }

    impl<S: Send + Sync + 'static> Console<S> {
        /// A console over `dispatcher`'s approvals; `auth` says who the reviewer is.
        pub fn new(dispatcher: Dispatcher<S>, auth: impl ReviewerAuth) -> Self {
            Console {
                shared: Shared {
                    dispatcher,
                    auth: Arc::new(auth),
                    csrf: CsrfKey::random(),
                    history: History::new(),
                    base: String::new(),
                    title: "Approvals".to_owned(),
                    login: None,
                    logout: None,
                    ineligible: Ineligible::default(),
                    reviewer_roles: Vec::new(),
                    clock: system_clock(),
                },
            }
        }

        /// The path the host nests the router under (like `/console`), for links and forms.
        pub fn mounted_at(mut self, base: &str) -> Self {
            self.shared.base = base.trim_end_matches('/').to_owned();
            self
        }

        /// The name shown in the page header (default `Approvals`).
        pub fn title(mut self, title: &str) -> Self {
            self.shared.title = title.to_owned();
            self
        }

        /// Where a browser without a session is sent (default: a `401` page).
        pub fn sign_in_url(mut self, url: &str) -> Self {
            self.shared.login = Some(url.to_owned());
            self
        }

        /// The host's sign-out endpoint (POST); shown in the header.
        pub fn sign_out_url(mut self, url: &str) -> Self {
            self.shared.logout = Some(url.to_owned());
            self
        }

        /// What reviewers who may not decide a request see of it (default read-only).
        pub fn ineligible(mut self, show: Ineligible) -> Self {
            self.shared.ineligible = show;
            self
        }

        /// Only principals with one of `roles` may open the console (default: anyone the host
        /// authenticated, limited to their tenant).
        pub fn reviewer_roles<I, R>(mut self, roles: I) -> Self
        where
            I: IntoIterator<Item = R>,
            R: Into<String>,
        {
            self.shared.reviewer_roles = roles.into_iter().map(Into::into).collect();
            self
        }

        /// The history the console lists; add the same [`History`] to the dispatcher as a
        /// notifier so that decisions made elsewhere appear too.
        pub fn history(mut self, history: History) -> Self {
            self.shared.history = history;
            self
        }

        /// The key of the CSRF tokens (default: random per console). Replicas behind one load
        /// balancer must share it.
        pub fn csrf_key(mut self, key: [u8; 32]) -> Self {
            self.shared.csrf = CsrfKey::from_bytes(key);
            self
        }

        /// The clock of the countdowns (default: the system clock); use the dispatcher's.
        pub fn clock(mut self, clock: impl Clock) -> Self {
            self.shared.clock = Arc::new(clock);
            self
        }

        /// Serves the console on `listener` until the server fails: its pages under the path
        /// given to [`mounted_at`](Self::mounted_at) (the root by default), nothing else. For a
        /// console inside the host's own axum app, see `router` (feature `axum`).
        pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
            let base = self.shared.base.clone();
            let routes = crate::routes::router(Arc::new(self.shared));
            let app = if base.is_empty() {
                routes
            } else {
                axum::Router::new().nest(&base, routes)
            };
            axum::serve(listener, app).await
        }

        /// The router to nest into the host's own axum app, under the path given to
        /// [`mounted_at`](Self::mounted_at). Feature `axum`: the type is axum's, so this method
        /// follows axum's releases ([`serve`](Self::serve) does not).
        #[cfg(feature = "axum")]
        #[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
        pub fn router(self) -> axum::Router {
            crate::routes::router(Arc::new(self.shared))
        }
    }
}

#[cfg(feature = "console")]
pub use builder::Console;
