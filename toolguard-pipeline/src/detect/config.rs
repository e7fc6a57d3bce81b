//! What the detector watches for: the rules, their thresholds and windows (defaults below, each
//! overridable for every tool or for one tool), the structuring band, the responses, the sinks
//! and the store. [`Detection::check`] runs when the dispatcher is built.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::alert::AlertSink;
use super::respond::Response;
pub use super::rule::{Rule, Threshold};
use super::store::{DetectionStore, MemoryDetectionStore};
use crate::spec::ToolSpec;

/// Largest threshold count: a scope keeps at most this many marks, so state stays bounded.
pub const MAX_COUNT: u32 = 10_000;

/// Default share of `approval_over` that forms the structuring band, in percent: amounts from
/// 75% of `approval_over` up to `approval_over` itself.
pub const DEFAULT_BAND_PERCENT: u64 = 25;

/// Default SLA of an approval decision (longer counts as slow).
pub const DEFAULT_DECISION_SLA: Duration = Duration::from_secs(5 * 60);

/// Why a detection configuration was refused (returned by `build()` as
/// [`BuildError::Detection`](crate::BuildError::Detection)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Detection option `{option}`: {message}")]
#[non_exhaustive]
pub struct DetectionConfigError {
    /// The option (`threshold`, `tool_threshold`, `structuring_band`, `decision_sla`, ...).
    pub option: &'static str,
    /// What is wrong, naming the rule or tool.
    pub message: String,
}

/// The detection configuration of a dispatcher; see [`crate::detect`].
#[must_use]
#[derive(Clone)]
pub struct Detection {
    pub(crate) thresholds: HashMap<Rule, Threshold>,
    pub(crate) tool_thresholds: HashMap<(Rule, String), Threshold>,
    pub(crate) disabled: Vec<Rule>,
    pub(crate) bands: HashMap<String, (u64, u64)>,
    pub(crate) band_percent: u64,
    pub(crate) decision_sla: Duration,
    pub(crate) responses: HashMap<Rule, Response>,
    pub(crate) sinks: Vec<Arc<dyn AlertSink>>,
    pub(crate) store: Arc<dyn DetectionStore>,
}

impl std::fmt::Debug for Detection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detection")
            .field("thresholds", &self.thresholds)
            .field("disabled", &self.disabled)
            .field("responses", &self.responses)
            .finish_non_exhaustive()
    }
}

impl Default for Detection {
    fn default() -> Self {
        Detection {
            thresholds: HashMap::new(),
            tool_thresholds: HashMap::new(),
            disabled: Vec::new(),
            bands: HashMap::new(),
            band_percent: DEFAULT_BAND_PERCENT,
            decision_sla: DEFAULT_DECISION_SLA,
            responses: HashMap::new(),
            sinks: Vec::new(),
            store: Arc::new(MemoryDetectionStore::new()),
        }
    }
}

impl Detection {
    /// Every rule at its default threshold, state in memory, no sink but the metric and the
    /// audit trail, no response.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keeps the detector's state in `store` (share one between replicas so they agree).
    pub fn store(mut self, store: Arc<dyn DetectionStore>) -> Self {
        self.store = store;
        self
    }

    /// Delivers every alert to `sink` as well (sinks are called in the order added).
    pub fn sink(mut self, sink: impl AlertSink) -> Self {
        self.sinks.push(Arc::new(sink));
        self
    }

    /// Sets `rule`'s threshold for every tool.
    pub fn threshold(mut self, rule: Rule, threshold: Threshold) -> Self {
        self.thresholds.insert(rule, threshold);
        self
    }

    /// Sets `rule`'s threshold for `tool` alone.
    pub fn tool_threshold(mut self, rule: Rule, tool: &str, threshold: Threshold) -> Self {
        self.tool_thresholds
            .insert((rule, tool.to_owned()), threshold);
        self
    }

    /// Turns `rule` off.
    pub fn disable(mut self, rule: Rule) -> Self {
        self.disabled.push(rule);
        self
    }

    /// The structuring band of `tool`: amounts from `low` to `high` (minor units, inclusive);
    /// `high` may not exceed the tool's `approval_over`. Tools without one use
    /// [`band_percent`](Self::band_percent) of their `approval_over`.
    pub fn structuring_band(mut self, tool: &str, low: u64, high: u64) -> Self {
        self.bands.insert(tool.to_owned(), (low, high));
        self
    }

    /// The default structuring band, in percent of `approval_over` below it (1 to 99; default
    /// [`DEFAULT_BAND_PERCENT`]).
    pub fn band_percent(mut self, percent: u64) -> Self {
        self.band_percent = percent;
        self
    }

