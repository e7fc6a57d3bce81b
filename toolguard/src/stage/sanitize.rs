//! Sanitization: per-field canonicalization, then block or strip (see [`crate::sanitize`]).

use super::Stop;
use crate::outcome::Status;
use crate::sanitize::{SanitizeReport, Verdict};

/// Stops a call whose report blocks; the message names the field and reason, never the payload.
pub fn check(report: &SanitizeReport) -> Result<(), Stop> {
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
