//! Re-normalization of a stored action before it executes (approval decisions): its arguments
//! are validated and sanitized again by the same stages as a call's, and its request digest is
//! recomputed. Any difference means the action is not the one that was approved.

use super::core::{Core, Registered};
use super::sanitize::Sanitized;
use super::trace::Trace;
use crate::store::ApprovalRequest;

/// The stored action of `request`, normalized again; `None` when it no longer validates, the
/// sanitizer would change or block it, or its digest differs from the bound one.
pub(crate) fn again<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &Registered<S>,
    request: &ApprovalRequest,
) -> Option<Sanitized> {
    let args = request.arguments.clone();
    super::validate::arguments(&tool.input, &args).ok()?;
    // Modifications were recorded when the call was made; a trace of its own keeps them apart.
    let sanitized = super::sanitize::run(core, tool, args, &mut Trace::default()).ok()?;
    let keys = core.keys.as_deref();
    let same = super::intent::digest_matches(
        keys,
        &request.request_digest,
        tool.spec(),
        &sanitized.args,
        &request.requester,
    );
    (sanitized.clean && same).then_some(sanitized)
}
