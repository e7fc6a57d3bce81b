//! The five-field transfer argument object the sanitizer benches judge (identifier, identifier,
//! money, text memo, e-mail), shared by `benches/sanitize.rs` and `benches/instructions.rs`.

use serde_json::{Value, json};
use toolguard::sanitize::Sanitizer;
use toolguard::spec::{FieldKind, FieldSpec, ToolSpec};

/// The memo of the clean ASCII case.
pub const ASCII_MEMO: &str = "Rent for March, split with O'Brien; thanks!";

/// The transfer tool's field rules.
pub fn spec() -> ToolSpec {
    let mut spec = ToolSpec::new(
        "transfer",
        "Move money between accounts",
        json!({}),
        json!({}),
    );
    let field = |name: &str, kind| {
        let mut f = FieldSpec::new(name);
        f.kind = kind;
        f
    };
    let mut amount = field("amount", FieldKind::Money);
    amount.amount = true;
    spec.fields = vec![
        field("from_account", FieldKind::Identifier),
        field("to_account", FieldKind::Identifier),
        amount,
        field("memo", FieldKind::Text),
        field("notify", FieldKind::Email),
    ];
    spec
}

/// The sanitizer, with the e-mail field's domain allowlist.
pub fn sanitizer() -> Sanitizer {
    Sanitizer::new().allow_email_domains("transfer", "notify", ["example.com"])
}

/// The argument object with `memo`.
pub fn args(memo: &str) -> Value {
    json!({
        "from_account": "acct_1029384756",
        "to_account": "acct-5647382910",
        "amount": {"amount": 800000, "currency": "USD"},
        "memo": memo,
        "notify": "ann.obrien@example.com",
    })
}
