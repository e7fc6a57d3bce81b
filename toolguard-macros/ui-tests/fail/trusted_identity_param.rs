use toolguard::{tool, ToolError};

/// Lists invoices.
#[tool(read_only, output = "trusted")]
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

/// Plural and id variants of identity names; the last three are ordinary names and pass.
#[tool(read_only, output = "trusted")]
#[allow(non_snake_case)]
fn list_reports(
    /// Tenants.
    tenants: Vec<String>,
    /// Tenant ids.
    tenant_ids: Vec<String>,
    /// Tenant id.
    TenantId: String,
    /// Owner id.
    owner_id: String,
    /// User.
    user: String,
    /// Users.
    users: Vec<String>,
    /// Principal.
    principal: String,
    /// Organization.
    org_id: String,
    /// Organization, spelt out.
    organization_id: String,
    /// Approvers.
    approvers: Vec<String>,
    /// Tenant id, in capitals.
    TENANT_ID: String,
    /// User ids, in capitals.
    USER_IDS: Vec<String>,
    /// Subject line of the report mail (fine).
    subject_line: String,
    /// Hint for the user name field (fine).
    username_hint: String,
    /// Repository owner (fine: only `owner_id` is an identity).
    owner: String,
) -> Result<Vec<String>, ToolError> {
    let _ = (
        tenants, tenant_ids, TenantId, owner_id, user, users, principal, org_id,
        organization_id, approvers, TENANT_ID, USER_IDS, subject_line, username_hint, owner,
    );
    Ok(vec![])
}

fn main() {}
