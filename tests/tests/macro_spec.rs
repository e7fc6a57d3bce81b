//! What `#[tool]` and `#[toolset]` generate: the exact input schema, the field rules, the flags,
//! and direct calls of the generated `Tool` impls.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use toolguard::{
    FieldKind, KeyReuse, Principal, Risk, Tool, ToolContext, ToolError, tool, toolset,
};

/// The application state of these tests.
pub struct Bank {
    fee: u64,
}

/// What a transfer returns.
#[derive(Debug, PartialEq, Serialize, JsonSchema)]
pub struct Receipt {
    /// Debited account.
    pub from: String,
    /// Amount moved, in cents.
    pub amount: u64,
    /// Who asked for it.
    pub by: String,
}

/// How fast the money moves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Speed {
    /// Same day.
    Instant,
    /// Next business day.
    Standard,
}

async fn check_balance(
    _ctx: &ToolContext<Bank>,
    args: &TransferFundsArgs,
) -> Result<(), ToolError> {
    if args.amount > 1_000_000 {
        return Err(ToolError::precondition("insufficient funds"));
    }
    Ok(())
}

async fn owns_account(ctx: &ToolContext<Bank>, args: &TransferFundsArgs) -> Result<(), ToolError> {
    if args.from.starts_with(ctx.tenant()) {
        Ok(())
    } else {
        Err(ToolError::not_found())
    }
}

/// Moves money between two of the caller's accounts.
#[tool(
    risk = "high",
    idempotent,
    key_wins,
    approval_over = 10_000,
    approvals = 2,
    timeout_ms = 5_000,
    revision = 3,
    preflight = check_balance,
    authorize = owns_account
)]
pub async fn transfer_funds(
    ctx: &ToolContext<Bank>,
    /// Account to debit.
    #[arg(
        kind = "identifier",
        min_len = 4,
        max_len = 34,
        pattern = "^[a-z0-9-]+$"
    )]
    from: String,
    /// Account to credit.
    #[arg(kind = "identifier", max_len = 34)]
    to: &str,
    #[arg(description = "Amount in cents.", min = 1, max = 5_000_000)] amount: u64,
    /// Note shown on both statements.
    #[arg(max_len = 140, sensitive)]
    memo: Option<String>,
    /// Settlement speed.
    speed: Speed,
) -> Result<Receipt, ToolError> {
    let _ = (to, memo, speed);
    Ok(Receipt {
        from,
        amount: amount + ctx.state().fee,
        by: ctx.subject().to_owned(),
    })
}

/// Adds two numbers.
#[tool(read_only, name = "add")]
fn add_numbers(
    /// First term.
    #[arg(min = -100, max = 100)]
    a: i64,
    /// Second term.
    #[arg(min = -0.5, max = 99.5)]
    b: f64,
) -> Result<f64, String> {
    if b.is_nan() {
        Err("not a number".to_owned())
    } else {
        Ok(a as f64 + b)
    }
}

/// Sends a reminder; the host supplies the idempotency key.
#[tool(risk = "medium", idempotent(key = "host"))]
async fn send_reminder(
    /// Address.
    to: toolguard_kind_stand_ins::Email,
    /// Files to attach, below the outbox.
    #[arg(root = "/srv/outbox", max_len = 200)]
    attachments: Vec<std::path::PathBuf>,
) -> Result<(), ToolError> {
    let _ = (to, attachments);
    Ok(())
}

/// Stand-ins named like the runtime's kind newtypes, to check kind inference by type name.
mod toolguard_kind_stand_ins {
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// An e-mail address.
    #[derive(Debug, Serialize, Deserialize, JsonSchema)]
    pub struct Email(pub String);
}

#[toolset]
impl Bank {
    /// The caller's balance in cents.
    #[tool(read_only, risk = "medium")]
    async fn balance(&self, ctx: &ToolContext<Bank>) -> Result<u64, ToolError> {
        Ok(self.fee * 100 + ctx.tenant().len() as u64)
    }

