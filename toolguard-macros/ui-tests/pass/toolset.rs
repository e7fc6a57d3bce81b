use toolguard::{toolset, ToolContext, ToolError, ToolHandle};

/// Application state.
pub struct Bank {
    fee: u64,
}

async fn known_account(_ctx: &ToolContext<Bank>, args: &TransferArgs) -> Result<(), ToolError> {
    if args.to.is_empty() { Err(ToolError::not_found()) } else { Ok(()) }
}

#[toolset]
impl Bank {
    /// The fee in cents.
    #[tool(read_only)]
    fn fee(&self) -> Result<u64, ToolError> {
        Ok(self.fee)
    }

    /// Moves money.
    #[tool(risk = "high", idempotent, approval_over = 10_000, authorize = known_account, preflight = Self::open)]
    pub async fn transfer(
        &self,
        ctx: &ToolContext<Bank>,
        /// Account to credit.
        #[arg(kind = "identifier", max_len = 34)]
        to: String,
        /// Amount in cents.
        amount: u64,
    ) -> Result<u64, ToolError> {
        let _ = (ctx, to);
        Ok(amount + self.fee)
    }

    /// Static helper: a plain method, not a tool.
    async fn open(_ctx: &ToolContext<Bank>, _args: &TransferArgs) -> Result<(), ToolError> {
        Ok(())
    }

    /// An associated function as a tool.
    #[tool(read_only)]
    fn version() -> Result<u32, ToolError> {
        Ok(1)
    }
}

fn main() {
    let tools: Vec<ToolHandle<Bank>> = Bank::tools();
    assert_eq!(tools.len(), 3);
}
