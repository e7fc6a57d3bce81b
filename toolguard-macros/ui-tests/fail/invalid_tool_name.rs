use toolguard::{tool, ToolError};

/// Sends a message.
#[tool(name = "send.message", read_only)]
fn send_message() -> Result<(), ToolError> {
    Ok(())
}

/// Starts with a digit.
#[tool(name = "2fa_check", read_only)]
fn two_factor() -> Result<(), ToolError> {
    Ok(())
}

/// A name one character too long for providers.
#[tool(
    name = "a_tool_name_that_goes_on_and_on_well_past_sixty_four_characters_x",
    read_only
)]
fn long_name() -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
