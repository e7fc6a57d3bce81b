//! The invariants checked after each round, from the stores and the side-effect log.

use std::collections::{BTreeMap, HashMap};

use toolguard::audit::{AuditEntry, AuditEvent, AuditQuery, Checkpoint, FileCheckpoints};
use toolguard::store::{ApprovalState, ApprovalStore, OperationStore};
use toolguard::{OperationState, Status};

use super::clients::KeyResult;
use super::protocol::{Effect, SESSION_LIMIT, SUBJECT_LIMIT};

/// The invariants, by name (the report counts violations of each).
pub(crate) const INVARIANTS: [&str; 7] = [
    "exactly_once",
    "answer_matches_effect",
    "session_limit",
    "subject_limit",
    "one_terminal_audit_entry",
    "audit_chain_verifies",
    "approval_settled",
];

/// A broken invariant, with what shows it.
#[derive(Debug, Clone)]
pub(crate) struct Violation {
    /// One of [`INVARIANTS`], or `terminal_answer` (a key without a terminal answer in time).
    pub(crate) invariant: &'static str,
    /// What was found.
    pub(crate) detail: String,
}

fn violation(invariant: &'static str, detail: String) -> Violation {
    Violation { invariant, detail }
}

/// What a round is checked against.
pub(crate) struct Evidence<'a> {
    /// The round's keys, as the clients saw them.
    pub(crate) keys: &'a [KeyResult],
    /// The side-effect log's lines of the round's keys.
    pub(crate) effects: Vec<&'a Effect>,
    /// The approval requests.
    pub(crate) approvals: &'a dyn ApprovalStore,
    /// The operation records.
    pub(crate) operations: &'a dyn OperationStore,
    /// The audit trail.
    pub(crate) audit: &'a dyn AuditQuery,
    /// The checkpoint files of every process.
    pub(crate) checkpoints: Vec<std::path::PathBuf>,
    /// Audit entries from this time on are read.
    pub(crate) since_ms: u64,
}

/// Every invariant of one round.
pub(crate) async fn round(e: &Evidence<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    once_and_answers(e, &mut out);
    if out.iter().any(|v| v.invariant == "answer_matches_effect") {
        // What the trail says of those keys, for whoever reads the report.
        if let Ok(entries) = e.audit.by_time(e.since_ms, u64::MAX >> 1, 1 << 40).await {
            for v in out
                .iter_mut()
                .filter(|v| v.invariant == "answer_matches_effect")
            {
                let key = v.detail.split(' ').nth(1).unwrap_or_default().to_owned();
                v.detail.push_str(&format!(
                    "; the key's entries {:?}",
                    entries_of(&entries, &key)
                ));
            }
        }
    }
    limits(e, &mut out);
    out.extend(audit_terminal(e).await);
    out.extend(chain(e).await);
    out.extend(approvals(e).await);
    for k in e.keys.iter().filter(|k| k.terminal.is_none()) {
        out.push(violation(
            "terminal_answer",
            format!(
                "key {} got no terminal answer ({} attempts, {} outcome_unknown, approval {:?}, \
                 last answer {:?}, last status query {:?})",
                k.key, k.attempts, k.unknowns, k.approval, k.last, k.last_query
            ),
        ));
    }
    out
}

