//! The detector at work: every finished call ([`Observation`]) is counted under the rules it
//! feeds; a count reaching its threshold raises one [`Alert`] (claimed in the store, so replicas
//! raise it once), which goes to the audit trail, the metric `tool_alerts{rule}`, the sinks and,
//! if configured, a session response.
//!
//! Alerting fails open: a detection store that fails or exceeds the store deadline is logged
//! and counted (`tool_detection_failures{op}`) and the call's outcome is untouched.

use std::panic::{AssertUnwindSafe, catch_unwind};

use super::core::Core;
use crate::audit::{AuditEvent, AuditRecord};
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::detect::alert::{Alert, AlertScope, Evidence};
use crate::detect::config::Rule;
pub(crate) use crate::detect::observation::{Detector, Observation, failed};
use crate::detect::respond::{Response, ResponseKind};
use crate::detect::rules::{self, Check};
use crate::detect::store::SessionResponse;
use crate::detect::store::{Mark, Marks, millis, session_key, subject_key};
use crate::outcome::Stop;
use crate::outcome::{Reason, Status};
use crate::risk::PolicyDecision;
use crate::spec::ToolSpec;

/// Appends a detection's `record` to the audit trail (a failing or panicking sink is logged);
/// its sequence.
pub(crate) fn append<'a, S: Send + Sync + 'static>(
    core: &'a Core<S>,
    record: AuditRecord,
) -> impl Future<Output = Option<u64>> + Send + 'a {
    super::finish::append(core, record, false, "detection ")
}

/// Feeds the finished call `obs` to the detector, if one is configured. Never fails the call;
/// a panic inside is contained.
pub(crate) async fn observe<S: Send + Sync + 'static>(core: &Core<S>, obs: Observation) {
    let Some(detector) = core.detector.as_ref() else {
        return;
    };
    let Some(spec) = core.spec(&obs.tool) else {
        return;
    };
    let run = run(core, detector, spec, &obs);
    if crate::stage::execute::contained(run).await.is_err() {
        tracing::error!("the detector panicked; the call was not counted");
        failed("panic");
    }
}

async fn run<S: Send + Sync + 'static>(
    core: &Core<S>,
    d: &Detector,
    spec: &ToolSpec,
    obs: &Observation,
) {
    for check in rules::checks(&d.config, spec, obs) {
        count(core, d, &check, obs).await;
    }
    if obs.event == AuditEvent::Call
        && !obs.replayed
        && obs.status == Some(Status::PendingApproval)
        && d.config.enabled(Rule::ApprovalBacklog)
    {
        backlog(core, d, obs).await;
    }
    if obs.event == AuditEvent::Decision && d.config.enabled(Rule::DecisionLatency) {
        latency(core, d, obs).await;
    }
}

/// Rule 5a: the pending requests of the call's tool in its tenant.
async fn backlog<S: Send + Sync + 'static>(core: &Core<S>, d: &Detector, obs: &Observation) {
    let check = rules::backlog(&d.config, obs);
    let pending = match core.stores.approvals.pending(&obs.tenant).await {
        Ok(p) => p,
        Err(err) => {
            tracing::warn!(error = %err, "approval store failed; the backlog was not measured");
            return failed("backlog");
        }
    };
    let now_ms = unix_millis(obs.at);
    let mut marks: Vec<Mark> = pending
        .iter()
        .filter(|r| r.tool == obs.tool && now_ms < r.expires_at_ms)
        .map(|r| Mark {
            call_id: r.call_id.clone(),
            audit_seq: (r.call_id == obs.call_id)
                .then_some(obs.audit_seq)
                .flatten(),
            at_ms: r.created_at_ms,
            key: None,
        })
        .collect();
    marks.sort_by_key(|m| m.at_ms);
    if marks.len() >= usize::try_from(check.threshold.count).unwrap_or(usize::MAX) {
        fire(core, d, &check, Marks(marks), obs).await;
    }
}

