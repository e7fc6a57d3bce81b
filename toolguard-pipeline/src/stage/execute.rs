//! Execution under the tool's deadline. A handler that overruns is cancelled; whether that is
//! `failed` or `outcome_unknown` depends on whether a side effect may have begun.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Stop;
use super::core::{Core, Registered};
use super::trace::Trace;
use crate::erased::DecodedArgs;
use crate::metrics::ToolKeys;
use crate::outcome::Status;
use crate::tool::ToolContext;

/// The execute stage: runs the handler under the tool's deadline. When it certainly did nothing
/// (it failed before a side effect could begin), the amount admitted to the ledger is retracted.
pub(crate) async fn stage<S: Send + Sync + 'static>(
    core: &Core<S>,
    tool: &Registered<S>,
    decoded: Box<dyn DecodedArgs<S> + '_>,
    ctx: ToolContext<S>,
    scopes: &[String],
    t: &Trace,
) -> Result<Value, Stop> {
    // The ledger entry is named only when there is an amount to retract.
    let entry = (!scopes.is_empty()).then(|| super::recheck::ledger_entry(t, ctx.call_id()));
    let spec = tool.spec();
    let executed = run(&tool.metrics, decoded, ctx, spec.timeout, spec.read_only).await;
    if let Err(stop) = &executed
        && stop.status != Status::OutcomeUnknown
        && let Some(entry) = &entry
        && let Err(err) = core.stores.ledger.retract(entry, scopes).await
    {
        tracing::error!(error = %err, "the ledger entry of a call that did nothing was not retracted");
    }
    executed
}

/// Runs the handler under `deadline`, containing a panic. An overrunning handler is dropped
/// (cancelled at its next await point). The handler's own run time is recorded as
/// `tool_execution_duration` of the tool whose keys are `metrics`.
pub(crate) async fn run<S: Send + Sync + 'static>(
    metrics: &ToolKeys,
    args: Box<dyn DecodedArgs<S> + '_>,
    ctx: ToolContext<S>,
    deadline: Duration,
    read_only: bool,
) -> Result<Value, Stop> {
    let handler = contained(args.execute(&ctx));
    let started = Instant::now();
    let finished = crate::timeout::limit_since(started, deadline, handler).await;
    metrics.execution_duration(started.elapsed().as_secs_f64());
    match finished {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(err))) => Err(Stop::from_tool_error(err)),
        Ok(Err(Panicked)) => Err(interrupted(
            read_only,
            "handler_panicked",
            "the tool crashed",
        )),
        Err(_elapsed) => Err(interrupted(
            read_only,
            "deadline_exceeded",
            "the tool did not finish in time",
        )),
    }
}

/// A panic was caught while a future was polled.
pub(crate) struct Panicked;

/// Runs `fut` to completion, turning a panic while it is polled into `Err(Panicked)`. The future
/// is polled in place (no box): it lives inside the caller's own future.
pub(crate) fn contained<F: Future>(fut: F) -> CatchUnwind<F> {
    CatchUnwind { fut }
}

pin_project_lite::pin_project! {
    /// Polls a future, turning a panic inside it into `Err(Panicked)`.
    pub(crate) struct CatchUnwind<F> {
        #[pin]
        fut: F,
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Panicked>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let fut = self.project().fut;
        match std::panic::catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(_) => Poll::Ready(Err(Panicked)),
        }
    }
}

/// A handler that did not finish: harmless for read-only tools, uncertain for the others.
fn interrupted(read_only: bool, reason: &str, message: &str) -> Stop {
    if read_only {
        Stop::new(Status::Failed, reason, message)
    } else {
        Stop::new(
            Status::OutcomeUnknown,
            reason,
            format!("{message}; its effect is unknown, query the operation status before retrying"),
        )
    }
}
