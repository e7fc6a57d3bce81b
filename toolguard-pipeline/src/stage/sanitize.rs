//! Sanitization: per-field canonicalization, then block or strip (see [`crate::sanitize`]), and
//! validation of the result again (stripping can leave a value the schema refuses).

use serde_json::Value;

use super::Stop;
use super::core::{Core, Registered};
use super::trace::Trace;
use crate::outcome::Status;
use crate::sanitize::{ResolvedUrl, SanitizeReport, Verdict};

/// Stops a call whose report blocks; the message names the field and reason, never the payload.
pub(crate) fn check(report: &SanitizeReport) -> Result<(), Stop> {
    if report.verdict != Verdict::Blocked {
        return Ok(());
    }
    let reason = report
        .reason
        .clone()
        .unwrap_or_else(|| "blocked".to_owned());
    let field = report.field.clone().unwrap_or_default();
    Err(Stop::new(
        Status::Blocked,
        reason.clone(),
        format!("argument {field} refused ({reason})"),
    ))
}

/// Sanitized arguments, ready to decode.
pub(crate) struct Sanitized {
    /// The normalized arguments.
    pub(crate) args: Value,
    /// The checked URLs, with the addresses to pin.
    pub(crate) resolved: Vec<ResolvedUrl>,
    /// Nothing had to be changed.
    pub(crate) clean: bool,
}

/// The sanitize stage: sanitizes `args` (recording the modifications in `t`), stops a blocked
/// call, and validates the result again (reason `schema_after_sanitize`).
pub(crate) fn run<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &Registered<S>,
    mut args: Value,
    t: &mut Trace,
) -> Result<Sanitized, Stop> {
    // The arguments passed the schema check (every caller validates them first), so the
    // fields settled at registration are skipped.
    let report = core
        .sanitizer
        .sanitize(&super::core::RegisteredRules(tool), &mut args);
    t.modifications = report.modifications.clone();
    check(&report)?;
    // What the sanitizer stripped may leave a value the schema refuses (a string of zero-width
    // characters under `min_len = 1` becomes ""). A clean report without checked URLs (the one
    // value a clean verdict replaces, by its normalized serialization) changed nothing: the
    // arguments were validated as they are.
    let unchanged = report.verdict == Verdict::Clean && report.resolved.is_empty();
    if !unchanged {
        super::validate::sanitized(&tool.input, &args)?;
    }
    Ok(Sanitized {
        args,
        clean: report.verdict == Verdict::Clean,
        resolved: report.resolved,
    })
}
