use toolguard::{tool, ToolError};

/// Lists invoices.
#[tool(read_only)]
#[allow(non_snake_case)]
fn list_invoices(
    /// Tenant to list.
    tenant_id: String,
    /// Who asks.
    userId: String,
    /// Caller's role.
    r#role: String,
    /// Admin override.
    IsAdmin: bool,
    /// Page number.
    page: u32,
) -> Result<Vec<String>, ToolError> {
    let _ = (tenant_id, userId, r#role, IsAdmin, page);
    Ok(vec![])
}

fn main() {}