    /// Sets the fee of later transfers.
    #[tool(name = "set_fee", idempotent)]
    fn set_fee_cents(
        &self,
        /** New fee in cents. */
        fee: u32,
    ) -> Result<u32, ToolError> {
        Ok(fee)
    }
}

fn ctx() -> ToolContext<Bank> {
    ToolContext::new(
        Arc::new(Principal::new("acme", "alice", "s1")),
        Arc::new(Bank { fee: 7 }),
        "call-1",
        None,
    )
}

#[test]
fn input_schema_snapshot() {
    let spec = <TransferFunds as Tool<Bank>>::spec(&TransferFunds);
    let expected = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "TransferFundsArgs",
        "description": "Arguments of the `transfer_funds` tool, as the model proposes them.",
        "type": "object",
        "properties": {
            "from": {
                "description": "Account to debit.",
                "type": "string",
                "minLength": 4,
                "maxLength": 34,
                "pattern": "^[a-z0-9-]+$"
            },
            "to": {
                "description": "Account to credit.",
                "type": "string",
                "maxLength": 34
            },
            "amount": {
                "description": "Amount in cents.",
                "type": "integer",
                "format": "uint64",
                "minimum": 1,
                "maximum": 5_000_000
            },
            "memo": {
                "description": "Note shown on both statements.",
                "type": ["string", "null"],
                "maxLength": 140
            },
            "speed": {
                "description": "Settlement speed.",
                "$ref": "#/$defs/Speed"
            },
            "idempotency_key": {
                "description": "Stable key for this operation; reuse it when retrying the same action",
                "type": "string",
                "pattern": "^[A-Za-z0-9_-]{8,128}$"
            }
        },
        "required": ["from", "to", "amount", "speed", "idempotency_key"],
        "additionalProperties": false,
        "$defs": {
            "Speed": {
                "description": "How fast the money moves.",
                "oneOf": [
                    { "description": "Same day.", "type": "string", "const": "instant" },
                    { "description": "Next business day.", "type": "string", "const": "standard" }
                ]
            }
        }
    });
    assert_eq!(
        spec.input_schema,
        expected,
        "{}",
        serde_json::to_string_pretty(&spec.input_schema).unwrap()
    );
}

#[test]
fn spec_flags_and_fields() {
    let spec = <TransferFunds as Tool<Bank>>::spec(&TransferFunds);
    assert_eq!(spec.name, "transfer_funds");
    assert_eq!(
        spec.description,
        "Moves money between two of the caller's accounts."
    );
    assert_eq!(spec.risk, Risk::High);
    assert!(!spec.read_only);
    assert!(spec.idempotent);
    assert_eq!(spec.key_reuse, KeyReuse::KeyWins);
    assert_eq!(spec.approval_over, Some(10_000));
    assert_eq!(spec.approvals, 2);
    assert_eq!(spec.timeout, std::time::Duration::from_millis(5_000));
    assert_eq!(spec.revision, 3);
    assert_eq!(
        spec.idempotency_key_field.as_deref(),
        Some("idempotency_key")
    );
    assert_eq!(spec.output_schema["title"], "Receipt");

    let names: Vec<&str> = spec.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["from", "to", "amount", "memo", "speed", "idempotency_key"]
    );

    let from = spec.field("from").unwrap();
    assert_eq!(from.kind, FieldKind::Identifier);
    assert_eq!(from.description.as_deref(), Some("Account to debit."));
    assert_eq!((from.min_len, from.max_len), (Some(4), Some(34)));
    assert_eq!(from.pattern.as_deref(), Some("^[a-z0-9-]+$"));
    assert!(!from.optional && !from.sensitive && !from.amount);

    let amount = spec.amount_field().unwrap();
    assert_eq!(amount.name, "amount");
    assert!(amount.amount);
    assert_eq!(amount.kind, FieldKind::Opaque);
    assert_eq!((amount.min, amount.max), (Some(1.0), Some(5_000_000.0)));

    let memo = spec.field("memo").unwrap();
    assert!(memo.optional && memo.sensitive);
    assert_eq!(memo.kind, FieldKind::Text);
    assert_eq!(memo.max_len, Some(140));

    assert_eq!(spec.field("speed").unwrap().kind, FieldKind::Opaque);

    let key = spec.field("idempotency_key").unwrap();
    assert_eq!(key.kind, FieldKind::Identifier);
    assert_eq!(key.pattern.as_deref(), Some("^[A-Za-z0-9_-]{8,128}$"));
    assert!(!key.optional);
}

