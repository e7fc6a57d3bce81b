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

/// Where the metrics of this crate say they come from (as the `metrics` macros would record).
static METADATA: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

/// The metric keys of one tool label, made once when the dispatcher is built, so that recording
/// a call allocates nothing (and costs a thread-local read when no recorder is installed). The
/// keys are those the functions above build per call.
pub(crate) struct ToolKeys {
    /// `tool_call_count`, one key per status of [`Status::ALL`].
    calls: Vec<metrics::Key>,
    validation_failures: metrics::Key,
    injection_blocks: metrics::Key,
    execution_duration: metrics::Key,
    idempotency_hits: metrics::Key,
}

impl ToolKeys {
    /// The keys of tool label `tool`.
    pub(crate) fn new(tool: &str) -> Self {
        let tool: metrics::SharedString = tool.to_owned().into();
        let label = || metrics::Label::new("tool", tool.clone());
        let key = |name: &'static str| metrics::Key::from_parts(name, vec![label()]);
        ToolKeys {
            calls: Status::ALL
                .iter()
                .map(|s| {
                    let status = metrics::Label::from_static_parts("status", s.as_str());
                    metrics::Key::from_parts("tool_call_count", vec![label(), status])
                })
                .collect(),
            validation_failures: key("tool_validation_failures"),
            injection_blocks: key("tool_injection_blocks"),
            execution_duration: key("tool_execution_duration"),
            idempotency_hits: key("tool_idempotency_hits"),
        }
    }

    /// [`call_finished`] for this tool.
    pub(crate) fn call_finished(&self, status: Status) {
        let index = Status::ALL.iter().position(|s| *s == status);
        metrics::with_recorder(|r| {
            if let Some(key) = index.and_then(|i| self.calls.get(i)) {
                r.register_counter(key, &METADATA).increment(1);
            }
            match status {
                Status::Malformed | Status::InvalidArguments => r
                    .register_counter(&self.validation_failures, &METADATA)
                    .increment(1),
                Status::Blocked => r
                    .register_counter(&self.injection_blocks, &METADATA)
                    .increment(1),
                _ => {}
            }
        });
    }

    /// [`execution_duration`] for this tool.
    pub(crate) fn execution_duration(&self, seconds: f64) {
        metrics::with_recorder(|r| {
            r.register_histogram(&self.execution_duration, &METADATA)
                .record(seconds)
        });
    }

    /// [`idempotency_hit`] for this tool.
    pub(crate) fn idempotency_hit(&self) {
        metrics::with_recorder(|r| {
            r.register_counter(&self.idempotency_hits, &METADATA)
                .increment(1)
        });
    }
}
