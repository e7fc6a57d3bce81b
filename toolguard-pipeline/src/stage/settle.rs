//! Settle: a call's outcome is stored under its idempotency key (so retries replay it) or the
//! key is freed (a handler error: a retry executes again). The direct path settles the key it
//! holds; approval decisions and reconciliation settle the record of their operation, together
//! with its operation record.

use super::core::Core;
use super::idempotency::{Held, settle_held, settle_operation};
use super::trace::{Answer, Trace};
use crate::spec::ToolSpec;
use crate::store::{ScopedKey, StoredOutcome};

/// Settles the key a dispatched call holds.
pub(crate) async fn held<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    held: Option<Held>,
    answer: &Answer,
    t: &Trace,
) {
    let Some(held) = held else { return };
    let stored = answer.stored(t.operation_id.as_ref());
    let ttl = core.idempotency_ttl(spec);
    settle_held(&core.stores.idempotency, held, &stored, ttl, core.now()).await;
}

/// Settles operation `operation_id` after its call ended: the outcome under its key (if it has
/// one) and in its operation record.
pub(crate) async fn operation<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &str,
    key: Option<&ScopedKey>,
    operation_id: &str,
    stored: &StoredOutcome,
) {
    if let (Some(key), Some(spec)) = (key, core.spec(tool)) {
        let ttl = core.idempotency_ttl(spec);
        let store = &*core.stores.idempotency;
        settle_operation(store, key, operation_id, stored, ttl, core.now()).await;
    }
    super::record::settle(core, operation_id, stored).await;
}
