//! Registry: the model's tool name looked up among the registered tools (`unknown_tool`).

use super::Stop;
use super::core::{Core, Registered};
use crate::outcome::Status;

/// The registered tool called `name`. The model's tool name is not echoed back.
pub(crate) fn lookup<'c, S: Send + Sync + 'static>(
    core: &'c Core<S>,
    name: &str,
) -> Result<&'c Registered<S>, Stop> {
    core.tools.get(name).ok_or_else(|| {
        Stop::new(
            Status::UnknownTool,
            "unknown_tool",
            "no tool of that name is available",
        )
    })
}
