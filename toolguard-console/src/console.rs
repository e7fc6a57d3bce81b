//! The console's operations, shared by the HTML pages and the JSON API: who is asking, what they
//! may see, and handing a decision to the dispatcher.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use toolguard_pipeline::{Clock, Dispatcher, Principal, Status, SystemClock, ToolOutcome};

use crate::csrf::CsrfKey;
use crate::decide;
use crate::history::History;
use crate::reviewer::ReviewerAuth;
use crate::view::RequestView;

/// Longest rejection reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;
/// Most decided requests a history page lists.
pub const HISTORY_PAGE: usize = 100;

/// What reviewers who may not decide a request see of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ineligible {
    /// Listed and viewable, without decision buttons (default).
    #[default]
    ReadOnly,
    /// Not listed; its page answers `404` as a foreign request does.
    Hidden,
}

/// Why the console refused a request; no refusal has a side effect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Refusal {
            status,
            code,
            message: message.into(),
        }
    }

    fn not_found() -> Self {
        Refusal::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such approval request in your tenant",
        )
    }

    fn unavailable() -> Self {
        Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "approvals are unavailable; try again shortly",
        )
    }
}

/// A decision a reviewer asks for.
pub(crate) enum Verb {
    Approve,
    Reject(String),
}

/// Everything a console needs, shared by its handlers.
pub(crate) struct Shared<S: Send + Sync + 'static> {
    pub(crate) dispatcher: Dispatcher<S>,
    pub(crate) auth: Arc<dyn ReviewerAuth>,
    pub(crate) csrf: CsrfKey,
    pub(crate) history: History,
    pub(crate) base: String,
    pub(crate) title: String,
    pub(crate) login: Option<String>,
    pub(crate) logout: Option<String>,
    pub(crate) ineligible: Ineligible,
    pub(crate) reviewer_roles: Vec<String>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl<S: Send + Sync + 'static> Shared<S> {
    fn now_ms(&self) -> u64 {
        toolguard_pipeline::clock::unix_millis(self.clock.now())
    }

    /// The signed-in reviewer, if they may use the console at all.
    pub(crate) async fn reviewer(&self, headers: &HeaderMap) -> Result<Principal, Refusal> {
        let Some(p) = self.auth.reviewer(headers).await else {
            return Err(Refusal::new(
                StatusCode::UNAUTHORIZED,
                "unauthenticated",
                "sign in to review approval requests",
            ));
        };
        if !self.reviewer_roles.is_empty() && !self.reviewer_roles.iter().any(|r| p.has_role(r)) {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "not_a_reviewer",
                format!(
                    "the approval console is for the roles {}; ask an administrator for access",
                    self.reviewer_roles.join(", ")
                ),
            ));
        }
        Ok(p)
    }

    /// The reviewer's CSRF token.
    pub(crate) fn csrf_token(&self, reviewer: &Principal) -> String {
        self.csrf.token(reviewer)
    }

    fn view(
        &self,
        r: &toolguard_pipeline::store::ApprovalRequest,
        viewer: &Principal,
    ) -> RequestView {
        RequestView::new(r, self.dispatcher.spec(&r.tool), viewer, self.now_ms())
    }

    fn visible(&self, v: &RequestView) -> bool {
        v.eligible || self.ineligible == Ineligible::ReadOnly || !v.is_pending()
    }

    /// The pending requests of the reviewer's tenant that they may see.
    pub(crate) async fn pending(&self, viewer: &Principal) -> Result<Vec<RequestView>, Refusal> {
        let requests = decide::pending(&self.dispatcher, viewer)
            .await
            .map_err(|_| Refusal::unavailable())?;
        Ok(requests
            .iter()
            .map(|r| self.view(r, viewer))
            .filter(|v| self.visible(v))
            .collect())
    }

    /// Request `id` of the reviewer's tenant.
    pub(crate) async fn one(&self, viewer: &Principal, id: &str) -> Result<RequestView, Refusal> {
        if !plausible_id(id) {
            return Err(Refusal::not_found());
        }
        let request = decide::get(&self.dispatcher, viewer, id)
            .await
            .map_err(|_| Refusal::unavailable())?
            .ok_or_else(Refusal::not_found)?;
        let v = self.view(&request, viewer);
        if self.visible(&v) {
            Ok(v)
        } else {
            Err(Refusal::not_found())
        }
    }

    /// Decided requests of the reviewer's tenant, newest first.
    pub(crate) async fn history(&self, viewer: &Principal) -> Result<Vec<RequestView>, Refusal> {
        let mut out = Vec::new();
        for id in self.history.of_tenant(&viewer.tenant, HISTORY_PAGE) {
            match decide::get(&self.dispatcher, viewer, &id).await {
                Ok(Some(r)) => out.push(self.view(&r, viewer)),
                Ok(None) => {}
                Err(_) => return Err(Refusal::unavailable()),
            }
        }
        Ok(out)
    }

    /// Checks the request's CSRF token and origin, then hands the decision to the dispatcher.
    /// Returns the outcome and the request as it is afterwards.
    pub(crate) async fn decide(
        &self,
        reviewer: &Principal,
        headers: &HeaderMap,
        token: &str,
        id: &str,
        verb: Verb,
    ) -> Result<(ToolOutcome, Option<RequestView>), Refusal> {
        check_origin(headers)?;
        if !self.csrf.verify(reviewer, token) {
            return Err(Refusal::new(
                StatusCode::FORBIDDEN,
                "csrf",
                "the form's security token is missing or belongs to another session; reload the \
                 page and decide again",
            ));
        }
        if let Verb::Reject(reason) = &verb {
            check_reason(reason)?;
        }
        // Not visible means not decidable here either (hidden requests stay hidden).
        self.one(reviewer, id).await?;
        let outcome = match verb {
            Verb::Approve => decide::approve(&self.dispatcher, reviewer, id).await,
            Verb::Reject(reason) => {
                decide::reject(&self.dispatcher, reviewer, id, reason.trim()).await
            }
        };
        let after = decide::get(&self.dispatcher, reviewer, id)
            .await
            .ok()
            .flatten();
        if let Some(r) = &after
            && r.state != toolguard_pipeline::store::ApprovalState::Pending
        {
            self.history.record(&r.requester.tenant, &r.id);
        }
        Ok((outcome, after.map(|r| self.view(&r, reviewer))))
    }
}