/// Rule 5b: the decision's time since the request opened, against the SLA.
async fn latency<S: Send + Sync + 'static>(core: &Core<S>, d: &Detector, obs: &Observation) {
    let Some(id) = obs.approval_id.as_deref() else {
        return;
    };
    let request = match core.stores.approvals.get(id).await {
        Ok(Some(r)) => r,
        Ok(None) => return,
        Err(err) => {
            tracing::warn!(error = %err, "approval store failed; the decision was not timed");
            return failed("latency");
        }
    };
    let waited = unix_millis(obs.at).saturating_sub(request.created_at_ms);
    if waited <= millis(d.config.decision_sla) {
        return;
    }
    count(core, d, &rules::slow_decision(&d.config, obs), obs).await;
}

/// Counts `obs` under `check` and raises the alert when the count reaches the threshold. A
/// store failure is logged and counted; the call is not.
async fn count<S: Send + Sync + 'static>(
    core: &Core<S>,
    d: &Detector,
    check: &Check,
    obs: &Observation,
) {
    let keep = usize::try_from(check.threshold.count).unwrap_or(usize::MAX);
    let mark = obs.mark(check.key.clone());
    let window = check.threshold.window;
    let counted = d
        .config
        .store
        .observe(&check.store_scope, mark, window, keep, obs.at);
    match d.timed(counted).await {
        Ok(marks) if marks.0.len() >= keep => fire(core, d, check, marks, obs).await,
        Ok(_) => {}
        Err(err) => {
            tracing::warn!(error = %err, rule = %check.rule, "detection store failed; the call was not counted");
            failed("observe");
        }
    }
}

/// Raises the alert of `check` once (claimed in the store for its window): audit entry, metric,
/// response, sinks.
async fn fire<S: Send + Sync + 'static>(
    core: &Core<S>,
    d: &Detector,
    check: &Check,
    marks: Marks,
    obs: &Observation,
) {
    let claim_key = format!("alert|{}", check.store_scope);
    match d
        .timed(
            d.config
                .store
                .claim(&claim_key, check.threshold.window, obs.at),
        )
        .await
    {
        Ok(true) => {}
        Ok(false) => return,
        Err(err) => {
            // Fail open toward alerting: a duplicate alert beats a missed one.
            tracing::warn!(error = %err, "detection store could not claim the alert; raising it");
            failed("claim");
        }
    }
    let mut alert = alert_of(check, marks, obs);
    let response = respond(core, d, check, obs).await;
    alert.response = response.map(|k| k.as_str().to_owned());
    alert.audit_seq = append(core, alert_record(&alert, obs)).await;
    metrics::counter!("tool_alerts", "rule" => check.rule.as_str()).increment(1);
    for sink in &d.config.sinks {
        if catch_unwind(AssertUnwindSafe(|| sink.alert(&alert))).is_err() {
            tracing::error!(rule = %check.rule, "an alert sink panicked");
        }
    }
}

fn alert_of(check: &Check, marks: Marks, obs: &Observation) -> Alert {
    let t = check.threshold;
    let summary = format!(
        "{} {} within {}s for tool `{}` ({} scope)",
        marks.0.len(),
        check.rule.as_str().replace('_', " "),
        t.window.as_secs(),
        obs.tool,
        check.scope.kind(),
    );
    Alert {
        rule: check.rule.as_str().to_owned(),
        severity: check.rule.severity(),
        scope: check.scope.clone(),
        tool: obs.tool.to_string(),
        summary,
        evidence: Evidence {
            call_ids: marks.0.iter().map(|m| m.call_id.clone()).collect(),
            audit_seqs: marks.0.iter().filter_map(|m| m.audit_seq).collect(),
        },
        at_ms: unix_millis(obs.at),
        audit_seq: None,
        response: None,
    }
}

/// The audit entry of an alert: event `alert`, reason the rule, the alert as arguments.
fn alert_record(alert: &Alert, obs: &Observation) -> AuditRecord {
    AuditRecord {
        event: AuditEvent::Alert,
        time_ms: alert.at_ms,
        tenant: obs.tenant.clone(),
        subject: obs.subject.clone(),
        session: obs.session.clone(),
        tool: obs.tool.clone(),
        call_id: obs.call_id.clone(),
        reason: Some(alert.rule.as_str().into()),
        arguments: serde_json::to_value(alert).ok().map(std::sync::Arc::new),
        ..AuditRecord::default()
    }
}