#[test]
fn defaults_and_inferred_kinds() {
    let add = <AddNumbers as Tool<()>>::spec(&AddNumbers);
    assert_eq!(add.name, "add");
    assert_eq!(add.risk, Risk::Low);
    assert!(add.read_only && !add.idempotent);
    assert_eq!(add.key_reuse, KeyReuse::Conflict);
    assert_eq!(add.approvals, 1);
    assert_eq!(add.timeout, toolguard::ToolSpec::DEFAULT_TIMEOUT);
    assert_eq!(add.idempotency_key_field, None);
    assert_eq!(add.input_schema["properties"]["a"]["minimum"], json!(-100));
    assert_eq!(add.input_schema["properties"]["b"]["minimum"], json!(-0.5));
    assert_eq!(add.input_schema["properties"]["b"]["maximum"], json!(99.5));
    assert_eq!(add.field("b").unwrap().min, Some(-0.5));

    let remind = <SendReminder as Tool<()>>::spec(&SendReminder);
    assert_eq!(remind.risk, Risk::Medium);
    assert!(remind.idempotent);
    assert_eq!(remind.idempotency_key_field, None);
    assert!(
        remind.input_schema["properties"]
            .get("idempotency_key")
            .is_none()
    );
    assert_eq!(remind.field("to").unwrap().kind, FieldKind::Email);
    let att = remind.field("attachments").unwrap();
    assert_eq!(att.kind, FieldKind::Path);
    assert_eq!(att.root.as_deref(), Some("/srv/outbox"));
    assert_eq!(
        remind.input_schema["properties"]["attachments"]["items"]["maxLength"],
        json!(200)
    );
}

#[tokio::test]
async fn call_async_tool_with_context() {
    let ctx = ctx();
    let args: TransferFundsArgs = serde_json::from_value(json!({
        "from": "acme-1", "to": "acme-2", "amount": 500, "speed": "instant",
        "idempotency_key": "key-0001"
    }))
    .unwrap();
    TransferFunds.preflight(&ctx, &args).await.unwrap();
    TransferFunds.authorize(&ctx, &args).await.unwrap();
    let out = TransferFunds.call(&ctx, args).await.unwrap();
    assert_eq!(
        out,
        Receipt {
            from: "acme-1".into(),
            amount: 507,
            by: "alice".into()
        }
    );

    let foreign: TransferFundsArgs = serde_json::from_value(json!({
        "from": "other-1", "to": "acme-2", "amount": 2_000_000, "speed": "standard",
        "idempotency_key": "key-0002"
    }))
    .unwrap();
    assert_eq!(
        TransferFunds.preflight(&ctx, &foreign).await,
        Err(ToolError::precondition("insufficient funds"))
    );
    assert_eq!(
        TransferFunds.authorize(&ctx, &foreign).await,
        Err(ToolError::not_found())
    );
}

#[tokio::test]
async fn call_sync_tool_and_convert_its_error() {
    let ctx = ctx();
    let ok = AddNumbers.call(&ctx, AddNumbersArgs { a: 2, b: 0.5 }).await;
    assert_eq!(ok, Ok(2.5));
    let err = AddNumbers
        .call(&ctx, AddNumbersArgs { a: 2, b: f64::NAN })
        .await;
    assert_eq!(err, Err(ToolError::failed("not a number")));
    // The function stays callable as written.
    assert_eq!(add_numbers(1, 1.0), Ok(2.0));
}

#[test]
fn unknown_fields_are_rejected() {
    let r: Result<AddNumbersArgs, _> =
        serde_json::from_value(json!({"a": 1, "b": 2, "tenant": "x"}));
    assert!(r.is_err());
}

