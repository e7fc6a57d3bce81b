//! The console's routes: HTML pages and a JSON API with the same paths under `/api`, behind one
//! layer that sets the security headers on every response.
//!
//! | method | path | what |
//! | --- | --- | --- |
//! | GET | `/`, `/requests` | pending requests of the reviewer's tenant |
//! | GET | `/requests/{id}` | one request, with the decision forms if the reviewer may decide |
//! | POST | `/requests/{id}/approve` | approve (form field `csrf`) |
//! | POST | `/requests/{id}/reject` | reject (form fields `csrf`, `reason`) |
//! | GET | `/history` | decided and expired requests |
//! | GET | `/api/session` | the reviewer and their CSRF token |
//! | GET | `/api/requests`, `/api/requests/{id}`, `/api/history` | as above, JSON |
//! | POST | `/api/requests/{id}/approve`, `/api/requests/{id}/reject` | header `X-CSRF-Token`; reject takes `{"reason": ".."}` |

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use crate::console::{Refusal, Shared, Verb, decision_status};
use crate::pages::{self, Frame};

type St<S> = State<Arc<Shared<S>>>;

/// The Content-Security-Policy of every console response: own scripts and styles only, no
/// inline code, no framing, forms post only to the console.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

const CSS: &str = include_str!("../assets/console.css");
const JS: &str = include_str!("../assets/console.js");

pub(crate) fn router<S: Send + Sync + 'static>(shared: Arc<Shared<S>>) -> Router {
    Router::new()
        .route("/", get(html_pending::<S>))
        .route("/requests", get(html_pending::<S>))
        .route("/requests/{id}", get(html_detail::<S>))
        .route("/requests/{id}/approve", post(html_approve::<S>))
        .route("/requests/{id}/reject", post(html_reject::<S>))
        .route("/history", get(html_history::<S>))
        .route("/api/session", get(api_session::<S>))
        .route("/api/requests", get(api_pending::<S>))
        .route("/api/requests/{id}", get(api_detail::<S>))
        .route("/api/requests/{id}/approve", post(api_approve::<S>))
        .route("/api/requests/{id}/reject", post(api_reject::<S>))
        .route("/api/history", get(api_history::<S>))
        .route(
            "/assets/console.css",
            get(|| asset("text/css; charset=utf-8", CSS)),
        )
        .route(
            "/assets/console.js",
            get(|| asset("text/javascript; charset=utf-8", JS)),
        )
        .layer(axum::middleware::map_response(security_headers))
        .with_state(shared)
}

async fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

async fn security_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    let set = |h: &mut HeaderMap, name: &'static str, value: &'static str| {
        h.insert(name, HeaderValue::from_static(value));
    };
    set(h, "content-security-policy", CONTENT_SECURITY_POLICY);
    set(h, "x-frame-options", "DENY");
    set(h, "x-content-type-options", "nosniff");
    set(h, "referrer-policy", "no-referrer");
    set(h, "cross-origin-opener-policy", "same-origin");
    set(h, "cross-origin-resource-policy", "same-origin");
    set(h, "cache-control", "no-store, max-age=0");
    set(h, "pragma", "no-cache");
    res
}

/// Form fields of a decision.
#[derive(Deserialize, Default)]
struct DecisionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    reason: String,
}

/// JSON body of an API decision.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ApiDecision {
    #[serde(default)]
    reason: String,
}

// ---- HTML ----

fn frame<'a, S: Send + Sync + 'static>(
    c: &'a Shared<S>,
    reviewer: &'a toolguard_pipeline::Principal,
    title: &'a str,
    csrf: &'a str,
) -> Frame<'a> {
    Frame {
        base: &c.base,
        title,
        reviewer,
        csrf,
        logout: c.logout.as_deref(),
    }
}

fn html_refusal<S: Send + Sync + 'static>(c: &Shared<S>, r: Refusal) -> Response {
    if r.status == StatusCode::UNAUTHORIZED
        && let Some(login) = &c.login
    {
        return Redirect::to(login).into_response();
    }
    let heading = match r.status {
        StatusCode::UNAUTHORIZED => "Sign-in required",
        StatusCode::FORBIDDEN => "Not allowed",
        StatusCode::NOT_FOUND => "Not found",
        _ => "Not possible",
    };
    let logout = (r.status != StatusCode::UNAUTHORIZED)
        .then_some(c.logout.as_deref())
        .flatten();
    let page = pages::refusal(&c.base, &c.title, heading, &r.message, logout);
    (r.status, Html(page.into_string())).into_response()
}

async fn html_pending<S: Send + Sync + 'static>(State(c): St<S>, headers: HeaderMap) -> Response {
    let result = async {
        let me = c.reviewer(&headers).await?;
        let views = c.pending(&me).await?;
        let csrf = c.csrf_token(&me);
        Ok::<_, Refusal>(pages::pending(&frame(&c, &me, &c.title, &csrf), &views))
    };
    match result.await {
        Ok(page) => Html(page.into_string()).into_response(),
        Err(r) => html_refusal(&c, r),
    }
}

