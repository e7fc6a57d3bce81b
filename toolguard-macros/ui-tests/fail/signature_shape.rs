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
#[tool(read_only, output = "trusted")]
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

/// Context by value.
#[tool(read_only)]
fn owned_ctx(ctx: ToolContext<Bank>) -> Result<(), ToolError> {
    let _ = ctx;
    Ok(())
}

/// Context by `&mut`.
#[tool(read_only)]
fn mut_ctx(ctx: &mut ToolContext<Bank>) -> Result<(), ToolError> {
    let _ = ctx;
    Ok(())
}

/// A generic state.
pub struct Wallet<T>(T);

#[toolset]
impl<T: Send + Sync + 'static> Wallet<T> {
    /// Reads the wallet.
    #[tool(read_only)]
    fn peek(&self) -> Result<(), ToolError> {
        Ok(())
    }
}

fn main() {}