#[tokio::test]
async fn toolset_tools() {
    let tools = Bank::tools();
    let names: Vec<&str> = tools.iter().map(|t| t.spec().name.as_str()).collect();
    assert_eq!(names, ["balance", "set_fee"]);
    let ctx = ctx();
    assert_eq!(Balance.call(&ctx, BalanceArgs {}).await, Ok(704));
    let args: SetFeeCentsArgs =
        serde_json::from_value(json!({"fee": 9, "idempotency_key": "abcdefgh"})).unwrap();
    assert_eq!(SetFeeCents.call(&ctx, args).await, Ok(9));
    let spec = SetFeeCents.spec();
    assert_eq!(
        spec.field("fee").unwrap().description.as_deref(),
        Some("New fee in cents.")
    );
    assert_eq!(
        Balance.spec().input_schema["additionalProperties"],
        json!(false)
    );
}

#[tokio::test]
async fn dispatcher_enforces_the_generated_constraints() {
    use toolguard::{Dispatcher, Status, ToolCall};

    let dispatcher = Dispatcher::builder(Bank { fee: 7 })
        .tools(Bank::tools())
        .tool(AddNumbers)
        .build()
        .expect("dispatcher builds");
    let who = Principal::new("acme", "alice", "s1");

    let ok = dispatcher
        .dispatch(ToolCall::new("c1", "add", json!({"a": 2, "b": 0.5})), &who)
        .await;
    assert_eq!(ok.status, Status::Ok, "{ok:?}");

    // `a` is declared with `max = 100`; the schema carries it and validation refuses 500.
    let too_big = dispatcher
        .dispatch(
            ToolCall::new("c2", "add", json!({"a": 500, "b": 0.5})),
            &who,
        )
        .await;
    assert_eq!(too_big.status, Status::InvalidArguments, "{too_big:?}");

    // A field the schema does not declare (`additionalProperties: false`).
    let extra = dispatcher
        .dispatch(
            ToolCall::new("c3", "add", json!({"a": 1, "b": 1, "tenant": "x"})),
            &who,
        )
        .await;
    assert_eq!(extra.status, Status::InvalidArguments, "{extra:?}");

    // `set_fee` is idempotent: without its `idempotency_key` argument the call is refused.
    let no_key = dispatcher
        .dispatch(ToolCall::new("c4", "set_fee", json!({"fee": 3})), &who)
        .await;
    assert_ne!(no_key.status, Status::Ok, "{no_key:?}");
    let with_key = dispatcher
        .dispatch(
            ToolCall::new(
                "c5",
                "set_fee",
                json!({"fee": 3, "idempotency_key": "fee-key-1"}),
            ),
            &who,
        )
        .await;
    assert_eq!(with_key.status, Status::Ok, "{with_key:?}");
}

async fn did_it_land(
    ctx: &ToolContext<Bank>,
    args: &PayOutArgs,
) -> Result<toolguard::Reconciled<u64>, ToolError> {
    Ok(if ctx.operation_id() == Some("op-landed") {
        toolguard::Reconciled::Completed(args.cents + ctx.state().fee)
    } else {
        toolguard::Reconciled::Unknown
    })
}

/// Pays out through a slow downstream.
#[tool(risk = "medium", idempotent, reconcile = did_it_land)]
async fn pay_out(
    ctx: &ToolContext<Bank>,
    /// Cents.
    #[arg(max = 1_000)]
    cents: u64,
) -> Result<u64, ToolError> {
    Ok(cents + ctx.state().fee)
}

#[tokio::test]
async fn reconcile_hook_is_generated() {
    let args: PayOutArgs =
        serde_json::from_value(json!({"cents": 5, "idempotency_key": "abcdefgh"})).unwrap();
    let landed = ToolContext::new(
        Arc::new(Principal::new("acme", "alice", "s1")),
        Arc::new(Bank { fee: 7 }),
        "call-1",
        Some("op-landed".into()),
    );
    assert_eq!(
        PayOut.reconcile(&landed, &args).await.unwrap(),
        toolguard::Reconciled::Completed(12)
    );
    assert_eq!(
        PayOut.reconcile(&ctx(), &args).await.unwrap(),
        toolguard::Reconciled::Unknown
    );
}

