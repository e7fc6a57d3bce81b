//! The compile-time safety rules. Each violation is a `syn::Error` spanned on the offending
//! attribute, parameter or type, saying what is wrong and how to fix it. See `RULES.md`.

use std::collections::{HashMap, HashSet};

use syn::spanned::Spanned;

use crate::model::{ArgDecl, Errors, Kind, ToolDecl};
use crate::parse::{infer_kind, innermost, is_float, last_ident, through_option};

/// Identity or authority words a parameter name may not be, alone, in the plural (`s`) or with an
/// `id`/`ids` suffix. Names are compared after removing case, `_`, `-` and `r#` (so `TenantId`,
/// `tenant_ids`, `USERS` and `isAdmin` all match). A longer word that merely starts with one of
/// them (`subject_line`, `username_hint`, `roleplay`) is an ordinary name.
pub const IDENTITY_WORDS: [&str; 8] = [
    "tenant",
    "subject",
    "user",
    "role",
    "admin",
    "isadmin",
    "approver",
    "principal",
];

/// Words that name an identity only as an id (`owner_id`, `org_ids`, `organizationId`): the bare
/// word (`owner` of a repository, `org` of a project) is an ordinary argument.
pub const IDENTITY_ID_WORDS: [&str; 4] = ["owner", "org", "organization", "organisation"];

/// Names refused exactly as written (after the same normalization).
const IDENTITY_EXACT: [&str; 1] = ["approved"];

/// Whether `name` claims identity or authority (rule 4). Kept identical to
/// `toolguard::spec::is_identity_name`, which the dispatcher applies to nested properties.
pub fn is_identity_name(name: &str) -> bool {
    let n: String = name
        .strip_prefix("r#")
        .unwrap_or(name)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    if IDENTITY_EXACT.contains(&n.as_str()) {
        return true;
    }
    let stem_in = |suffixes: &[&str], words: &[&str]| {
        suffixes
            .iter()
            .filter_map(|s| n.strip_suffix(s))
            .any(|stem| words.contains(&stem))
    };
    stem_in(&["", "s", "id", "ids"], &IDENTITY_WORDS) || stem_in(&["id", "ids"], &IDENTITY_ID_WORDS)
}

/// Words that make a parameter name money-like (rule 3): `total_usd`, `unitPrice`, `FEES`.
const MONEY_WORDS: [&str; 7] = [
    "amount", "price", "cost", "fee", "total", "balance", "cents",
];

