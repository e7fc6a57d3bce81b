//! Recheck: right before execution, the tool's resource authorization and business preflight run
//! again (state may have changed since the call was admitted or approved), and the call's amount
//! is admitted to the session ledger against its limits (an approved amount is recorded without
//! a limit check). A ledger that does not answer is `unavailable`: nothing executes unseen.

use super::Stop;
use super::core::Core;
use super::policy::PolicyDecision;
use super::trace::Trace;
use crate::erased::DecodedArgs;
use crate::outcome::Status;
use crate::spec::ToolSpec;
use crate::store::OperationState;
use crate::tool::ToolContext;

/// The ledger entry a call's amount is recorded under: its operation id, else its call id.
pub(crate) fn ledger_entry(t: &Trace, call_id: &str) -> String {
    t.operation_id.clone().unwrap_or_else(|| call_id.to_owned())
}

/// The recheck stage. Returns the ledger scopes the amount was admitted to (to retract when
/// the handler certainly did nothing). An admitted call's operation record becomes `executing`.
pub(crate) async fn run<S: Send + Sync + 'static>(
    core: &Core<S>,
    spec: &ToolSpec,
    decoded: &dyn DecodedArgs<S>,
    ctx: &ToolContext<S>,
    decision: &PolicyDecision,
    approved: bool,
    t: &Trace,
) -> Result<Vec<String>, Stop> {
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
    if let Some(amount) = decision.amount.filter(|_| !scopes.is_empty()) {
        let entry = ledger_entry(t, ctx.call_id());
        let ledger = &*core.stores.ledger;
        let now = core.now();
        // A late write can only over-count, never let an amount through unseen.
        let admitted = if approved {
            ledger
                .record(&entry, amount, &scopes, now)
                .await
                .map(|_| true)
        } else {
            ledger.admit(&entry, amount, &decision.limits, now).await
        };
        match admitted {
            Ok(true) => {}
            Ok(false) => {
                return Err(Stop::new(
                    Status::PolicyDenied,
                    "session_limit",
                    "the cumulative limit for this session is reached",
                ));
            }
            Err(_) => return Err(super::policy::unavailable()),
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
    }
    Ok(scopes)
}
