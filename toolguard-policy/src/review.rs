//! What a policy file makes of the tools an upstream server offers, all at once: which tools it
//! exposes, hides or would refuse at load (every broken rule, each with the policy lines that
//! fix it), and for each exposed tool what guards it: risk, egress, approval, and per field its
//! kind, role, bounds and protection. `toolguard policy check --upstream` prints it.
//!
//! ```
//! use serde_json::json;
//! use toolguard_policy::{Offered, Policy, ToolState};
//!
//! let file = "[tools.send_email]\nrisk = \"medium\"\nread_only = false\n";
//! // `Policy::load_for_review` reads a file whose declarations may be wrong; here they are not
//! // wrong before the schema is known.
//! let policy = Policy::parse("policy.toml", file.to_owned()).unwrap();
//! let offered = [Offered {
//!     name: "send_email".into(),
//!     description: "Sends an e-mail.".into(),
//!     input_schema: json!({"type": "object", "properties": {"subject": {"type": "string"}}}),
//! }];
//! let review = policy.review_offered(&offered);
//! assert!(review.refuses());
//! let ToolState::Refused(why) = &review.tools[0].state else { panic!() };
//! assert!(why[0].fix.as_deref().unwrap().contains("identity = false"));
//! ```

use toolguard_pipeline::declare::{DeclareError, FieldEgress, declare, rules};
use toolguard_pipeline::spec::{Egress, FieldSpec, ToolSpec};

use crate::{Offered, Policy, ToolEntry};

/// The policy's verdict on every tool of an upstream.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Review {
    /// One per tool offered, then one per tool the file names that is not offered.
    pub tools: Vec<ToolReview>,
}

impl Review {
    /// Whether the proxy would refuse to start with this policy in front of this upstream.
    pub fn refuses(&self) -> bool {
        self.tools
            .iter()
            .any(|t| matches!(t.state, ToolState::Refused(_) | ToolState::NotOffered(_)))
    }
}

/// The policy's verdict on one tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolReview {
    /// The tool's name.
    pub name: String,
    /// The line of the entry that covers it (`[tools.NAME]` or `[default_tool]`).
    pub line: Option<usize>,
    /// What the policy makes of it.
    pub state: ToolState,
    /// What guards it (empty for a hidden tool).
    pub guard: Guarding,
}

/// What the policy makes of a tool.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ToolState {
    /// Exposed, with this declaration.
    Exposed(Box<ToolSpec>),
    /// The upstream offers it but the file covers it nowhere: clients never see it.
    Hidden,
    /// Loading the policy would fail on it, for each of these reasons.
    Refused(Vec<Refusal>),
    /// The file names it, but the upstream does not offer it (it offers these).
    NotOffered(Vec<String>),
}

/// One reason a tool's declaration is refused, with the lines that fix it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Refusal {
    /// The field at fault (a JSON pointer), when one is.
    pub field: Option<String>,
    /// What is wrong and how to fix it (the load error's message).
    pub message: String,
    /// The policy lines that fix it, under the tool's table header.
    pub fix: Option<String>,
}

/// What guards a tool, in words a reviewer reads.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct Guarding {
    /// `low` ... `critical`, with `read-only` when it changes nothing.
    pub risk: String,
    /// `none`, `open`, `allowlisted`, narrowed by the fields through which data leaves.
    pub egress: String,
    /// When a human decides: every call, over a threshold, over a session limit.
    pub approval: String,
    /// Its fields.
    pub fields: Vec<FieldGuard>,
}

/// What guards one field.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FieldGuard {
    /// The field's name.
    pub name: String,
    /// Its kind (`text`, `email`, ...).
    pub kind: String,
    /// Its role (`destination`, `amount`, `content`, `selector`).
    pub role: String,
    /// Its bounds (`max_len 200`, `max_items 5`, `scale 2 USD`), `-` when none.
    pub bounds: String,
    /// Its protection (allowlists, roots, `identity = false`, egress), `-` when none.
    pub protection: String,
}

