//! Recheck: right before execution, the tool's resource authorization and business preflight run
//! again (state may have changed since the call was admitted or approved), and the call's amount
//! is admitted to the session ledger against its limits. An approved action commits the
//! reservation its request held since it opened (counted against every `Deny` limit all along);
//! a reservation already committed, released or expired means the action does not run. A ledger
//! that does not answer is `unavailable`: nothing executes unseen.

use super::Stop;
use super::core::Core;
use super::trace::Trace;
use crate::erased::DecodedArgs;
use crate::outcome::Status;
use crate::risk::PolicyDecision;
use crate::spec::ToolSpec;
use crate::store::{HoldCommit, OperationState};
use crate::tool::ToolContext;

/// The ledger entry a call's amount is recorded under: its operation id, else (an approved
/// read-only action) its approval id, else its call id. An approved action's reservation is held
/// under the same entry ([`super::approval::hold_entry`]).
pub(crate) fn ledger_entry(t: &Trace, call_id: &str) -> String {
    t.operation_id
        .as_deref()
        .filter(|id| !id.is_empty())
        .or(t.approval_id.as_deref())
        .unwrap_or(call_id)
        .to_owned()
}

/// Whether [`run`] has anything to check for a call: a state-changing tool (its hooks again), an
/// approved action or an amount to book, a record to write. A read-only call that holds no
/// limit runs none of it, and no future is made for it.
pub(crate) fn needed(
    spec: &ToolSpec,
    decision: &PolicyDecision,
    via: super::Via<'_>,
    t: &Trace,
) -> bool {
    !spec.read_only
        || matches!(via, super::Via::Approval)
        || !decision.limits.is_empty()
        || t.admitted
}

/// The recheck stage. Returns the ledger scopes the amount was admitted to (to retract when
/// the handler certainly did nothing). An admitted call's operation record becomes `executing`.
pub(crate) async fn run<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    decoded: &dyn DecodedArgs<S>,
    ctx: &ToolContext<S>,
    decision: &PolicyDecision,
    via: super::Via<'_>,
    t: &Trace,
) -> Result<Vec<String>, Stop> {
    let (approved, held) = match via {
        super::Via::Call(held) => (false, held),
        super::Via::Approval => (true, None),
    };
    if !spec.read_only {
        decoded
            .authorize(ctx)
            .await
            .map_err(Stop::from_tool_error)?;
        decoded
            .preflight(ctx)
            .await
            .map_err(Stop::from_tool_error)?;
    }
    let scopes = decision.scopes();
    if approved {
        commit(core, &ledger_entry(t, ctx.call_id()), decision.amount).await?;
    } else if let Some(amount) = decision.amount.filter(|_| !scopes.is_empty()) {
        let entry = ledger_entry(t, ctx.call_id());
        let ledger = &*core.stores.ledger;
        // A late write can only over-count, never let an amount through unseen.
        let admitted = ledger
            .admit(&entry, amount, &decision.limits, core.now())
            .await;
        match admitted {
            Ok(true) => {}
            Ok(false) => {
                return Err(Stop::new(
                    Status::PolicyDenied,
                    "session_limit",
                    "the cumulative limit for this session is reached",
                ));
            }
            Err(_) => return Err(crate::risk::unavailable()),
        }
    }
    if t.admitted {
        super::record::put(
            core,
            ctx.principal(),
            spec,
            ctx.call_id(),
            t,
            OperationState::Executing,
            None,
        )
        .await?;
        // Recorded within its lease, or not run at all.
        super::interrupted::fenced(core, spec, held, t.lease_from).await?;
    }
    Ok(scopes)
}

/// Books an approved action's `amount` (0 without an amount) by committing the reservation held
/// under `entry`. Of racing commits (two approvers, two replicas, an earlier record put back in
/// the approval store) exactly one succeeds; the others do not execute.
async fn commit<S: Send + Sync + 'static>(
    core: &Core<S>,
    entry: &str,
    amount: Option<u64>,
) -> Result<(), Stop> {
    let amount = amount.unwrap_or(0);
    match core.stores.ledger.commit(entry, amount, core.now()).await {
        Ok(HoldCommit::Committed) => Ok(()),
        Ok(HoldCommit::Missing) => Err(Stop::new(
            Status::PreconditionFailed,
            super::approval::RESERVATION_MISSING,
            "this approval's reservation was already used, released or expired; nothing was done",
        )),
        Ok(HoldCommit::Exceeds { .. }) => Err(Stop::new(
            Status::ApprovalRejected,
            "binding_mismatch",
            "the amount differs from the approved one; nothing was done",
        )),
        Err(_) => Err(crate::risk::unavailable()),
    }
}
