//! Execution under the tool's deadline. A handler that overruns is cancelled; whether that is
//! `failed` or `outcome_unknown` depends on whether a side effect may have begun.

use std::time::Duration;

use serde_json::Value;

use super::Stop;
use crate::erased::DecodedArgs;
use crate::outcome::Status;
use crate::tool::ToolContext;

/// Runs the handler on its own task (so a panic is contained) under `deadline`.
pub(crate) async fn run<S: Send + Sync + 'static>(
    args: Box<dyn DecodedArgs<S>>,
    ctx: ToolContext<S>,
    deadline: Duration,
    read_only: bool,
) -> Result<Value, Stop> {
    let task = tokio::spawn(async move { args.execute(&ctx).await });
    let abort = task.abort_handle();
    match tokio::time::timeout(deadline, task).await {
        Ok(Ok(Ok(value))) => Ok(value),
        Ok(Ok(Err(err))) => Err(Stop::from_tool_error(err)),
        Ok(Err(_join)) => Err(interrupted(
            read_only,
            "handler_panicked",
            "the tool crashed",
        )),
        Err(_elapsed) => {
            abort.abort();
            Err(interrupted(
                read_only,
                "deadline_exceeded",
                "the tool did not finish in time",
            ))
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