impl Policy {
    /// The policy's verdict on every tool of `offered`: unlike
    /// [`declare_offered`](Policy::declare_offered), which stops at the first error, every
    /// refused tool is listed with every rule it breaks.
    pub fn review_offered(&self, offered: &[Offered]) -> Review {
        let mut tools: Vec<ToolReview> = offered.iter().map(|o| self.review_one(o)).collect();
        let names: Vec<String> = offered.iter().map(|o| o.name.clone()).collect();
        for (name, (line, entry)) in &self.tools {
            if !names.contains(name) {
                tools.push(ToolReview {
                    name: name.clone(),
                    line: Some(*line),
                    state: ToolState::NotOffered(names.clone()),
                    guard: guarding(entry, None),
                });
            }
        }
        Review { tools }
    }

    fn review_one(&self, o: &Offered) -> ToolReview {
        let covering = self.tools.get(&o.name).or(self.default_tool.as_ref());
        let Some((line, entry)) = covering else {
            return ToolReview {
                name: o.name.clone(),
                line: None,
                state: ToolState::Hidden,
                guard: Guarding::default(),
            };
        };
        let decl = entry.declaration();
        let consistency = crate::check_consistency(&o.name, entry)
            .err()
            .map(|message| Refusal {
                field: None,
                message,
                fix: None,
            });
        let state = match declare(&o.name, &o.description, &o.input_schema, &decl) {
            Ok(spec) if consistency.is_none() => ToolState::Exposed(Box::new(spec)),
            Ok(_) => ToolState::Refused(consistency.into_iter().collect()),
            Err(first) => {
                let mut all = rules::check_all(&o.name, &o.description, &o.input_schema, &decl);
                if all.is_empty() {
                    all.push(first);
                }
                let mut refusals: Vec<Refusal> = all.into_iter().map(refusal).collect();
                refusals.extend(consistency);
                ToolState::Refused(refusals)
            }
        };
        let spec = match &state {
            ToolState::Exposed(spec) => Some(&**spec),
            _ => None,
        };
        ToolReview {
            name: o.name.clone(),
            line: Some(*line),
            guard: guarding(entry, spec),
            state,
        }
    }
}

/// A load error as a refusal, with its fix.
fn refusal(e: DeclareError) -> Refusal {
    let fix = fix_lines(&e);
    Refusal {
        field: e.field,
        message: e.message,
        fix,
    }
}

/// The lines that fix `e`, from the option its message names: a whole field entry
/// (`fields."/subject" = { ... }`) as it is, a field option inside the field's entry, a tool
/// option as it is; under the tool's header.
fn fix_lines(e: &DeclareError) -> Option<String> {
    let quoted: Vec<&str> = e.message.split('`').skip(1).step_by(2).collect();
    let line = match quoted.iter().find(|q| q.starts_with("fields.\"/")) {
        Some(whole) => (*whole).to_owned(),
        None => {
            let option = quoted
                .iter()
                .find(|q| q.contains(" = ") && !q.starts_with('[') && !q.contains("::"))?;
            match &e.field {
                Some(field) => format!("fields.\"{field}\" = {{ {option} }}"),
                None => (*option).to_owned(),
            }
        }
    };
    Some(format!("[tools.{}]\n{line}", e.tool))
}

/// What guards a tool: from its declared spec when there is one, else from its entry.
fn guarding(entry: &ToolEntry, spec: Option<&ToolSpec>) -> Guarding {
    let mut risk = entry.risk.as_str().to_owned();
    if entry.read_only {
        risk.push_str(", read-only");
    }
    let fields = match spec {
        Some(spec) => spec
            .fields
            .iter()
            .map(|f| field_guard(entry, &f.name, Some(f)))
            .collect(),
        None => entry
            .fields
            .keys()
            .filter_map(|p| toolguard_pipeline::declare::pointer_property(p))
            .map(|name| field_guard(entry, &name, None))
            .collect(),
    };
    Guarding {
        risk,
        egress: egress_of(entry),
        approval: approval_of(entry),
        fields,
    }
}