/// Puts the rule's response in force at the scope of its alert and writes its audit entry; what
/// was put in force. A session alert's response holds the observed call's session; a subject
/// alert's holds every session of the subject, those opened later included. Tenant-wide
/// alerts put none in force.
async fn respond<S: Send + Sync + 'static>(
    core: &Core<S>,
    d: &Detector,
    check: &Check,
    obs: &Observation,
) -> Option<ResponseKind> {
    let response = *d.config.responses.get(&check.rule)?;
    let subject = match &check.scope {
        AlertScope::Tenant { .. } => return None,
        AlertScope::Subject { subject, .. } => Some(subject.clone()),
        AlertScope::Session { .. } => None,
    };
    let since_ms = unix_millis(obs.at);
    let (kind, until_ms) = match response {
        Response::Hold => (ResponseKind::Hold, None),
        Response::Block(p) => (
            ResponseKind::Block,
            Some(since_ms.saturating_add(millis(p))),
        ),
    };
    let put = SessionResponse {
        tenant: obs.tenant.to_string(),
        session: obs.session.to_string(),
        subject,
        kind,
        rule: check.rule.as_str().to_owned(),
        call_id: obs.call_id.to_string(),
        since_ms,
        until_ms,
    };
    if let Err(err) = d.timed(d.config.store.respond(&put)).await {
        tracing::error!(error = %err, key = %put.key(), "the response could not be put in force");
        failed("respond");
        return None;
    }
    let record = AuditRecord {
        event: AuditEvent::Response,
        time_ms: since_ms,
        tenant: obs.tenant.clone(),
        subject: obs.subject.clone(),
        session: obs.session.clone(),
        tool: obs.tool.clone(),
        call_id: obs.call_id.clone(),
        reason: Some(if kind == ResponseKind::Hold {
            Reason::SessionHeld
        } else {
            Reason::SessionBlocked
        }),
        arguments: serde_json::to_value(&put).ok().map(std::sync::Arc::new),
        ..AuditRecord::default()
    };
    append(core, record).await;
    Some(kind)
}

/// Whether [`gate`] reads a response for calls of `spec`: a detector that responds watches the
/// dispatcher, and the tool changes state.
pub(crate) fn gates<S: Send + Sync + 'static>(core: &Core<S>, spec: &ToolSpec) -> bool {
    core.detector
        .as_ref()
        .is_some_and(|d| !spec.read_only && d.responds())
}

/// Puts a held or blocked session's state-changing call on its way to approval or refuses it:
/// the response in force for the session and the one for its subject, the stricter of the two.
/// Fails closed: a response that cannot be read means approval required.
pub(crate) async fn gate<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    principal: &Principal,
    decision: &mut PolicyDecision,
) -> Result<(), Stop> {
    let Some(detector) = core.detector.as_ref().filter(|_| gates(core, spec)) else {
        return Ok(());
    };
    let now = core.now();
    let session = session_key(&principal.tenant, &principal.session_id);
    let subject = subject_key(&principal.tenant, &principal.subject);
    let (of_session, of_subject) = tokio::join!(
        detector.response(&session, now),
        detector.response(&subject, now)
    );
    let mut cause = None;
    for found in [of_session, of_subject] {
        match found {
            Ok(None) => {}
            Ok(Some(r)) if r.kind == ResponseKind::Block => {
                return Err(Stop::new(
                    Status::PolicyDenied,
                    "session_blocked",
                    "this session is blocked after a security alert; a reviewer can lift it",
                ));
            }
            Ok(Some(_)) => {
                cause.get_or_insert("session_held");
            }
            Err(err) => {
                tracing::error!(error = %err, "the detection store could not say whether the session is held; approval required");
                super::detect::failed("response");
                cause = Some("session_hold_unknown");
            }
        }
    }
    if let Some(cause) = cause {
        decision
            .approval_cause
            .get_or_insert_with(|| cause.to_owned());
    }
    Ok(())
}