/// No key executed twice; an `ok` answer has its one effect, a refusal none.
fn once_and_answers(e: &Evidence<'_>, out: &mut Vec<Violation>) {
    let mut by_key: HashMap<&str, Vec<&Effect>> = HashMap::new();
    for effect in &e.effects {
        by_key
            .entry(effect.reference.as_str())
            .or_default()
            .push(effect);
    }
    for (key, list) in &by_key {
        if list.len() > 1 {
            let ops: Vec<_> = list.iter().map(|x| (&x.operation_id, x.node)).collect();
            out.push(violation(
                "exactly_once",
                format!("key {key} executed {} times: {ops:?}", list.len()),
            ));
        }
    }
    for k in e.keys {
        let n = by_key.get(k.key.as_str()).map_or(0, Vec::len);
        let bad = match k.terminal.as_deref() {
            Some("ok") => n != 1,
            Some("policy_denied" | "approval_rejected" | "approval_expired") => n != 0,
            _ => false,
        };
        if bad {
            let ops: Vec<_> = by_key
                .get(k.key.as_str())
                .into_iter()
                .flatten()
                .map(|x| (&x.operation_id, x.node))
                .collect();
            out.push(violation(
                "answer_matches_effect",
                format!(
                    "key {} answered {:?} with {n} effects {ops:?} ({} attempts, {} \
                     outcome_unknown, {} reconciled, operations answered {:?}, approval {:?}, \
                     last status query {:?}, answers {:?})",
                    k.key,
                    k.terminal,
                    k.attempts,
                    k.unknowns,
                    k.reconciled,
                    k.operations,
                    k.approval,
                    k.last_query,
                    k.history
                ),
            ));
        }
    }
}

/// The executed amounts of every session and subject stay within their limits.
fn limits(e: &Evidence<'_>, out: &mut Vec<Violation>) {
    let mut sessions: BTreeMap<&str, u64> = BTreeMap::new();
    let mut subjects: BTreeMap<&str, u64> = BTreeMap::new();
    for effect in &e.effects {
        *sessions.entry(effect.session.as_str()).or_default() += effect.amount;
        *subjects.entry(effect.subject.as_str()).or_default() += effect.amount;
    }
    for (s, total) in sessions.iter().filter(|(_, t)| **t > SESSION_LIMIT) {
        let list: Vec<_> = e
            .effects
            .iter()
            .filter(|x| x.session == *s)
            .map(|x| (&x.operation_id, &x.reference, x.amount, x.node))
            .collect();
        out.push(violation(
            "session_limit",
            format!("session {s} executed {total} > {SESSION_LIMIT}: {list:?}"),
        ));
    }
    for (s, total) in subjects.iter().filter(|(_, t)| **t > SUBJECT_LIMIT) {
        let list: Vec<_> = e
            .effects
            .iter()
            .filter(|x| x.subject == *s)
            .map(|x| (&x.operation_id, &x.reference, x.amount, x.node))
            .collect();
        out.push(violation(
            "subject_limit",
            format!("subject {s} executed {total} > {SUBJECT_LIMIT}: {list:?}"),
        ));
    }
}

/// The entries of idempotency key `key`, one line each: sequence number, event, status, reason,
/// operation, whether replayed.
fn entries_of(entries: &[AuditEntry], key: &str) -> Vec<String> {
    entries
        .iter()
        .filter(|x| x.record.idempotency_key.as_deref() == Some(key))
        .map(|x| {
            format!(
                "{} {:?} {:?} {:?} {}{}",
                x.seq,
                x.record.event,
                x.record.status,
                x.record.reason,
                x.record.operation_id.as_deref().unwrap_or("-"),
                if x.record.replayed { " replayed" } else { "" }
            )
        })
        .collect()
}

/// Whether `entry` is the terminal entry of an execution (not a replay, not a status query).
fn executed_entry(entry: &AuditEntry) -> bool {
    let r = &entry.record;
    matches!(r.event, AuditEvent::Call | AuditEvent::Decision)
        && !r.replayed
        && r.status == Some(Status::Ok)
}