static NOTIFIED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Notifies a few of the caller's contacts.
#[tool(risk = "high", idempotent)]
async fn notify_contacts(
    _ctx: &ToolContext<Bank>,
    /// Contacts to notify.
    #[arg(kind = "identifier", max_len = 34, max_items = 3)]
    contacts: Vec<String>,
    /// Extra headers, by name.
    #[arg(max_items = 2)]
    headers: Option<std::collections::BTreeMap<String, u32>>,
) -> Result<usize, ToolError> {
    let _ = headers;
    NOTIFIED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Ok(contacts.len())
}

#[tokio::test]
async fn max_items_is_in_the_schema_and_enforced() {
    use toolguard::{Dispatcher, Status, ToolCall};

    let spec = <NotifyContacts as Tool<Bank>>::spec(&NotifyContacts);
    assert_eq!(spec.input_schema["properties"]["contacts"]["maxItems"], 3);
    assert_eq!(
        spec.input_schema["properties"]["headers"]["maxProperties"],
        2
    );

    let dispatcher = Dispatcher::builder(Bank { fee: 7 })
        .tool(NotifyContacts)
        .build()
        .expect("dispatcher builds");
    let who = Principal::new("acme", "alice", "s1");
    let call = |id: &str, contacts: serde_json::Value, key: &str| {
        ToolCall::new(
            id,
            "notify_contacts",
            json!({"contacts": contacts, "idempotency_key": key}),
        )
    };

    let too_many = dispatcher
        .dispatch(
            call("n1", json!(["a", "b", "c", "d"]), "notify-key-1"),
            &who,
        )
        .await;
    assert_eq!(too_many.status, Status::InvalidArguments, "{too_many:?}");
    assert_eq!(NOTIFIED.load(std::sync::atomic::Ordering::SeqCst), 0);

    let too_many_headers = dispatcher
        .dispatch(
            ToolCall::new(
                "n2",
                "notify_contacts",
                json!({"contacts": ["a"], "headers": {"x": 1, "y": 2, "z": 3},
                       "idempotency_key": "notify-key-2"}),
            ),
            &who,
        )
        .await;
    assert_eq!(
        too_many_headers.status,
        Status::InvalidArguments,
        "{too_many_headers:?}"
    );
    assert_eq!(NOTIFIED.load(std::sync::atomic::Ordering::SeqCst), 0);

    let fine = dispatcher
        .dispatch(call("n3", json!(["a", "b", "c"]), "notify-key-3"), &who)
        .await;
    assert_eq!(fine.status, Status::Ok, "{fine:?}");
    assert_eq!(NOTIFIED.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// An order reference whose nested field is renamed into an identity name.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrderRef {
    /// Order number.
    pub number: u32,
    /// Details of the order.
    pub details: OrderDetails,
}

/// Nested details; `owner` is written `ownerId` by serde.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
pub struct OrderDetails {
    /// The order's owner, as the model would claim it.
    #[serde(rename = "ownerId")]
    pub owner: String,
}

/// Looks an order up.
#[tool(read_only)]
fn find_order(
    /// The order.
    order: OrderRef,
) -> Result<u32, ToolError> {
    Ok(order.number)
}

#[test]
fn dispatcher_refuses_a_nested_identity_property() {
    use toolguard::{BuildError, Dispatcher};

    let err = Dispatcher::builder(())
        .tool(FindOrder)
        .build()
        .expect_err("a nested identity property is refused");
    match err {
        BuildError::UnsafeDeclaration { tool, message } => {
            assert_eq!(tool, "find_order");
            assert!(message.contains("ownerId"), "{message}");
        }
        other => panic!("unexpected error: {other}"),
    }
}

#[test]
fn name_constants_match_the_spec() {
    let spec = <TransferFunds as Tool<Bank>>::spec(&TransferFunds);
    assert_eq!(TransferFunds::NAME, spec.name);
    let f = TransferFunds::FIELDS;
    let spec_fields: Vec<&str> = spec.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        [f.from, f.to, f.amount, f.memo, f.speed, f.idempotency_key],
        spec_fields.as_slice()
    );
    // A renamed tool: the constant is the name the model calls, not the function's.
    assert_eq!(AddNumbers::NAME, "add");
    assert_eq!(AddNumbers::FIELDS, AddNumbersFields { a: "a", b: "b" });
    // Toolset methods get them too; `idempotent(key = "host")` adds no key field.
    assert_eq!(SetFeeCents::NAME, "set_fee");
    assert_eq!(
        (SetFeeCents::FIELDS.fee, SetFeeCents::FIELDS.idempotency_key),
        ("fee", "idempotency_key")
    );
    assert_eq!(
        SendReminder::FIELDS,
        SendReminderFields {
            to: "to",
            attachments: "attachments"
        }
    );
    assert_eq!(Balance::NAME, "balance");
}

