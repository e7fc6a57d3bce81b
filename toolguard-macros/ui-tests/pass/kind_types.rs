//! Field kinds inferred from type names, and the rules they relax: a bounded kind needs no
//! `max_len` on a high-risk tool, `SafePath` carries its own confinement.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toolguard::{tool, FieldKind, Tool, ToolError};

macro_rules! stand_in {
    ($($name:ident),*) => {$(
        /// Stand-in named like the runtime's kind newtype.
        #[derive(Debug, Serialize, Deserialize, JsonSchema)]
        pub struct $name(pub String);
    )*};
}
stand_in!(Identifier, Email, Url, SafePath);

// The amount field must be one of toolguard's amount types, so `Cents` is the runtime's.
use toolguard::Cents;

/// Sends an invoice.
#[tool(risk = "high", idempotent, approval_over = 50_000)]
fn send_invoice(
    /// Customer.
    customer: Identifier,
    /// Where to send it.
    to: Email,
    /// Payment link.
    link: Option<Url>,
    /// Attachment, below the invoice folder.
    attachment: SafePath,
    /// Amount.
    amount: Cents,
    /// Reference, an identifier string.
    #[arg(kind = "identifier")]
    reference: String,
) -> Result<(), ToolError> {
    let _ = (customer, to, link, attachment, amount, reference);
    Ok(())
}

fn main() {
    let spec = <SendInvoice as Tool<()>>::spec(&SendInvoice);
    let kinds: Vec<FieldKind> = spec.fields.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FieldKind::Identifier,
            FieldKind::Email,
            FieldKind::Url,
            FieldKind::Path,
            FieldKind::Money,
            FieldKind::Identifier,
            FieldKind::Identifier,
        ]
    );
    assert!(spec.amount_field().is_some_and(|f| f.name == "amount"));
}
