use toolguard::{tool, ToolError};

/// Sends a message.
#[tool(name = "send-message", read_only)]
fn send_message() -> Result<(), ToolError> {
    Ok(())
}

/// Starts with a digit.
#[tool(name = "2fa_check", read_only)]
fn two_factor() -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