#[tokio::test]
async fn builder_options_take_the_name_constants() {
    use toolguard::{Dispatcher, RiskPolicy, Status, ToolCall};

    let dispatcher = Dispatcher::builder(Bank { fee: 7 })
        .tool(TransferFunds)
        .host_keys(toolguard::HostKeys::ephemeral())
        .policy(RiskPolicy::new().max_per_call(TransferFunds::NAME, 500))
        .build()
        .expect("dispatcher builds");
    let who = Principal::new("acme", "alice", "s1");
    let f = TransferFunds::FIELDS;
    let call = |id: &str, amount: u64| {
        let mut args = serde_json::Map::new();
        args.insert(f.from.to_owned(), json!("acme-001"));
        args.insert(f.to.to_owned(), json!("acme-002"));
        args.insert(f.amount.to_owned(), json!(amount));
        args.insert(f.speed.to_owned(), json!("instant"));
        args.insert(
            f.idempotency_key.to_owned(),
            json!(format!("key-{id}-0001")),
        );
        ToolCall::new(id, TransferFunds::NAME, serde_json::Value::Object(args))
    };
    let small = dispatcher.dispatch(call("c1", 400), &who).await;
    assert_eq!(small.status, Status::Ok, "{small:?}");
    let large = dispatcher.dispatch(call("c2", 600), &who).await;
    assert_eq!(large.status, Status::PolicyDenied, "{large:?}");
}

/// A hand-written tool whose static name disagrees with its declaration.
struct Misnamed;

impl Tool<Bank> for Misnamed {
    type Args = BalanceArgs;
    type Output = u64;

    fn spec(&self) -> toolguard::spec::ToolSpec {
        let mut spec = toolguard::spec::ToolSpec::new(
            "declared_name",
            "A tool named twice.",
            toolguard::__private::schema_for::<BalanceArgs>(),
            toolguard::__private::schema_for::<u64>(),
        );
        spec.read_only = true;
        spec
    }

    fn static_name(&self) -> Option<toolguard::ArcStr> {
        Some(toolguard::ArcStr::from("other_name"))
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext<Bank>,
        _args: BalanceArgs,
    ) -> toolguard::BoxFuture<'a, Result<u64, ToolError>> {
        Box::pin(async { Ok(1) })
    }
}

/// `#[tool]` names its tool with a static string (renamed tools and toolset methods alike), and
/// the dispatcher's audit records share it, so that no call writes a reference count of the
/// registry. A static name that disagrees with the declaration is ignored: the declared name is
/// the tool's name everywhere.
#[tokio::test]
async fn generated_names_are_static_and_shared_with_the_audit_trail() {
    use toolguard::{ArcStr, Dispatcher, MemoryAuditSink, Status, ToolCall};

    let static_name = Tool::<Bank>::static_name(&AddNumbers).expect("a static name");
    assert_eq!(static_name, "add");
    assert!(ArcStr::is_static(&static_name));
    let trail = Arc::new(MemoryAuditSink::new());
    let dispatcher = Dispatcher::builder(Bank { fee: 7 })
        .tools(Bank::tools())
        .tool(AddNumbers)
        .tool(Misnamed)
        .audit(trail.clone())
        .build()
        .expect("dispatcher builds");
    let who = Principal::new("acme", "alice", "s1");
    let calls = [
        ("add", json!({"a": 2, "b": 1}), true),
        ("balance", json!({}), true),
        ("declared_name", json!({}), false),
    ];
    for (tool, args, generated) in calls {
        let outcome = dispatcher
            .dispatch(ToolCall::new("c", tool, args), &who)
            .await;
        assert_eq!(outcome.status, Status::Ok, "{outcome:?}");
        let entry = outcome
            .audit_seq
            .and_then(|seq| trail.get(seq))
            .expect("the call's audit entry");
        assert_eq!(entry.record.tool, tool);
        assert_eq!(ArcStr::is_static(&entry.record.tool), generated, "{tool}");
    }
    assert_eq!(
        dispatcher
            .dispatch(ToolCall::new("c", "other_name", json!({})), &who)
            .await
            .status,
        Status::UnknownTool
    );
}