/// The HTTP status of a decision's outcome: refusals by the dispatcher keep theirs.
pub(crate) fn decision_status(out: &ToolOutcome) -> StatusCode {
    match out.status {
        Status::Forbidden => StatusCode::FORBIDDEN,
        Status::NotFound => StatusCode::NOT_FOUND,
        Status::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Status::InProgress | Status::ApprovalExpired | Status::PreconditionFailed => {
            StatusCode::CONFLICT
        }
        _ => StatusCode::OK,
    }
}

fn check_reason(reason: &str) -> Result<(), Refusal> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "reason_required",
            "a rejection needs a reason: write why in the reason field",
        ));
    }
    let control = |c: char| c.is_control() && !matches!(c, '\n' | '\r' | '\t');
    if reason.chars().count() > MAX_REASON_CHARS || reason.chars().any(control) {
        return Err(Refusal::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "reason_invalid",
            format!("the reason must be at most {MAX_REASON_CHARS} characters of plain text"),
        ));
    }
    Ok(())
}

/// Browsers say where a POST comes from; a cross-site one is refused whatever it carries.
fn check_origin(headers: &HeaderMap) -> Result<(), Refusal> {
    let site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if site == "cross-site" || site == "same-site" {
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            "cross_site",
            "decisions are accepted only from the console's own pages",
        ));
    }
    Ok(())
}

/// Approval ids are `apr_` and hex; anything else is not looked up.
fn plausible_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The default clock.
pub(crate) fn system_clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}
