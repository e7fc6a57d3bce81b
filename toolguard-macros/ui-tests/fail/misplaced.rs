use toolguard::{tool, toolset, ToolError};

/// A struct is not a tool.
#[tool]
pub struct NotAFunction;

/// Application state.
pub struct Bank;

/// A trait of the bank.
pub trait Audit {
    /// Runs an audit.
    fn audit(&self) -> Result<(), ToolError>;
}

#[toolset]
impl Audit for Bank {
    /// Runs an audit.
    fn audit(&self) -> Result<(), ToolError> {
        Ok(())
    }
}

/// A method outside a toolset.
#[tool(read_only)]
fn with_self(&self) -> Result<(), ToolError> {
    Ok(())
}

fn main() {}
