//! The parse stage's module (`parse.rs`) and the stop it returns. `parse.rs` names its stop
//! `super::Stop`, with the reason code as a `String`; this module gives it that type and
//! converts it into the pipeline's [`Stop`](crate::outcome::Stop) (a [`Reason`]) at the one
//! place the pipeline calls it, [`arguments`]. Once `parse.rs` builds the pipeline's `Stop`
//! itself, this module goes.

use serde_json::Value;

use crate::call::RawArguments;
use crate::outcome::{Reason, Status};

// Its `pub` items are reached through `call` (`RawArguments::parse`, `call::strict_json`).
#[allow(unreachable_pub, unused_imports)]
#[path = "parse.rs"]
pub(crate) mod parse;

/// The parse stage's stop, with the reason code as text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stop {
    pub(crate) status: Status,
    pub(crate) reason: Option<String>,
    pub(crate) message: Option<String>,
}

impl Stop {
    pub(crate) fn new(status: Status, reason: &str, message: impl Into<String>) -> Self {
        Stop {
            status,
            reason: Some(reason.to_owned()),
            message: Some(message.into()),
        }
    }
}

impl From<Stop> for crate::outcome::Stop {
    fn from(stop: Stop) -> Self {
        crate::outcome::Stop {
            status: stop.status,
            reason: stop.reason.map(Reason::from),
            message: stop.message,
            errors: Vec::new(),
        }
    }
}

/// The parse stage: the arguments as one JSON object (see `parse.rs`).
pub(crate) fn arguments(raw: &RawArguments) -> Result<Value, crate::outcome::Stop> {
    parse::arguments(raw).map_err(Into::into)
}

pub(crate) use parse::strict_value;