    /// Decisions slower than `sla` count for [`Rule::DecisionLatency`] (default
    /// [`DEFAULT_DECISION_SLA`]).
    pub fn decision_sla(mut self, sla: Duration) -> Self {
        self.decision_sla = sla;
        self
    }

    /// What a firing of `rule` does to the session besides alerting (default: nothing).
    pub fn respond(mut self, rule: Rule, response: Response) -> Self {
        self.responses.insert(rule, response);
        self
    }

    /// Whether `rule` is on.
    pub(crate) fn enabled(&self, rule: Rule) -> bool {
        !self.disabled.contains(&rule)
    }

    /// `rule`'s threshold for `tool`.
    pub(crate) fn threshold_of(&self, rule: Rule, tool: &str) -> Threshold {
        self.tool_thresholds
            .get(&(rule, tool.to_owned()))
            .or_else(|| self.thresholds.get(&rule))
            .copied()
            .unwrap_or_else(|| rule.default_threshold())
    }

    /// The structuring band of `spec`, if it has one.
    pub(crate) fn band(&self, spec: &ToolSpec) -> Option<(u64, u64)> {
        if let Some(band) = self.bands.get(&spec.name) {
            return Some(*band);
        }
        let over = spec.approval_over?;
        let below = u128::from(over) * u128::from(self.band_percent) / 100;
        Some((over - u64::try_from(below).unwrap_or(over), over))
    }

    /// The tool names the configuration mentions (checked against the registry at build).
    pub(crate) fn configured_tools(&self) -> impl Iterator<Item = &str> {
        let thresholds = self.tool_thresholds.keys().map(|(_, t)| t.as_str());
        thresholds.chain(self.bands.keys().map(String::as_str))
    }

    /// Checks every value against the registered tools (`spec` of a name): no zero count or
    /// window, no response with a zero period, bands under `approval_over` on tools with an
    /// amount.
    pub(crate) fn check<'a>(
        &self,
        spec: impl Fn(&str) -> Option<&'a ToolSpec>,
    ) -> Result<(), DetectionConfigError> {
        let fail = |option, message: String| Err(DetectionConfigError { option, message });
        let global = self
            .thresholds
            .iter()
            .map(|(r, t)| ("threshold", *r, None, t));
        let per_tool = self
            .tool_thresholds
            .iter()
            .map(|((r, tool), t)| ("tool_threshold", *r, Some(tool.as_str()), t));
        for (option, rule, tool, t) in global.chain(per_tool) {
            let on = tool.map(|t| format!(" for tool `{t}`")).unwrap_or_default();
            if t.count == 0 {
                return fail(option, format!("rule `{rule}`{on} has a count of 0"));
            }
            if t.count > MAX_COUNT {
                let message = format!("rule `{rule}`{on} has a count above {MAX_COUNT}");
                return fail(option, message);
            }
            if t.window.is_zero() {
                return fail(option, format!("rule `{rule}`{on} has a zero window"));
            }
        }
        if !(1..=99).contains(&self.band_percent) {
            let message = format!("{}% is outside 1 to 99", self.band_percent);
            return fail("band_percent", message);
        }
        if self.decision_sla.is_zero() {
            return fail("decision_sla", "the SLA is zero".to_owned());
        }
        for (rule, response) in &self.responses {
            if let Response::Block(period) = response
                && period.is_zero()
            {
                return fail("respond", format!("rule `{rule}` blocks for a zero period"));
            }
        }
        let mut bands: Vec<_> = self.bands.iter().collect();
        bands.sort();
        for (tool, (low, high)) in bands {
            let Some(spec) = spec(tool) else { continue };
            check_band(spec, *low, *high).map_err(|message| DetectionConfigError {
                option: "structuring_band",
                message,
            })?;
        }
        Ok(())
    }
}

/// A band must hold amounts of a tool with an amount field, low to high, under `approval_over`.
fn check_band(spec: &ToolSpec, low: u64, high: u64) -> Result<(), String> {
    let tool = &spec.name;
    if spec.amount_field().is_none() {
        return Err(format!("tool `{tool}` has no amount field"));
    }
    if low > high || high == 0 {
        return Err(format!("tool `{tool}`: the band {low}..={high} is empty"));
    }
    match spec.approval_over {
        Some(over) if high > over => Err(format!(
            "tool `{tool}`: the band {low}..={high} reaches above approval_over ({over})"
        )),
        _ => Ok(()),
    }
}