/// The words of an identifier: split at `_`, `-` and lower-to-upper case changes, lowercased.
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut prev_lower = false;
    for c in name.strip_prefix("r#").unwrap_or(name).chars() {
        if !c.is_alphanumeric() {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        prev_lower = c.is_lowercase() || c.is_numeric();
        current.extend(c.to_lowercase());
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Whether one word of `name` is a money word (or its plural).
pub fn is_money_name(name: &str) -> bool {
    words(name).iter().any(|w| {
        MONEY_WORDS.contains(&w.as_str())
            || w.strip_suffix('s')
                .is_some_and(|s| MONEY_WORDS.contains(&s))
    })
}

/// The kind a field has: `kind = ...`, else inferred from its type.
pub fn arg_kind(arg: &ArgDecl) -> Kind {
    match &arg.attrs.kind {
        Some(k) => k.value.unwrap_or(Kind::Opaque),
        None => infer_kind(&arg.ty),
    }
}

/// Whether `arg` is the tool's amount field.
pub fn is_amount(decl: &ToolDecl, arg: &ArgDecl) -> bool {
    decl.amount_field().is_some_and(|a| a.name == arg.name)
}

/// Checks one tool against every rule that concerns a single declaration.
pub fn tool(decl: &ToolDecl, errors: &mut Errors) {
    let name = decl.name();
    let a = &decl.attrs;

    // Rule 8: a description.
    if decl.description().is_none_or(|d| d.trim().is_empty()) {
        errors.push(
            decl.fn_ident.span(),
            format!(
                "tool `{name}` has no description: the model chooses tools by their description. \
                 Add a doc comment (`/// What it does, for whom, with which effect.`) or \
                 `#[tool(description = \"...\")]`"
            ),
        );
    }

    // Rule 9: a portable name.
    if !valid_name(&name) {
        errors.push(
            decl.name_span(),
            format!(
                "invalid tool name `{name}`: providers accept `^[a-zA-Z][a-zA-Z0-9_]{{0,63}}$` \
                 (a letter, then up to 63 letters, digits or `_`). Rename it, e.g. \
                 `#[tool(name = \"{}\")]`",
                suggest_name(&name)
            ),
        );
    }

    // Rule 1: a state-changing high-risk tool must be idempotent.
    if let Some(r) = &a.risk
        && r.value.is_high()
        && a.read_only.is_none()
        && a.idempotent.is_none()
    {
        errors.push(
            r.span,
            format!(
                "`risk = \"{}\"` on a tool that changes state needs `idempotent`: a retried or \
                 replayed call must not execute twice. Add `idempotent` (the model sends an \
                 `idempotency_key`) or `idempotent(key = \"host\")`, or mark the tool `read_only` \
                 if it has no side effect",
                r.value.name()
            ),
        );
    }

    // Rule 11: contradictions.
    if a.read_only.is_some() {
        if let Some(ao) = &a.approval_over {
            errors.push(
                ao.span,
                "`approval_over` on a `read_only` tool: approvals guard side effects, and a \
                 read-only tool has none. Remove `approval_over`, or remove `read_only` if the tool \
                 does change state",
            );
        }
        if let Some(i) = &a.idempotent {
            errors.push(
                i.span,
                "`idempotent` on a `read_only` tool: idempotency keys deduplicate side effects, \
                 and a read-only tool has none. Remove `idempotent`, or remove `read_only` if the \
                 tool does change state",
            );
        }
    }
    if let Some(ao) = &a.approval_over
        && ao.value == 0
    {
        errors.push(
            ao.span,
            "`approval_over = 0` makes the threshold meaningless: every amount would need \
             approval. Give the largest amount that may run without approval (e.g. \
             `approval_over = 10_000` for $100.00 in cents), or remove `approval_over` if no \
             amount needs one",
        );
    }
    if let Some(n) = &a.approvals {
        if n.value == 0 {
            errors.push(
                n.span,
                "`approvals = 0` is a contradiction: an approval needs at least one approver. Use \
                 `approvals = 1` (the default) or more, or remove `approval_over`",
            );
        } else if n.value > u64::from(u8::MAX) {
            errors.push(n.span, "`approvals` must be at most 255");
        }
    }
    if let Some(kw) = a.key_wins
        && a.idempotent.is_none()
    {
        errors.push(
            kw,
            "`key_wins` decides what a reused idempotency key does, but the tool is not \
             `idempotent`: add `idempotent` or remove `key_wins`",
        );
    }
    if let Some(t) = &a.timeout_ms
        && t.value == 0
    {
        errors.push(
            t.span,
            "`timeout_ms = 0` would fail every call: give a deadline above zero",
        );
    }
    if let Some(r) = &a.revision
        && r.value > u64::from(u32::MAX)
    {
        errors.push(r.span, "`revision` must fit in a `u32`");
    }

    // Rule 2: an approval is stored under the call's idempotency key, so a retry finds the
    // pending request instead of opening a second one.
    if let Some(ao) = &a.approval_over
        && a.idempotent.is_none()
        && a.read_only.is_none()
    {
        errors.push(
            ao.span,
            "`approval_over` needs `idempotent`: an approval request is stored under the call's \
             idempotency key, so that a retried call finds the pending request instead of opening \
             a second one. Add `idempotent` (the model sends an `idempotency_key`) or \
             `idempotent(key = \"host\")`",
        );
    }

    // Rule 2: approval_over measures an integer amount field.
    if let Some(ao) = &a.approval_over {
        match decl.amount_field() {
            None => errors.push(
                ao.span,
                format!(
                    "`approval_over` needs an amount field to compare with, and tool `{name}` has \
                     none: name the parameter `amount` or mark it `#[arg(amount)]` (an integer \
                     in minor units, e.g. `amount: u64`)"
                ),
            ),
            Some(f) if is_float(&f.ty) => errors.push(
                ao.span,
                format!(
                    "`approval_over` compares against `{}`, which is a float: floats round, so \
                     the threshold could be crossed unnoticed. Make `{}` an integer in minor \
                     units (`u64` cents)",
                    f.name, f.name
                ),
            ),
            Some(_) => {}
        }
    }

    let marked: Vec<&ArgDecl> = decl
        .args
        .iter()
        .filter(|x| x.attrs.amount.is_some())
        .collect();
    if let [_, rest @ ..] = marked.as_slice() {
        for extra in rest {
            if let Some(s) = extra.attrs.amount {
                errors.push(
                    s,
                    "only one field can be the amount (`#[arg(amount)]`): approvals and session \
                     limits measure one number. Remove the extra `amount` marks",
                );
            }
        }
    }

    for arg in &decl.args {
        arg_rules(decl, arg, errors);
    }
}

fn arg_rules(decl: &ToolDecl, arg: &ArgDecl, errors: &mut Errors) {
    let high = decl.risk().is_high();
    let kind = arg_kind(arg);
    let amount = is_amount(decl, arg);
    let base = last_ident(innermost(&arg.ty));
    let at = &arg.attrs;

    // Rule 4: no identity or authority from the model.
    if is_identity_name(&arg.name) {
        errors.push(
            arg.ident.span(),
            format!(
                "parameter `{}` looks like identity or authority, which the model must never \
                 supply: it comes from the authenticated principal. Remove it and take \
                 `ctx: &ToolContext<S>` as the first parameter, then use `ctx.tenant()`, \
                 `ctx.subject()` or `ctx.principal().roles`",
                arg.name
            ),
        );
    }

    // Rule 3: money is never a float.
    let money_named = is_money_name(&arg.name);
    if (amount || kind == Kind::Money || money_named) && is_float(&arg.ty) {
        errors.spanned(
            &arg.ty,
            format!(
                "`{}` is {} but has a float type: floats cannot represent most decimal amounts \
                 exactly and make limits drift. Use an integer in minor units (`u64` cents) or \
                 the `Money`/`Cents` type",
                arg.name,
                if amount {
                    "an amount"
                } else if kind == Kind::Money {
                    "money"
                } else {
                    "named like money"
                }
            ),
        );
    }

    // Rule 15: an amount is shown to approvers, so it cannot be redacted.
    if amount && let Some(s) = at.sensitive {
        errors.push(
            s,
            format!(
                "`{}` is the amount field and cannot be `sensitive`: approvers must see the amount \
                 in the preview, while `sensitive` redacts it. Remove `sensitive`",
                arg.name
            ),
        );
    }

    // Rule 7: no model-written commands or queries.
    if let Some(k) = &at.refused_kind {
        let sql = k.value == "sql";
        errors.push(
            k.span,
            format!(
                "`kind = \"{}\"` is refused: a model-written {} string is an injection channel. \
                 Take structured arguments (an enum of allowed operations, identifiers, numbers) \
                 and build the {} inside the handler",
                k.value,
                if sql { "SQL" } else { "shell command" },
                if sql {
                    "query with bound parameters"
                } else {
                    "command"
                },
            ),
        );
    }
    if base.as_deref() == Some("Command") {
        errors.spanned(
            &arg.ty,
            format!(
                "parameter `{}` is a `Command`: a model must never choose what runs. Take \
                 structured arguments (an enum of allowed operations) and build the command in the \
                 handler",
                arg.name
            ),
        );
    }

    let stringy = matches!(base.as_deref(), Some("String" | "str" | "Cow"));

    // Rule 5: bounded strings on high-risk tools.
    if high && stringy && at.max_len.is_none() && !kind.is_bounded() {
        errors.spanned(
            &arg.ty,
            format!(
                "unbounded string `{}` on a {}-risk tool: a model can send any amount of text \
                 here, including injected instructions. Add `#[arg(max_len = N)]`, or use a \
                 bounded kind (`#[arg(kind = \"identifier\")]`, `Identifier`, `Email`, `Url`)",
                arg.name,
                decl.risk().name()
            ),
        );
    }

    // Rule 6: paths are confined below a root.
    let pathish = matches!(base.as_deref(), Some("PathBuf" | "Path")) || stringy;
    if kind == Kind::Path && pathish && at.root.is_none() {
        errors.spanned(
            &arg.ty,
            format!(
                "path `{}` has no root: a model-chosen path could reach any file (`../../etc`). \
                 Confine it with `#[arg(root = \"/srv/data\")]` (or use `SafePath`)",
                arg.name
            ),
        );
    }
    if let Some(r) = &at.root
        && kind == Kind::Path
        && let Some(problem) = root_problem(&r.value)
    {
        errors.push(
            r.span,
            format!(
                "`root = \"{}\"` {problem}: the root confines every path the model sends, so it \
                 must be an absolute directory below the file-system root, e.g. \
                 `root = \"/srv/data\"`",
                r.value
            ),
        );
    }
    if let Some(r) = &at.root
        && kind != Kind::Path
    {
        errors.push(
            r.span,
            format!(
                "`root` confines paths, but `{}` is not a path field: use a `PathBuf` type or \
                 `kind = \"path\"`, or remove `root`",
                arg.name
            ),
        );
    }

    // Rule 16: collections on high-risk tools are bounded.
    let collection = collection(&arg.field_ty);
    if high && collection.is_some() && at.max_items.is_none() {
        errors.spanned(
            &arg.ty,
            format!(
                "unbounded collection `{}` on a {}-risk tool: a model can send any number of \
                 items here, each one an effect. Add `#[arg(max_items = N)]` with the largest \
                 number the tool should ever handle in one call",
                arg.name,
                decl.risk().name()
            ),
        );
    }
    if let Some(m) = &at.max_items {
        if collection.is_none() {
            errors.push(
                m.span,
                format!(
                    "`max_items` bounds a collection (`Vec`, slice, set or map), but `{}` is not \
                     one: remove it (use `max_len` for strings, `max` for numbers)",
                    arg.name
                ),
            );
        } else if m.value == 0 {
            errors.push(
                m.span,
                "`max_items = 0` only admits an empty collection: give the largest number of items \
                 allowed, or remove the parameter",
            );
        }
    }

    // Rule 8: every parameter of a high-risk tool is described.
    if high && arg.description().is_none_or(|d| d.trim().is_empty()) {
        errors.spanned(
            &arg.tokens,
            format!(
                "parameter `{}` of a {}-risk tool has no description: the model must know exactly \
                 what it sets. Add a doc comment (`/// ...`) above it or \
                 `#[arg(description = \"...\")]`",
                arg.name,
                decl.risk().name()
            ),
        );
    }

    // Constraints must mean something for the field's JSON type, or they would silently check
    // nothing.
    let numeric = matches!(
        base.as_deref(),
        Some(
            "u8" | "u16"
                | "u32"
                | "u64"
                | "u128"
                | "usize"
                | "i8"
                | "i16"
                | "i32"
                | "i64"
                | "i128"
                | "isize"
                | "f32"
                | "f64"
                | "bool"
        )
    );
    if numeric {
        for (key, span) in [
            ("min_len", at.min_len.as_ref().map(|v| v.span)),
            ("max_len", at.max_len.as_ref().map(|v| v.span)),
            ("pattern", at.pattern.as_ref().map(|v| v.span)),
        ] {
            if let Some(span) = span {
                errors.push(
                    span,
                    format!(
                        "`{key}` constrains strings, but `{}` is a number or boolean, so it would \
                         check nothing. Use `min`/`max` for numbers, or remove it",
                        arg.name
                    ),
                );
            }
        }
    }
    if stringy {
        for (key, span) in [
            ("min", at.min.as_ref().map(|v| v.span)),
            ("max", at.max.as_ref().map(|v| v.span)),
        ] {
            if let Some(span) = span {
                errors.push(
                    span,
                    format!(
                        "`{key}` bounds numbers, but `{}` is a string, so it would check nothing. \
                         Use `{key}_len` to bound its length, or remove it",
                        arg.name
                    ),
                );
            }
        }
    }

    if let (Some(lo), Some(hi)) = (&at.min_len, &at.max_len)
        && lo.value > hi.value
    {
        errors.push(
            lo.span,
            "`min_len` is greater than `max_len`: no value could pass",
        );
    }
    if let (Some(lo), Some(hi)) = (&at.min, &at.max)
        && lo.value.value > hi.value.value
    {
        errors.push(lo.span, "`min` is greater than `max`: no value could pass");
    }
    if decl.key_argument() && arg.name == "idempotency_key" {
        errors.push(
            arg.ident.span(),
            "`idempotent` adds the `idempotency_key` argument itself and keeps it from the \
             handler: remove this parameter (or use `idempotent(key = \"host\")`)",
        );
    }
}

/// The block-level rules of `#[toolset]`: an inherent, non-generic `impl` with no method named
/// `tools` (the generated constructor).
pub fn toolset_block(block: &syn::ItemImpl, errors: &mut Errors) {
    if let Some((_, path, _)) = &block.trait_ {
        errors.push(
            path.span(),
            "`#[toolset]` goes on an inherent `impl` block, not a trait impl: write \
             `impl Bank { ... }`",
        );
    }
    if let Some(param) = block.generics.params.first() {
        errors.spanned(
            param,
            "a toolset cannot be generic: the tools' state type must be concrete. Implement it \
             on a concrete type",
        );
    }
    for item in &block.items {
        if let syn::ImplItem::Fn(method) = item
            && method.sig.ident == "tools"
        {
            errors.push(
                method.sig.ident.span(),
                "`#[toolset]` generates `tools()` on this type: rename this method (its tool name \
                 can stay `tools` with `#[tool(name = \"tools\")]`)",
            );
        }
    }
}

/// Rule 12: tool names are unique within a toolset; no two methods generate structs of one name
/// (`transfer_funds` and `transferFunds` both give `TransferFunds`), and no generated struct takes
/// the name of the toolset's own type.
pub fn toolset(self_ty: &syn::Type, decls: &[ToolDecl], errors: &mut Errors) {
    if let Some(own) = last_ident(self_ty) {
        for d in decls {
            let generated = crate::expand::tool_ident(d);
            if generated == own {
                errors.push(
                    d.fn_ident.span(),
                    format!(
                        "the tool struct of method `{}` would be named `{own}`, like the toolset's \
                         own type: rename the method (keep the tool's name with \
                         `#[tool(name = \"{}\")]`)",
                        d.fn_ident,
                        d.name()
                    ),
                );
            }
        }
    }
    let mut structs: HashMap<String, String> = HashMap::new();
    for d in decls {
        let tool = crate::expand::tool_ident(d).to_string();
        let args = format!("{tool}Args");
        let clash = [&tool, &args]
            .into_iter()
            .find_map(|g| structs.get(g).map(|first| (g.clone(), first.clone())));
        match clash {
            Some((generated, first)) => errors.push(
                d.fn_ident.span(),
                format!(
                    "methods `{first}` and `{}` would both generate a struct named \
                     `{generated}`: rename one of them (the tool's name can stay with \
                     `#[tool(name = \"...\")]`)",
                    d.fn_ident
                ),
            ),
            None => {
                structs.insert(tool, d.fn_ident.to_string());
                structs.insert(args, d.fn_ident.to_string());
            }
        }
    }
    let mut seen: HashSet<String> = HashSet::new();
    for d in decls {
        let name = d.name();
        if !seen.insert(name.clone()) {
            errors.push(
                d.name_span(),
                format!(
                    "two tools in this toolset are named `{name}`: the model could not tell them \
                     apart. Give one another name with `#[tool(name = \"...\")]`"
                ),
            );
        }
    }
}

/// What kind of collection a field type is, after looking through `Option<..>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collection {
    /// A JSON array: `Vec`, `VecDeque`, sets, slices (`maxItems`).
    Sequence,
    /// A JSON object of arbitrary keys: `HashMap`, `BTreeMap` (`maxProperties`).
    Map,
}

/// The collection kind of `ty`, if it is one (fixed-size arrays are not: their length is fixed).
pub fn collection(ty: &syn::Type) -> Option<Collection> {
    let ty = through_option(ty);
    if let syn::Type::Slice(_) = ty {
        return Some(Collection::Sequence);
    }
    match last_ident(ty).as_deref() {
        Some(
            "Vec" | "VecDeque" | "LinkedList" | "HashSet" | "BTreeSet" | "IndexSet" | "BinaryHeap",
        ) => Some(Collection::Sequence),
        Some("HashMap" | "BTreeMap" | "IndexMap") => Some(Collection::Map),
        _ => None,
    }
}

/// Why `root` cannot confine paths, if it cannot: it must be absolute (`/srv/data`, `C:\data`),
/// not the file-system root itself, and without `..`.
fn root_problem(root: &str) -> Option<&'static str> {
    let bytes = root.as_bytes();
    let rest = if let Some(rest) = root.strip_prefix('/') {
        rest
    } else if bytes.len() >= 3
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && matches!(bytes[2], b'/' | b'\\')
    {
        &root[3..]
    } else {
        return Some("is not an absolute path");
    };
    let segments: Vec<&str> = rest
        .split(['/', '\\'])
        .filter(|s| !s.is_empty() && *s != ".")
        .collect();
    if segments.contains(&"..") {
        Some("contains `..`")
    } else if segments.is_empty() {
        Some("is the file-system root, which confines nothing")
    } else {
        None
    }
}

