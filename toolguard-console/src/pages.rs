//! The console's HTML, rendered by `maud`: every interpolated value is escaped, so a
//! model-proposed `<script>` is text. No inline script or style (the CSP forbids both); the
//! countdown is `assets/console.js`.

use maud::{DOCTYPE, Markup, html};
use toolguard_pipeline::{Principal, ToolOutcome};

use crate::view::RequestView;

/// Links and labels shared by every page.
pub(crate) struct Frame<'a> {
    /// Where the console is mounted (`""` or `/console`).
    pub base: &'a str,
    /// Page title.
    pub title: &'a str,
    /// The signed-in reviewer.
    pub reviewer: &'a Principal,
    /// The reviewer's CSRF token.
    pub csrf: &'a str,
    /// The host's sign-out URL, if any.
    pub logout: Option<&'a str>,
}

fn layout(f: &Frame<'_>, heading: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (heading) " · " (f.title) }
                link rel="stylesheet" href={ (f.base) "/assets/console.css" };
                script src={ (f.base) "/assets/console.js" } defer {}
            }
            body {
                header.top {
                    span.brand { (f.title) }
                    nav {
                        a href={ (f.base) "/requests" } { "Pending" }
                        a href={ (f.base) "/history" } { "History" }
                    }
                    span.who {
                        "Signed in as " strong id="reviewer" { (f.reviewer.subject) }
                        " (" (f.reviewer.tenant) ")"
                        @if let Some(url) = f.logout {
                            form.inline method="post" action=(url) {
                                input type="hidden" name="csrf" value=(f.csrf);
                                button.link type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main { h1 { (heading) } (body) }
            }
        }
    }
}

fn countdown(v: &RequestView) -> Markup {
    html! {
        span.countdown data-expires-at-ms=(v.expires_at_ms) title=(v.expires_at) { (v.expires_in) }
    }
}

fn progress(v: &RequestView) -> Markup {
    html! { span.progress { (v.approvals_given) " of " (v.approvals_required) " approvals" } }
}

fn badge(v: &RequestView) -> Markup {
    html! {
        @if v.eligible {
            span.badge.yours { "You can decide" }
        } @else if let Some(why) = &v.ineligible_reason {
            span.badge.readonly title=(why) { "Read-only" }
        }
    }
}

/// The pending requests of the reviewer's tenant.
pub(crate) fn pending(f: &Frame<'_>, views: &[RequestView]) -> Markup {
    let body = html! {
        @if views.is_empty() {
            p.empty { "Nothing waits for a decision." }
        } @else {
            table.requests {
                thead { tr {
                    th { "Tool" } th { "Amount" } th { "Requester" } th { "Proposed" }
                    th { "Expires in" } th { "Dual control" } th { "" } th { "" }
                } }
                tbody {
                    @for v in views {
                        tr.request data-id=(v.id) {
                            td { code { (v.tool) } br; span.risk { "risk " (v.risk) } }
                            td.amount { (v.amount.as_deref().unwrap_or("—")) }
                            td { (v.requester) }
                            td { (v.created_at) }
                            td { (countdown(v)) }
                            td { (progress(v)) }
                            td { (badge(v)) }
                            td { a.review href={ (f.base) "/requests/" (v.id) } { "Review" } }
                        }
                    }
                }
            }
        }
    };
    layout(f, "Pending approvals", body)
}

fn arguments(v: &RequestView) -> Markup {
    html! {
        table.arguments {
            thead { tr {
                th { "Argument" } th { "Value that will execute" }
                @if v.arguments.iter().any(|a| a.origin.is_some()) { th { "Came from" } }
            } }
            tbody {
                @for a in &v.arguments {
                    tr data-argument=(a.name) {
                        th {
                            code { (a.name) }
                            @if let Some(d) = &a.description { br; small { (d) } }
                        }
                        td {
                            @if a.redacted { span.redacted { (a.value) } }
                            @else { code.value { (a.value) } }
                            @if a.amount { @if let Some(amount) = &v.amount {
                                " = " strong.money { (amount) }
                            } }
                        }
                        @if let Some(origin) = &a.origin { td.origin data-origin=(origin) { (origin) } }
                    }
                }
            }
        }
    }
}

fn decisions(v: &RequestView) -> Markup {
    html! {
        @if !v.decisions.is_empty() {
            h2 { "Decisions" }
            ul.decisions {
                @for d in &v.decisions {
                    li {
                        strong { (d.approver) }
                        @if d.approve { " approved" } @else { " rejected" }
                        " at " (d.at)
                        @if let Some(r) = &d.reason { ": " q { (r) } }
                    }
                }
            }
        }
    }
}

fn decide_forms(f: &Frame<'_>, v: &RequestView) -> Markup {
    html! {
        @if v.eligible {
            section.decide {
                form id="approve" method="post" action={ (f.base) "/requests/" (v.id) "/approve" } {
                    input type="hidden" name="csrf" value=(f.csrf);
                    button.approve type="submit" {
                        "Approve and execute"
                        @if let Some(a) = &v.amount { " " (a) }
                    }
                }
                form id="reject" method="post" action={ (f.base) "/requests/" (v.id) "/reject" } {
                    input type="hidden" name="csrf" value=(f.csrf);
                    label for="reason" { "Reason for rejecting (required)" }
                    textarea id="reason" name="reason" required maxlength="500" rows="2" {}
                    button.reject type="submit" { "Reject" }
                }
            }
        } @else if let Some(why) = &v.ineligible_reason {
            p.readonly id="ineligible" { "You cannot decide this request: " (why) "." }
        }
    }
}

/// Everything about one request, with the decision forms if the reviewer may decide.
pub(crate) fn detail(f: &Frame<'_>, v: &RequestView) -> Markup {
    let body = html! {
        section.summary {
            p.tool { code { (v.tool) } " · risk " strong.risk { (v.risk) } " · state " strong id="state" { (v.state_label()) } }
            p.description { (v.tool_description) }
            @if let Some(a) = &v.amount { p.big id="amount" { (a) } }
            dl {
                dt { "Requested by" } dd id="requester" { (v.requester) " (" (v.tenant) ")" }
                dt { "Why it waits" } dd id="cause" {
                    (v.cause_text) " (" code { (v.cause) } ")"
                    @if let Some(m) = &v.cause_message { br; span id="cause-message" { (m) } }
                }
                dt { "Proposed" } dd { (v.created_at) }
                dt { "Expires" } dd { (v.expires_at) " — " (countdown(v)) }
                dt { "Dual control" } dd id="progress" { (progress(v)) }
                dt { "Eligible roles" } dd { (v.eligible_roles.join(", ")) }
                dt { "Binding digest" } dd { code.digest id="binding" { (v.binding_digest) } }
                dt { "Request digest" } dd { code.digest { (v.request_digest) } }
            }
        }
        h2 { "What will execute" }
        (arguments(v))
        (decisions(v))
        (decide_forms(f, v))
    };
    layout(f, "Approval request", body)
}

/// The answer to a decision: the outcome status and message, then the request as it is now.
pub(crate) fn outcome(f: &Frame<'_>, out: &ToolOutcome, v: Option<&RequestView>) -> Markup {
    let body = html! {
        section.outcome data-status=(out.status.as_str()) {
            p { "Outcome: " strong id="outcome-status" { (out.status.as_str()) } }
            @if let Some(m) = &out.message { p id="outcome-message" { (m) } }
            @if let Some(r) = &out.reason { p { "Reason code: " code { (r) } } }
        }
        @if let Some(v) = v {
            p { "The request is now " strong id="state" { (v.state_label()) } ". " (progress(v)) }
            (decisions(v))
            p { a href={ (f.base) "/requests/" (v.id) } { "Back to the request" } }
        }
        p { a href={ (f.base) "/requests" } { "Back to pending approvals" } }
    };
    layout(f, "Decision recorded", body)
}

/// Decided and expired requests, newest first.
pub(crate) fn history(f: &Frame<'_>, views: &[RequestView]) -> Markup {
    let body = html! {
        @if views.is_empty() {
            p.empty { "No decisions yet." }
        } @else {
            table.requests {
                thead { tr {
                    th { "Tool" } th { "Amount" } th { "Requester" } th { "Proposed" }
                    th { "State" } th { "Decisions" } th { "" }
                } }
                tbody {
                    @for v in views {
                        tr.request data-id=(v.id) {
                            td { code { (v.tool) } }
                            td.amount { (v.amount.as_deref().unwrap_or("—")) }
                            td { (v.requester) }
                            td { (v.created_at) }
                            td { strong { (v.state_label()) } }
                            td { @for d in &v.decisions {
                                (d.approver) @if d.approve { " ✓ " } @else { " ✗ " }
                            } }
                            td { a href={ (f.base) "/requests/" (v.id) } { "Details" } }
                        }
                    }
                }
            }
        }
    };
    layout(f, "Decided requests", body)
}

/// A refusal page (sign-in needed, forbidden, not found, CSRF), with the host's sign-out form
/// when there is one (a signed-in user without access can switch accounts).
pub(crate) fn refusal(
    base: &str,
    title: &str,
    heading: &str,
    message: &str,
    logout: Option<&str>,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (heading) " · " (title) }
                link rel="stylesheet" href={ (base) "/assets/console.css" };
            }
            body {
                main {
                    h1 { (heading) }
                    p id="refusal" { (message) }
                    p { a href={ (base) "/requests" } { "Pending approvals" } }
                    @if let Some(url) = logout {
                        form method="post" action=(url) { button.reject type="submit" { "Sign out" } }
                    }
                }
            }
        }
    }
}
