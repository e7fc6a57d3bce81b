//! Schema validation: the arguments against the tool's input schema (jsonschema, compiled once).

use jsonschema::Validator;
use serde_json::Value;

use super::Stop;
use crate::outcome::{ArgumentError, Status};

/// Most errors reported for one call.
pub(crate) const MAX_REPORTED_ERRORS: usize = 32;

/// Compiles a tool schema.
pub(crate) fn compile(schema: &Value) -> Result<Validator, jsonschema::ValidationError<'static>> {
    jsonschema::validator_for(schema)
}

/// Validates `args`, reporting each error with its JSON pointer. Valid arguments are judged by
/// the validator's boolean check, which builds no error; the errors are collected only when
/// there are some.
pub(crate) fn arguments(validator: &Validator, args: &Value) -> Result<(), Stop> {
    if validator.is_valid(args) {
        return Ok(());
    }
    let errors: Vec<ArgumentError> = validator
        .iter_errors(args)
        .take(MAX_REPORTED_ERRORS)
        .map(|e| ArgumentError {
            pointer: e.instance_path().to_string(),
            message: e.masked().to_string(),
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    let mut stop = Stop::new(
        Status::InvalidArguments,
        "schema",
        format!("{} argument error(s)", errors.len()),
    );
    stop.errors = errors;
    Err(stop)
}

/// Validates the sanitized `args` again: stripping characters can leave a value the schema
/// refuses (an all zero-width string under `min_len = 1` becomes `""`). Reason
/// `schema_after_sanitize`.
pub(crate) fn sanitized(validator: &Validator, args: &Value) -> Result<(), Stop> {
    arguments(validator, args).map_err(|mut stop| {
        stop.reason = Some(crate::outcome::Reason::SchemaAfterSanitize);
        stop
    })
}

/// Reports a typed-decoding failure (the schema accepted what the Rust type does not).
pub(crate) fn decode_error(err: serde_json::Error) -> Stop {
    let mut stop = Stop::new(
        Status::InvalidArguments,
        "decode",
        "arguments do not fit the tool",
    );
    stop.errors = vec![ArgumentError {
        pointer: String::new(),
        message: err.to_string(),
    }];
    stop
}
