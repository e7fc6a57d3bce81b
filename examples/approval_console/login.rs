//! The demo's sign-in: fixed users, a session cookie, and the console's [`ReviewerAuth`] over it.
//! A real host uses its own authentication here.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;
use toolguard::{BoxFuture, Principal};
use toolguard_console::ReviewerAuth;

/// The name of the session cookie.
pub const COOKIE: &str = "demo_session";
/// Every demo user's password.
pub const DEMO_PASSWORD: &str = "demo";

/// A demo user.
pub struct User {
    /// Login name (the principal's subject).
    pub name: &'static str,
    /// Tenant.
    pub tenant: &'static str,
    /// Roles.
    pub roles: &'static [&'static str],
    /// Who they are.
    pub about: &'static str,
}

/// The fixed users of the demo.
pub const USERS: &[User] = &[
    User {
        name: "tina",
        tenant: "acme",
        roles: &["teller"],
        about: "teller: may approve transfers and wires",
    },
    User {
        name: "omar",
        tenant: "acme",
        roles: &["teller"],
        about: "teller: second approver for wires",
    },
    User {
        name: "cora",
        tenant: "acme",
        roles: &["compliance"],
        about: "compliance officer: approves wires, sees transfers read-only",
    },
    User {
        name: "alice",
        tenant: "acme",
        roles: &[],
        about: "the customer whose agent proposed the transfers (refused)",
    },
    User {
        name: "gus",
        tenant: "globex",
        roles: &["teller"],
        about: "teller at another bank customer (sees none of acme's)",
    },
];

/// Signed-in sessions: cookie value → principal (with its own session id, not the cookie).
#[derive(Clone, Default)]
pub struct Sessions {
    by_cookie: Arc<Mutex<HashMap<String, Principal>>>,
}

fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn cookie_value(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

impl Sessions {
    /// Signs `name` in; returns the cookie value.
    pub fn sign_in(&self, name: &str) -> Option<String> {
        let user = USERS.iter().find(|u| u.name == name)?;
        let mut p = Principal::new(user.tenant, user.name, format!("login-{}", random_token()));
        for role in user.roles {
            p = p.with_role(*role);
        }
        let cookie = random_token();
        self.by_cookie.lock().ok()?.insert(cookie.clone(), p);
        Some(cookie)
    }

    fn sign_out(&self, headers: &HeaderMap) {
        if let (Some(c), Ok(mut map)) = (cookie_value(headers), self.by_cookie.lock()) {
            map.remove(c);
        }
    }
}

impl ReviewerAuth for Sessions {
    fn reviewer<'a>(&'a self, headers: &'a HeaderMap) -> BoxFuture<'a, Option<Principal>> {
        Box::pin(async move {
            let cookie = cookie_value(headers)?;
            self.by_cookie.lock().ok()?.get(cookie).cloned()
        })
    }
}

const LOGIN_PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · Acme Bank back office</title>
<link rel="stylesheet" href="/console/assets/console.css"></head>
<body><main><h1>Acme Bank back office</h1>
<form method="post" action="/login" id="login">
<p><label for="username">User</label><br><input id="username" name="username" autocomplete="username" required></p>
<p><label for="password">Password</label><br><input id="password" name="password" type="password" autocomplete="current-password" required></p>
<p><button class="approve" type="submit">Sign in</button></p>
</form>
<p>Demo users: tina and omar (tellers), cora (compliance), alice (the customer), gus (another tenant's teller); password <code>demo</code>.</p>
</main></body></html>"#;

/// `GET /login`.
pub async fn page() -> Response {
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                toolguard_console::routes::CONTENT_SECURITY_POLICY,
            ),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        Html(LOGIN_PAGE),
    )
        .into_response()
}

/// The sign-in form.
#[derive(Deserialize)]
pub struct Credentials {
    username: String,
    password: String,
}

/// `POST /login`: sets the session cookie and goes to the console.
pub async fn sign_in(State(sessions): State<Sessions>, Form(c): Form<Credentials>) -> Response {
    if c.password != DEMO_PASSWORD {
        return (
            StatusCode::UNAUTHORIZED,
            Html("wrong user or password; <a href=\"/login\">try again</a>"),
        )
            .into_response();
    }
    let Some(cookie) = sessions.sign_in(&c.username) else {
        return (
            StatusCode::UNAUTHORIZED,
            Html("wrong user or password; <a href=\"/login\">try again</a>"),
        )
            .into_response();
    };
    let set = format!("{COOKIE}={cookie}; Path=/; HttpOnly; SameSite=Strict");
    (
        [(header::SET_COOKIE, set)],
        Redirect::to("/console/requests"),
    )
        .into_response()
}

/// `POST /logout`.
pub async fn sign_out(State(sessions): State<Sessions>, headers: HeaderMap) -> Response {
    sessions.sign_out(&headers);
    let clear = format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
    ([(header::SET_COOKIE, clear)], Redirect::to("/login")).into_response()
}
