//! Which rules a finished call feeds, and under which scopes: the mapping from an
//! [`Observation`] to the [`Check`]s the detector runs against its store.

use super::alert::AlertScope;
use super::config::{Detection, Rule, Threshold};
use super::observation::Observation;
use crate::audit::AuditEvent;
use crate::outcome::Status;
use crate::spec::ToolSpec;

/// Block reasons that are Unicode classes (the sanitizer's hidden-character codes).
pub const UNICODE_REASONS: [&str; 8] = [
    "mixed_script",
    "url_mixed_script",
    "bidi_control",
    "control_char",
    "invisible_char",
    "tag_character",
    "private_use",
    "unassigned",
];

/// One rule to count a call under, in one scope.
pub(crate) struct Check {
    pub(crate) rule: Rule,
    pub(crate) scope: AlertScope,
    /// The store scope: rule, scope and tool (and the digest, for duplicates), length-prefixed.
    pub(crate) store_scope: String,
    /// A distinct key (the subject, for blocks across subjects).
    pub(crate) key: Option<String>,
    pub(crate) threshold: Threshold,
}

/// Parts joined unambiguously (each length-prefixed).
pub(crate) fn scope_key(parts: &[&str]) -> String {
    let mut out = String::new();
    for part in parts {
        out.push_str(&part.len().to_string());
        out.push(':');
        out.push_str(part);
        out.push('|');
    }
    out
}

impl Observation {
    fn session_scope(&self) -> AlertScope {
        AlertScope::Session {
            tenant: self.tenant.to_string(),
            session: self.session.to_string(),
        }
    }

    fn subject_scope(&self) -> AlertScope {
        AlertScope::Subject {
            tenant: self.tenant.to_string(),
            subject: self.subject.to_string(),
        }
    }

    fn tenant_scope(&self) -> AlertScope {
        AlertScope::Tenant {
            tenant: self.tenant.to_string(),
        }
    }
}

/// A check of `rule` in `scope` for the observed call's tool; `extra` narrows the store scope.
fn check(
    config: &Detection,
    rule: Rule,
    obs: &Observation,
    scope: AlertScope,
    extra: &str,
) -> Check {
    checked_in(config, rule, obs, scope, &obs.tool, extra)
}

/// A check of `rule` in `scope` counted under `counted` (the tool's name, or what several tools
/// share); `extra` narrows the store scope.
fn checked_in(
    config: &Detection,
    rule: Rule,
    obs: &Observation,
    scope: AlertScope,
    counted: &str,
    extra: &str,
) -> Check {
    let id = match &scope {
        AlertScope::Session { session, .. } => session.as_str(),
        AlertScope::Subject { subject, .. } => subject.as_str(),
        AlertScope::Tenant { .. } => "",
    };
    let parts = [rule.as_str(), scope.kind(), &obs.tenant, id, counted, extra];
    Check {
        rule,
        store_scope: scope_key(&parts),
        scope,
        key: None,
        threshold: config.threshold_of(rule, &obs.tool),
    }
}

/// The checks a finished call of `spec` feeds (approval backlog and decision latency, which
/// read the approval store, are run by the detector itself).
pub(crate) fn checks(config: &Detection, spec: &ToolSpec, obs: &Observation) -> Vec<Check> {
    let mut out = Vec::new();
    let on = |rule| config.enabled(rule);
    let call = obs.event == AuditEvent::Call && !obs.replayed;
    let blocked = call && obs.status == Some(Status::Blocked);
    if blocked && on(Rule::InjectionBlocks) {
        out.push(check(
            config,
            Rule::InjectionBlocks,
            obs,
            obs.session_scope(),
            "",
        ));
        out.push(check(
            config,
            Rule::InjectionBlocks,
            obs,
            obs.subject_scope(),
            "",
        ));
    }
    if blocked && on(Rule::BlocksAcrossSubjects) {
        let mut c = check(
            config,
            Rule::BlocksAcrossSubjects,
            obs,
            obs.tenant_scope(),
            "",
        );
        c.key = Some(obs.subject.to_string());
        out.push(c);
    }
    let unicode_block =
        blocked && UNICODE_REASONS.contains(&obs.reason.as_deref().unwrap_or_default());
    if call && (unicode_block || obs.unicode_stripped) && on(Rule::UnusualUnicode) {
        out.push(check(
            config,
            Rule::UnusualUnicode,
            obs,
            obs.session_scope(),
            "",
        ));
    }
    let executed = matches!(obs.event, AuditEvent::Call | AuditEvent::Decision)
        && !obs.replayed
        && obs.status == Some(Status::Ok);
    if executed
        && !spec.read_only
        && on(Rule::DuplicateExecution)
        && let Some(digest) = &obs.digest
    {
        let scope = obs.session_scope();
        out.push(check(config, Rule::DuplicateExecution, obs, scope, digest));
    }
    if call && obs.status == Some(Status::IdempotencyConflict) && on(Rule::IdempotencyConflicts) {
        let scope = obs.subject_scope();
        out.push(check(config, Rule::IdempotencyConflicts, obs, scope, ""));
    }
    let in_band = |amount: u64| {
        config
            .band(spec)
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&amount))
    };
    if call && on(Rule::Structuring) && obs.amount.is_some_and(in_band) {
        // Counted across the tools that move the same kind of amount: splitting a transfer
        // over `transfer_funds` and `pay_invoice` is structuring all the same.
        let counted = format!("amount:{}", obs.amount_kind);
        for scope in [obs.session_scope(), obs.subject_scope()] {
            out.push(checked_in(
                config,
                Rule::Structuring,
                obs,
                scope,
                &counted,
                "",
            ));
        }
    }
    out
}

/// The check of a slow decision (tenant scope of the tool).
pub(crate) fn slow_decision(config: &Detection, obs: &Observation) -> Check {
    check(config, Rule::DecisionLatency, obs, obs.tenant_scope(), "")
}

/// The scope of a tool's approval backlog (tenant scope of the tool).
pub(crate) fn backlog(config: &Detection, obs: &Observation) -> Check {
    check(config, Rule::ApprovalBacklog, obs, obs.tenant_scope(), "")
}
