//! Tool specs shared by the provider tests: argument types covering optional fields, enums,
//! nested structs, arrays, recursion, maps and string/number constraints, and a `#[tool]`
//! declaration using every `#[arg]` option.

#![allow(dead_code)]

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use toolguard::{Risk, Tool, ToolError, ToolSpec, tool};

/// Currency of an amount.
#[derive(JsonSchema, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Currency {
    Usd,
    Eur,
}

/// Arguments of `transfer_funds`.
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferArgs {
    /// Account to debit.
    #[schemars(length(min = 3, max = 34), pattern(r"^[A-Z0-9]+$"))]
    pub from_account: String,
    /// Account to credit.
    #[schemars(length(min = 3, max = 34))]
    pub to_account: String,
    /// Amount in minor units.
    #[schemars(range(min = 1, max = 1_000_000))]
    pub amount: u64,
    pub currency: Currency,
    /// Free text shown on the statement.
    #[schemars(length(max = 140))]
    pub memo: Option<String>,
}

/// How search results are ordered.
#[derive(JsonSchema, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Most relevant first.
    Relevance,
    /// Newest first.
    Newest,
}

/// A filter on documents.
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// Only documents with all these tags.
    #[schemars(length(max = 5))]
    pub tags: Vec<String>,
    /// Only documents newer than this many days.
    #[schemars(range(min = 1, max = 365))]
    pub max_age_days: Option<u16>,
}

/// Arguments of `search_documents`.
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// What to look for.
    #[schemars(length(min = 1, max = 200))]
    pub query: String,
    pub order: Option<Order>,
    pub filter: Option<Filter>,
    /// Most results to return.
    #[schemars(range(min = 1, max = 50))]
    pub limit: Option<u8>,
    /// Also search archived documents.
    #[serde(default)]
    pub include_archived: bool,
}

/// A shape to draw.
#[derive(JsonSchema, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Shape {
    /// A circle.
    Circle { radius: f64 },
    /// A rectangle.
    Rect { width: f64, height: f64 },
}

/// Arguments of `draw_shapes`.
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DrawArgs {
    /// Shapes to draw, in order.
    pub shapes: Vec<Shape>,
    pub unique_ids: std::collections::BTreeSet<u32>,
}

/// A node of a tree.
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    pub name: String,
    pub children: Vec<Node>,
}

/// Arguments of `create_tree`.
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TreeArgs {
    pub root: Node,
}

/// Arguments of `set_labels` (a map: no strict form).
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelArgs {
    pub labels: BTreeMap<String, String>,
}

/// Arguments of `record_event`: untyped JSON (schemars writes `true` for a `Value`) and integer
/// formats that are not JSON Schema's (`uint32`, `int64`, `double`).
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventArgs {
    /// Event name.
    #[schemars(length(min = 1, max = 64))]
    pub name: String,
    pub payload: Value,
    pub extra: Option<Value>,
    /// Related values, any JSON each.
    pub related: Vec<Value>,
    pub sequence: u32,
    pub offset: i64,
    pub weight: Option<f64>,
}

/// Result of `get_balance`.
#[derive(JsonSchema, Deserialize)]
pub struct Balance {
    pub minor_units: i64,
    pub currency: Currency,
}

/// Arguments of `get_balance`.
#[derive(JsonSchema, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BalanceArgs {
    /// The account.
    #[schemars(length(min = 3, max = 34))]
    pub account: String,
}

/// Files an expense. Declared with every `#[arg]` option, so the exports pin how each
/// constraint (per element, on a `Vec`, too) and the generated `idempotency_key` are lowered.
#[tool(risk = "medium", idempotent)]
#[allow(clippy::too_many_arguments)]
pub fn file_expense(
    /// Expense report id.
    #[arg(
        kind = "identifier",
        min_len = 4,
        max_len = 34,
        pattern = "^[a-z0-9-]+$"
    )]
    report: String,
    #[arg(description = "Amount in cents.", amount, min = 1, max = 5_000_000)] amount: u64,
    /// Justification, kept out of logs.
    #[arg(kind = "text", max_len = 500, sensitive)]
    note: Option<String>,
    /// Who was paid.
    #[arg(kind = "name", max_len = 80)]
    payee: String,
    /// Where to send questions.
    #[arg(kind = "email", max_len = 254)]
    contact: String,
    /// Link to the receipt.
    #[arg(kind = "url", max_len = 2048)]
    receipt_url: String,
    /// Scanned receipts, below the inbox; each path at most 200 characters.
    #[arg(kind = "path", root = "/srv/inbox", max_len = 200)]
    attachments: Vec<String>,
    /// Tags, each 2 to 16 lowercase letters.
    #[arg(min_len = 2, max_len = 16, pattern = "^[a-z]+$")]
    tags: Vec<String>,
    /// Line amounts in cents, each 1 to 100,000.
    #[arg(min = 1, max = 100_000)]
    lines: Vec<u32>,
    /// Total in its currency.
    #[arg(kind = "money")]
    total: toolguard::Money,
) -> Result<(), ToolError> {
    let _ = (
        report,
        amount,
        note,
        payee,
        contact,
        receipt_url,
        attachments,
        tags,
        lines,
        total,
    );
    Ok(())
}

fn schema<T: JsonSchema>() -> Value {
    toolguard::__private::schema_for::<T>()
}

/// The specs, in a fixed order.
pub fn specs() -> Vec<ToolSpec> {
    let mut balance = ToolSpec::new(
        "get_balance",
        "Current balance of one of the caller's accounts.",
        schema::<BalanceArgs>(),
        schema::<Balance>(),
    );
    balance.read_only = true;

    let mut transfer = ToolSpec::new(
        "transfer_funds",
        "Move money between two of the caller's accounts.",
        schema::<TransferArgs>(),
        schema::<Balance>(),
    );
    transfer.risk = Risk::High;
    transfer.idempotent = true;
    transfer.approval_over = Some(10_000);

    let mut search = ToolSpec::new(
        "search_documents",
        "Full-text search over the caller's documents.",
        schema::<SearchArgs>(),
        schema::<Vec<String>>(),
    );
    search.read_only = true;

    let draw = ToolSpec::new(
        "draw_shapes",
        "Draw shapes on the canvas.",
        schema::<DrawArgs>(),
        schema::<()>(),
    );
    let tree = ToolSpec::new(
        "create_tree",
        "Create a tree of folders.",
        schema::<TreeArgs>(),
        schema::<()>(),
    );
    let labels = ToolSpec::new(
        "set_labels",
        "Replace a document's labels.",
        schema::<LabelArgs>(),
        schema::<()>(),
    );
    let expense = <FileExpense as Tool<()>>::spec(&FileExpense);
    let event = ToolSpec::new(
        "record_event",
        "Record an event with a free-form JSON payload.",
        schema::<EventArgs>(),
        schema::<()>(),
    );
    vec![
        balance, transfer, search, draw, tree, labels, expense, event,
    ]
}

/// The spec called `name`.
pub fn spec(name: &str) -> ToolSpec {
    specs()
        .into_iter()
        .find(|s| s.name == name)
        .expect("known spec")
}
