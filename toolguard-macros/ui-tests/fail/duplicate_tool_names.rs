use toolguard::{toolset, ToolError};

/// Application state.
pub struct Shop;

#[toolset]
impl Shop {
    /// Lists the orders.
    #[tool(read_only, output = "trusted")]
    fn orders(&self) -> Result<Vec<String>, ToolError> {
        Ok(vec![])
    }

    /// Lists the orders, again.
    #[tool(read_only, name = "orders", output = "trusted")]
    fn orders_again(&self) -> Result<Vec<String>, ToolError> {
        Ok(vec![])
    }

    /// Lists the tools; `tools()` is generated.
    #[tool(read_only, output = "trusted")]
    fn tools(&self) -> Result<Vec<String>, ToolError> {
        Ok(vec![])
    }

    /// Describes the shop; its struct would be `Shop`.
    #[tool(read_only, output = "trusted")]
    fn shop(&self) -> Result<String, ToolError> {
        Ok(String::new())
    }
}

/// Application state.
pub struct Bank;

#[toolset]
#[allow(non_snake_case)]
impl Bank {
    /// Moves money.
    #[tool(idempotent)]
    fn transfer_funds(&self) -> Result<(), ToolError> {
        Ok(())
    }

    /// Moves money, camelCase.
    #[tool(idempotent)]
    fn transferFunds(&self) -> Result<(), ToolError> {
        Ok(())
    }
}

fn main() {}
