//! The results of forwarded `tools/call` requests as the upstream sent them.
//!
//! The gateway passes a tool's result on unchanged and runs the pipeline's later stages on it
//! as JSON. Read through the SDK, the answer line would be parsed into its typed form (trying
//! each kind of result in turn) only to be turned back into JSON. Instead, the forwarder asks
//! for the result of its request once the request is sent ([`CallResults::want`]); the upstream
//! transport, reading an answer with that id, keeps its `result` member here and hands the SDK
//! the answer with an empty result in its place, which completes the request as before
//! (routing, timeout, cancellation). The forwarder then takes the kept result.
//!
//! An answer that comes before the forwarder asked for it, an error answer, and every answer
//! of a transport that does not keep results (Streamable HTTP) reach the forwarder through the
//! SDK as before: the kept result is a shortcut, never the only path.

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::RequestId;
use serde_json::Value;

/// Request id → the result kept for it (`None` until its answer arrives).
#[derive(Default)]
pub(crate) struct CallResults {
    wanted: Mutex<HashMap<RequestId, Option<Value>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl CallResults {
    /// Keeps the result of request `id` when its answer arrives, until the returned guard drops.
    pub(crate) fn want(&self, id: RequestId) -> Wanted<'_> {
        lock(&self.wanted).insert(id.clone(), None);
        Wanted { results: self, id }
    }

    /// Keeps `result`, the `result` member of the answer to request `id`, when that request
    /// wants it (and has no result yet); otherwise hands it back.
    pub(crate) fn keep(&self, id: &RequestId, result: Value) -> Result<(), Value> {
        match lock(&self.wanted).get_mut(id) {
            Some(slot @ None) => {
                *slot = Some(result);
                Ok(())
            }
            _ => Err(result),
        }
    }
}

/// A request's claim on its result; dropping it forgets the request.
pub(crate) struct Wanted<'a> {
    results: &'a CallResults,
    id: RequestId,
}

impl Wanted<'_> {
    /// The kept result, if the answer arrived after the claim.
    pub(crate) fn take(&self) -> Option<Value> {
        lock(&self.results.wanted)
            .get_mut(&self.id)
            .and_then(Option::take)
    }
}

impl Drop for Wanted<'_> {
    fn drop(&mut self) {
        lock(&self.results.wanted).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;
    use serde_json::json;

    #[test]
    fn a_result_is_kept_only_for_a_request_that_wants_it() {
        let results = CallResults::default();
        let id = NumberOrString::Number(7);
        // Nobody asked: handed back.
        assert_eq!(results.keep(&id, json!({"a": 1})), Err(json!({"a": 1})));
        let wanted = results.want(id.clone());
        assert_eq!(wanted.take(), None);
        assert_eq!(results.keep(&id, json!({"content": []})), Ok(()));
        // A second answer with the same id does not replace the first.
        assert_eq!(results.keep(&id, json!({"b": 2})), Err(json!({"b": 2})));
        assert_eq!(wanted.take(), Some(json!({"content": []})));
        assert_eq!(wanted.take(), None);
        // Another id is not this request's.
        assert!(results.keep(&NumberOrString::Number(8), json!({})).is_err());
        drop(wanted);
        // Forgotten once the claim is dropped: nothing left behind.
        assert!(lock(&results.wanted).is_empty());
        assert!(results.keep(&id, json!({})).is_err());
    }
}
