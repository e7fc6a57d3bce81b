//! Result envelope: the handler's output is checked against the output schema and marked as
//! untrusted data.

use jsonschema::Validator;
use serde_json::Value;

use super::Stop;
use crate::outcome::{Status, UntrustedOutput};

/// Validates `output` and wraps it.
pub(crate) fn wrap(
    validator: &Validator,
    output: Value,
    read_only: bool,
) -> Result<UntrustedOutput, Stop> {
    if validator.is_valid(&output) {
        return Ok(UntrustedOutput::new(output));
    }
    let status = if read_only {
        Status::Failed
    } else {
        Status::OutcomeUnknown
    };
    Err(Stop::new(
        status,
        "invalid_output",
        "the tool returned a result outside its contract",
    ))
}