async fn html_detail<S: Send + Sync + 'static>(
    State(c): St<S>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let me = c.reviewer(&headers).await?;
        let view = c.one(&me, &id).await?;
        let csrf = c.csrf_token(&me);
        Ok::<_, Refusal>(pages::detail(&frame(&c, &me, &c.title, &csrf), &view))
    };
    match result.await {
        Ok(page) => Html(page.into_string()).into_response(),
        Err(r) => html_refusal(&c, r),
    }
}

async fn html_decide<S: Send + Sync + 'static>(
    c: &Shared<S>,
    id: &str,
    headers: &HeaderMap,
    csrf: &str,
    verb: Verb,
) -> Response {
    let result = async {
        let me = c.reviewer(headers).await?;
        let (out, after) = c.decide(&me, headers, csrf, id, verb).await?;
        let token = c.csrf_token(&me);
        let page = pages::outcome(&frame(c, &me, &c.title, &token), &out, after.as_ref());
        Ok::<_, Refusal>((decision_status(&out), Html(page.into_string())))
    };
    match result.await {
        Ok(answer) => answer.into_response(),
        Err(r) => html_refusal(c, r),
    }
}

async fn html_approve<S: Send + Sync + 'static>(
    State(c): St<S>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<DecisionForm>,
) -> Response {
    html_decide(&c, &id, &headers, &form.csrf, Verb::Approve).await
}

async fn html_reject<S: Send + Sync + 'static>(
    State(c): St<S>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<DecisionForm>,
) -> Response {
    html_decide(&c, &id, &headers, &form.csrf, Verb::Reject(form.reason)).await
}

async fn html_history<S: Send + Sync + 'static>(State(c): St<S>, headers: HeaderMap) -> Response {
    let result = async {
        let me = c.reviewer(&headers).await?;
        let views = c.history(&me).await?;
        let csrf = c.csrf_token(&me);
        Ok::<_, Refusal>(pages::history(&frame(&c, &me, &c.title, &csrf), &views))
    };
    match result.await {
        Ok(page) => Html(page.into_string()).into_response(),
        Err(r) => html_refusal(&c, r),
    }
}

// ---- JSON ----

fn api_refusal(r: Refusal) -> Response {
    let body = json!({ "error": r.code, "message": r.message });
    (r.status, axum::Json(body)).into_response()
}

fn api<T: serde::Serialize>(result: Result<T, Refusal>) -> Response {
    match result {
        Ok(v) => axum::Json(v).into_response(),
        Err(r) => api_refusal(r),
    }
}

async fn api_session<S: Send + Sync + 'static>(State(c): St<S>, headers: HeaderMap) -> Response {
    api(c.reviewer(&headers).await.map(|me| {
        json!({
            "tenant": me.tenant,
            "subject": me.subject,
            "roles": me.roles,
            "csrf_token": c.csrf_token(&me),
        })
    }))
}

async fn api_pending<S: Send + Sync + 'static>(State(c): St<S>, headers: HeaderMap) -> Response {
    let result = async {
        let me = c.reviewer(&headers).await?;
        Ok(json!({ "requests": c.pending(&me).await? }))
    };
    api(result.await)
}

async fn api_detail<S: Send + Sync + 'static>(
    State(c): St<S>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let me = c.reviewer(&headers).await?;
        c.one(&me, &id).await
    };
    api(result.await)
}

async fn api_history<S: Send + Sync + 'static>(State(c): St<S>, headers: HeaderMap) -> Response {
    let result = async {
        let me = c.reviewer(&headers).await?;
        Ok(json!({ "requests": c.history(&me).await? }))
    };
    api(result.await)
}

async fn api_decide<S: Send + Sync + 'static>(
    c: &Shared<S>,
    id: &str,
    headers: &HeaderMap,
    body: &[u8],
    reject: bool,
) -> Response {
    let result = async {
        let me = c.reviewer(headers).await?;
        let decision: ApiDecision = if body.iter().all(u8::is_ascii_whitespace) {
            ApiDecision::default()
        } else {
            serde_json::from_slice(body).map_err(|e| {
                Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "malformed",
                    format!("the body must be a JSON object like {{\"reason\": \"...\"}}: {e}"),
                )
            })?
        };
        let token = headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let verb = if reject {
            Verb::Reject(decision.reason)
        } else {
            Verb::Approve
        };
        let (out, after) = c.decide(&me, headers, token, id, verb).await?;
        Ok((
            decision_status(&out),
            json!({ "outcome": out, "request": after }),
        ))
    };
    match result.await {
        Ok((status, body)) => (status, axum::Json(body)).into_response(),
        Err(r) => api_refusal(r),
    }
}

async fn api_approve<S: Send + Sync + 'static>(
    State(c): St<S>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    api_decide(&c, &id, &headers, &body, false).await
}

async fn api_reject<S: Send + Sync + 'static>(
    State(c): St<S>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    api_decide(&c, &id, &headers, &body, true).await
}
