//! Field-aware argument sanitization: each string is judged on a canonical form, per field kind,
//! and the [`SanitizeReport`] records what was done.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::spec::ToolSpec;

/// The sanitizer's decision for a whole arguments object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing to do.
    #[default]
    Clean,
    /// Something was removed; the cleaned value goes on.
    Stripped,
    /// The call is refused.
    Blocked,
}

/// One change the sanitizer made to a field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Modification {
    /// JSON pointer of the field.
    pub field: String,
    /// What was removed (a class code such as `zero_width`).
    pub what: String,
    /// How many characters were removed.
    pub count: usize,
    /// Character positions (in the original value) of the removed characters.
    pub positions: Vec<usize>,
}

/// What the sanitizer did to an arguments object. Never carries a blocked payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SanitizeReport {
    /// Overall verdict.
    pub verdict: Verdict,
    /// Reason code of a block (e.g. `bidi_control`, `prompt_injection`).
    pub reason: Option<String>,
    /// JSON pointer of the field that blocked.
    pub field: Option<String>,
    /// Changes made, for `stripped`.
    pub modifications: Vec<Modification>,
}

/// Per-field sanitization rules of a dispatcher.
#[derive(Debug, Clone, Default)]
pub struct Sanitizer {}

impl Sanitizer {
    /// Sanitizes `args` (an object valid under `spec.input_schema`) in place.
    pub fn sanitize(&self, _spec: &ToolSpec, _args: &mut Value) -> SanitizeReport {
        SanitizeReport::default()
    }
}