/// `^[a-zA-Z][a-zA-Z0-9_]{0,63}$`.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() => {}
        _ => return false,
    }
    name.len() <= 64 && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn suggest_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    while s.starts_with(|c: char| !c.is_ascii_alphabetic()) && !s.is_empty() {
        s.remove(0);
    }
    if s.is_empty() {
        s.push_str("my_tool");
    }
    s.truncate(64);
    s
}

#[cfg(test)]
mod tests {
    use super::{is_identity_name, is_money_name, root_problem, valid_name};

    #[test]
    fn identity_names() {
        for name in [
            "tenant",
            "tenants",
            "tenant_ids",
            "TenantId",
            "TENANT_ID",
            "owner_id",
            "user",
            "users",
            "userIds",
            "principal",
            "org_id",
            "organization_id",
            "approvers",
            "is_admin",
            "r#role",
            "approved",
        ] {
            assert!(is_identity_name(name), "{name}");
        }
        for name in [
            "subject_line",
            "username_hint",
            "owner",
            "org",
            "account_id",
            "roleplay",
        ] {
            assert!(!is_identity_name(name), "{name}");
        }
    }

    #[test]
    fn money_names() {
        for name in [
            "amount",
            "total_usd",
            "unitPrice",
            "FEE_CENTS",
            "costs",
            "BALANCE",
        ] {
            assert!(is_money_name(name), "{name}");
        }
        for name in ["ratio", "subtotalish", "coffee", "count"] {
            assert!(!is_money_name(name), "{name}");
        }
    }

    #[test]
    fn roots() {
        assert_eq!(root_problem("/srv/data"), None);
        assert_eq!(root_problem("C:\\data"), None);
        assert!(root_problem("/").is_some());
        assert!(root_problem("//.").is_some());
        assert!(root_problem("data").is_some());
        assert!(root_problem("/srv/../etc").is_some());
    }

    #[test]
    fn names() {
        assert!(valid_name("transfer_funds"));
        assert!(valid_name(&"a".repeat(64)));
        assert!(!valid_name(&"a".repeat(65)));
        assert!(!valid_name("1x"));
        assert!(!valid_name("send-mail"));
        assert!(!valid_name(""));
    }
}
