use toolguard::{tool, toolset, ToolContext, ToolError};

/// Application state.
pub struct Bank;

/// Context after an argument.
#[tool(read_only)]
fn late_ctx(
    /// Page.
    page: u32,
    ctx: &ToolContext<Bank>,
) -> Result<u32, ToolError> {
    let _ = ctx;
    Ok(page)
}

/// A generic tool.
#[tool(read_only)]
fn generic<T: Clone, const N: usize>(
    /// Page.
    page: u32,
) -> Result<u32, ToolError> {
    Ok(page)
}

/// An `impl Trait` argument.
#[tool(read_only)]
fn anonymous(
    /// Label.
    label: impl ToString,
) -> Result<String, ToolError> {
    Ok(label.to_string())
}

#[toolset]
impl Bank {
    /// Consumes the state.
    #[tool(read_only)]
    fn by_value(self) -> Result<(), ToolError> {
        Ok(())
    }

    /// Mutates the state.
    #[tool(idempotent)]
    fn mutate(&mut self) -> Result<(), ToolError> {
        Ok(())
    }

    /// Context after an argument.
    #[tool(read_only)]
    fn late(
        &self,
        /// Page.
        page: u32,
        ctx: &ToolContext<Bank>,
    ) -> Result<u32, ToolError> {
        let _ = ctx;
        Ok(page)
    }
}

fn main() {}
