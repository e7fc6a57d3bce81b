use std::path::PathBuf;
use toolguard::{tool, ToolContext, ToolError};

/// Application state.
pub struct Files;

async fn ok(_ctx: &ToolContext<Files>, _args: &ArchiveArgs) -> Result<(), ToolError> {
    Ok(())
}

/// Archives a file and bills it.
#[tool(
    name = "archive_file",
    description = "Moves a file to the archive and bills the caller.",
    risk = "critical",
    idempotent,
    key_wins,
    approval_over = 1_000_000,
    approvals = 2,
    timeout_ms = 10_000,
    revision = 4,
    preflight = ok,
    authorize = ok
)]
async fn archive(
    ctx: &ToolContext<Files>,
    #[arg(description = "File to archive.", root = "/srv/files", max_len = 255)]
    file: PathBuf,
    /// Label of the archive entry.
    #[arg(kind = "name", min_len = 1, max_len = 80, pattern = "^[A-Za-z ]+$")]
    label: String,
    /// Price in cents.
    #[arg(amount, min = 0, max = 10_000_000)]
    price: u64,
    /// Billing contact.
    #[arg(kind = "email", max_len = 254, sensitive)]
    contact: String,
    /// Callback.
    #[arg(kind = "url", max_len = 2048, role = "destination")]
    callback: Option<String>,
    /// Cost centre.
    #[arg(kind = "text", max_len = 30)]
    centre: String,
    /// Tags.
    #[arg(kind = "identifier", max_len = 16, max_items = 8)]
    tags: Vec<String>,
    /// Fee.
    #[arg(kind = "money")]
    fee: u32,
) -> Result<(), ToolError> {
    let _ = (ctx, file, label, price, contact, callback, centre, tags, fee);
    Ok(())
}

/// Tips a courier; the amount may be left out.
#[tool(idempotent, approval_over = 500)]
fn tip(
    /// Tip in cents.
    amount: Option<u32>,
) -> Result<(), ToolError> {
    let _ = amount;
    Ok(())
}

/// Pays in a currency.
#[tool(idempotent(key = "host"), approval_over = 500)]
fn pay_money(
    /// Amount and currency.
    #[arg(amount)]
    sum: toolguard::Money,
) -> Result<(), ToolError> {
    let _ = sum;
    Ok(())
}

fn main() {}