/// Every executed operation has exactly one terminal `ok` entry, or none and was reconciled to
/// `ok` by a status query (its process died after the effect); no `ok` entry lacks its effect.
async fn audit_terminal(e: &Evidence<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    let entries = match e.audit.by_time(e.since_ms, u64::MAX >> 1, 1 << 40).await {
        Ok(entries) => entries,
        Err(err) => {
            return vec![violation(
                "one_terminal_audit_entry",
                format!("audit trail unreadable: {err}"),
            )];
        }
    };
    let mut by_op: HashMap<&str, Vec<&AuditEntry>> = HashMap::new();
    for entry in &entries {
        if let Some(op) = &entry.record.operation_id {
            by_op.entry(op.as_str()).or_default().push(entry);
        }
    }
    let effect_ops: HashMap<&str, &Effect> = e
        .effects
        .iter()
        .map(|x| (x.operation_id.as_str(), *x))
        .collect();
    for (op, effect) in &effect_ops {
        let list = by_op.get(op).map(Vec::as_slice).unwrap_or_default();
        let terminal = list.iter().filter(|x| executed_entry(x)).count();
        let status_query = list
            .iter()
            .any(|x| x.record.event == AuditEvent::OperationStatus);
        let reconciled_ok = match e.operations.get(op).await {
            Ok(Some(record)) => record.state == OperationState::Ok,
            _ => false,
        };
        let fine = terminal == 1 || (terminal == 0 && status_query && reconciled_ok);
        if !fine {
            let answers = e
                .keys
                .iter()
                .find(|k| k.key == effect.reference)
                .map(|k| k.history.clone())
                .unwrap_or_default();
            let key_entries = entries_of(&entries, &effect.reference);
            out.push(violation(
                "one_terminal_audit_entry",
                format!(
                    "operation {op} (key {}) executed with {terminal} terminal ok entries, \
                     status query {status_query}, operation record ok {reconciled_ok}; \
                     answers {answers:?}; the key's entries {key_entries:?}",
                    effect.reference
                ),
            ));
        }
    }
    let round_keys: std::collections::HashSet<&str> =
        e.keys.iter().map(|k| k.key.as_str()).collect();
    for entry in entries.iter().filter(|x| executed_entry(x)) {
        let op = entry.record.operation_id.as_deref().unwrap_or_default();
        let ours = entry
            .record
            .idempotency_key
            .as_deref()
            .is_some_and(|k| round_keys.contains(k));
        if ours && !effect_ops.contains_key(op) {
            out.push(violation(
                "one_terminal_audit_entry",
                format!(
                    "audit entry {} says ok for operation {op}, which has no effect",
                    entry.seq
                ),
            ));
        }
    }
    out
}

/// The whole chain verifies under the host keys and against every process's checkpoints.
async fn chain(e: &Evidence<'_>) -> Vec<Violation> {
    let mut checkpoints: Vec<Checkpoint> = Vec::new();
    for path in &e.checkpoints {
        match FileCheckpoints::read(path) {
            Ok(list) => checkpoints.extend(list),
            Err(err) => {
                return vec![violation("audit_chain_verifies", err.to_string())];
            }
        }
    }
    match e.audit.verify_against(&checkpoints).await {
        Ok(report) if report.sealed => Vec::new(),
        Ok(_) => vec![violation(
            "audit_chain_verifies",
            "the trail is not sealed under the host keys".into(),
        )],
        Err(err) => vec![violation("audit_chain_verifies", err.to_string())],
    }
}

/// Every approval request a call waited for is settled (executed, rejected or expired), and
/// an executed one ran once.
async fn approvals(e: &Evidence<'_>) -> Vec<Violation> {
    let mut out = Vec::new();
    for k in e.keys {
        let Some(id) = &k.approval else { continue };
        let request = match e.approvals.get(id).await {
            Ok(Some(r)) => r,
            other => {
                out.push(violation(
                    "approval_settled",
                    format!("approval {id} of key {} unreadable: {other:?}", k.key),
                ));
                continue;
            }
        };
        let ran = e
            .effects
            .iter()
            .filter(|x| x.operation_id == request.operation_id)
            .count();
        let settled = matches!(
            request.state,
            ApprovalState::Executed | ApprovalState::Rejected | ApprovalState::Expired
        );
        if !settled || ran > 1 {
            out.push(violation(
                "approval_settled",
                format!(
                    "approval {id} of key {} is {:?} after the round, executed {ran} times \
                     (client saw {:?})",
                    k.key, request.state, k.terminal
                ),
            ));
        }
    }
    out
}