fn egress_of(entry: &ToolEntry) -> String {
    let base = match entry.egress {
        Egress::None => return "none".to_owned(),
        Egress::Open => "open",
        Egress::Allowlisted => "allowlisted",
        _ => "declared",
    };
    let when: Vec<String> = entry
        .fields
        .iter()
        .filter(|(_, f)| f.egress.is_marked())
        .map(|(p, f)| match f.egress {
            FieldEgress::Outside => format!("{p} outside {}", f.internal.join(", ")),
            _ => format!("{p} set"),
        })
        .collect();
    if when.is_empty() {
        base.to_owned()
    } else {
        format!("{base}, only when {}", when.join(" or "))
    }
}

fn approval_of(entry: &ToolEntry) -> String {
    let mut when = Vec::new();
    if entry.approval || entry.risk == toolguard_pipeline::spec::Risk::Critical {
        when.push("every call".to_owned());
    }
    if let Some(over) = entry.approval_over {
        when.push(format!("over {over}"));
    }
    if let Some(l) = entry.session_limit {
        let what = match l.on_exceed {
            crate::Exceed::Approval => "held",
            crate::Exceed::Deny => "denied",
        };
        when.push(format!(
            "session over {} per {}s {what}",
            l.amount, l.window_secs
        ));
    }
    if let Some(n) = entry.approvals.filter(|n| *n > 1) {
        when.push(format!("{n} approvers"));
    }
    if when.is_empty() && entry.read_only && entry.egress == Egress::None {
        "-".to_owned()
    } else if when.is_empty() {
        "after untrusted content (flow policy)".to_owned()
    } else {
        when.join("; ")
    }
}

fn field_guard(entry: &ToolEntry, name: &str, spec: Option<&FieldSpec>) -> FieldGuard {
    let pointer = format!("/{}", name.replace('~', "~0").replace('/', "~1"));
    let decl = entry.fields.get(&pointer).cloned().unwrap_or_default();
    // A refused tool has no spec: its field as the declaration alone says.
    let declared = spec.cloned().unwrap_or_else(|| {
        let mut f = FieldSpec::new(name).with_kind(decl.kind.unwrap_or_default());
        f.role = decl.role;
        f.amount = entry.amount.as_deref() == Some(pointer.as_str());
        f
    });
    let kind = declared.kind.as_str();
    let role = declared.role().name();
    let mut bounds = Vec::new();
    let max_len = spec.and_then(|s| s.max_len).or(decl.max_len);
    bounds.extend(max_len.map(|n| format!("max_len {n}")));
    bounds.extend(decl.max_items.map(|n| format!("max_items {n}")));
    if let Some(scale) = decl.scale {
        let currency = decl.currency.clone().unwrap_or_default();
        bounds.push(format!("scale {scale} {currency}").trim_end().to_owned());
    }
    if entry.amount.as_deref() == Some(pointer.as_str()) {
        bounds.push("the amount".to_owned());
    }
    let mut protection = Vec::new();
    let lists = [
        ("domains", &decl.allow_domains),
        ("hosts", &decl.allow_hosts),
        ("schemes", &decl.allow_schemes),
    ];
    for (what, list) in lists {
        if !list.is_empty() {
            protection.push(format!("{what} {}", list.join(" ")));
        }
    }
    protection.extend(decl.root.as_ref().map(|r| format!("root {r}")));
    if decl.namespace.is_some() {
        protection.push("upstream namespace".to_owned());
    }
    if decl.identity == Some(false) {
        protection.push("identity = false".to_owned());
    }
    if decl.sensitive {
        protection.push("sensitive".to_owned());
    }
    match decl.egress {
        FieldEgress::WhenSet => protection.push("egress when set".to_owned()),
        FieldEgress::Outside => protection.push("egress when outside".to_owned()),
        _ => {}
    }
    FieldGuard {
        name: name.to_owned(),
        kind: kind.to_owned(),
        role: role.to_owned(),
        bounds: or_dash(bounds),
        protection: or_dash(protection),
    }
}

fn or_dash(parts: Vec<String>) -> String {
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(", ")
    }
}
