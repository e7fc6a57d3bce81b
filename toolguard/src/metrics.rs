//! Metrics through the `metrics` facade, labelled by tool. Names follow seed practice:
//! `tool_call_count`, `tool_validation_failures`, `tool_injection_blocks`, `tool_idempotency_hits`,
//! `tool_approval_pending` (gauge, by tool and tenant), `tool_execution_duration` (histogram,
//! seconds), `tool_approval_latency` (histogram, seconds from request to decision).

use crate::outcome::Status;

/// Label used for tool names that are not registered (model-chosen names never become labels).
pub const UNKNOWN_TOOL_LABEL: &str = "unknown";

/// Records one finished call (`tool_execution_duration` measures the handler alone, see
/// [`execution_duration`]).
pub fn call_finished(tool: &str, status: Status) {
    let status_label = status.as_str();
    metrics::counter!("tool_call_count", "tool" => tool.to_owned(), "status" => status_label)
        .increment(1);
    match status {
        Status::Malformed | Status::InvalidArguments => {
            metrics::counter!("tool_validation_failures", "tool" => tool.to_owned()).increment(1)
        }
        Status::Blocked => {
            metrics::counter!("tool_injection_blocks", "tool" => tool.to_owned()).increment(1)
        }
        _ => {}
    }
}

/// Records how long `tool`'s handler ran (only calls that reached execution).
pub fn execution_duration(tool: &str, seconds: f64) {
    metrics::histogram!("tool_execution_duration", "tool" => tool.to_owned()).record(seconds);
}

/// Records a stored outcome returned again.
pub fn idempotency_hit(tool: &str) {
    metrics::counter!("tool_idempotency_hits", "tool" => tool.to_owned()).increment(1);
}

/// Moves the pending-approval gauge of `tool` in `tenant` by `delta`.
pub fn approval_pending(tool: &str, tenant: &str, delta: f64) {
    metrics::gauge!("tool_approval_pending", "tool" => tool.to_owned(), "tenant" => tenant.to_owned())
        .increment(delta);
}

/// Records the time from a request's opening to its decision (`tool_approval_latency`, seconds),
/// labelled by tool, tenant and `decision` (`approved`, `rejected`).
pub fn approval_latency(tool: &str, tenant: &str, decision: &'static str, seconds: f64) {
    metrics::histogram!(
        "tool_approval_latency",
        "tool" => tool.to_owned(),
        "tenant" => tenant.to_owned(),
        "decision" => decision
    )
    .record(seconds);
}