/// A message of someone's mailbox, several levels down a result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Message {
    /// Message number.
    pub number: u32,
    /// What the sender wrote.
    pub body: Option<String>,
}

/// One folder's messages.
#[derive(Debug, Serialize, JsonSchema)]
pub enum Folder {
    /// No messages.
    Empty,
    /// Some messages.
    Messages(Vec<Message>),
}

/// A mailbox summary whose type name says nothing about the text in it.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Mailbox {
    /// Unread count.
    pub unread: u32,
    /// The folders by name.
    pub folders: Vec<Folder>,
}

/// The same, declared untrusted.
#[tool(read_only, output = "untrusted")]
fn inbox_summary_declared() -> Result<Mailbox, ToolError> {
    Ok(Mailbox {
        unread: 0,
        folders: Vec::new(),
    })
}

/// A count and a flag: nothing that carries text (the compiler checks it: the derive requires
/// `NoFreeText` of every field).
#[derive(Debug, Serialize, JsonSchema, toolguard::NoFreeText)]
pub struct Counts {
    /// Unread.
    pub unread: u32,
    /// Whether the box is full.
    pub full: bool,
}

/// Counts the inbox.
#[tool(read_only)]
fn inbox_counts() -> Result<Counts, ToolError> {
    Ok(Counts {
        unread: 0,
        full: false,
    })
}

#[test]
fn a_read_only_result_that_carries_text_must_declare_its_trust_whatever_its_type_is_called() {
    use toolguard::Dispatcher;

    // Without `output`, `#[tool(read_only)]` returning `Mailbox` does not compile (the ui case
    // `read_only_result_with_text.rs`); a spec that says nothing of its output, as a run-time
    // declaration or a policy file may, is refused when the dispatcher is built, naming the
    // path of the text in the result.
    let mut spec = <InboxSummaryDeclared as Tool<()>>::spec(&InboxSummaryDeclared).clone();
    spec.output_declared = false;
    spec.untrusted_output = false;
    let message = toolguard::spec::check_output_trust(&spec).expect_err("free text nested");
    assert!(message.contains("/folders/*/Messages/*/body"), "{message}");
    assert!(message.contains("output = \"untrusted\""), "{message}");
    // Declared, it builds and its results are sources; without text, nothing to declare.
    let d = Dispatcher::builder(())
        .tool(InboxSummaryDeclared)
        .tool(InboxCounts)
        .build()
        .expect("declared or text-free results build");
    let _ = d;
    assert!(<InboxSummaryDeclared as Tool<()>>::spec(&InboxSummaryDeclared).untrusted_output);
    // A hand-written spec is read the same way.
    let mut spec = toolguard::ToolSpec::new(
        "hand_written",
        "Reads a page.",
        json!({"type": "object"}),
        json!({"type": "object", "properties": {"page": {"type": "string", "maxLength": 2000}}}),
    );
    spec.read_only = true;
    let message = toolguard::spec::check_output_trust(&spec).expect_err("free text");
    assert!(message.contains("`/page`"), "{message}");
    spec.output_declared = true;
    assert_eq!(toolguard::spec::check_output_trust(&spec), Ok(()));
}
