//! Registry: the model's tool name looked up among the registered tools (`unknown_tool`).

use super::Stop;
use super::core::{Core, Registered};
use crate::outcome::Status;

/// The registered tool called `name`. The model's tool name is not echoed back.
pub(crate) fn lookup<'c, S: Send + Sync + 'static>(
    core: &'c Core<S>,
    name: &str,
) -> Result<&'c Registered<S>, Stop> {
    found(core.tools.get(name))
}

/// The tool a lookup already made found, or `unknown_tool`.
pub(crate) fn found<S: Send + Sync + 'static>(
    tool: Option<&Registered<S>>,
) -> Result<&Registered<S>, Stop> {
    tool.ok_or_else(|| {
        Stop::new(
            Status::UnknownTool,
            "unknown_tool",
            "no tool of that name is available",
        )
    })
}
