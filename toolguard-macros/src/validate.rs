//! The compile-time safety rules. The rules that need no syntax tree live in `toolguard-rules`
//! (shared with run-time declarations): this module builds its declaration model from the parsed
//! tool, reports each violation as a `syn::Error` on the offending attribute, parameter or type,
//! and adds the rules that only a syntax tree can check (a `Command` parameter, toolset blocks).
//! See `RULES.md`.

use std::collections::{HashMap, HashSet};

use proc_macro2::Span;
use syn::spanned::Spanned;
use toolguard_rules::decl::{self as rules, Scalar, Site, Violation};

pub(crate) use toolguard_rules::decl::Collection;

use crate::model::{ArgDecl, Errors, Kind, ToolDecl};
use crate::parse::{infer_kind, innermost, last_ident, through_option};

/// The kind a field has: `kind = ...`, else inferred from its type.
pub(crate) fn arg_kind(arg: &ArgDecl) -> Kind {
    match &arg.attrs.kind {
        Some(k) => k.value.unwrap_or(Kind::Opaque),
        None => infer_kind(&arg.ty),
    }
}

/// Whether `arg` is the tool's amount field.
pub(crate) fn is_amount(decl: &ToolDecl, arg: &ArgDecl) -> bool {
    decl.amount_field().is_some_and(|a| a.name == arg.name)
}

/// Checks one tool against every rule that concerns a single declaration.
pub(crate) fn tool(decl: &ToolDecl, errors: &mut Errors) {
    for violation in rules::check_with(&model(decl), rules::Syntax::Attributes) {
        report(decl, violation, errors);
    }
    for arg in &decl.args {
        // Rule 7: a `Command` is a type, which only the syntax tree shows.
        if last_ident(innermost(&arg.ty)).as_deref() == Some("Command") {
            errors.spanned(
                &arg.ty,
                format!(
                    "parameter `{}` is a `Command`: a model must never choose what runs. Take \
                     structured arguments (an enum of allowed operations) and build the command \
                     in the handler",
                    arg.name
                ),
            );
        }
    }
}

/// The shared rules' model of `decl`.
fn model(decl: &ToolDecl) -> rules::ToolDecl {
    let a = &decl.attrs;
    let mut t = rules::ToolDecl::new(decl.name(), decl.description().map(str::to_owned));
    t.risk = decl.risk();
    t.read_only = a.read_only.is_some();
    t.idempotent = a.idempotent.as_ref().map(|k| k.value);
    t.key_wins = a.key_wins.is_some();
    t.approval_over = a.approval_over.as_ref().map(|v| v.value);
    t.approvals = a.approvals.as_ref().map(|v| v.value);
    t.timeout_ms = a.timeout_ms.as_ref().map(|v| v.value);
    t.revision = a.revision.as_ref().map(|v| v.value);
    // `untrusted_fields` declares where the result comes from even when its paths were
    // refused (reported on each path, not again as an undeclared output).
    t.output = a.output.as_ref().map(|v| v.value).or(a
        .untrusted_fields
        .as_ref()
        .map(|_| rules::OutputTrust::Untrusted));
    t.untrusted_fields = untrusted_fields(decl);
    t.egress = a.egress.as_ref().map(|v| v.value);
    t.returns_text = returns_text(decl);
    // The generated code asserts `AmountType` on the amount field's resolved type.
    t.compiler_checks_amount = true;
    // A parameter named `amount` is the amount unless another one is marked `#[arg(amount)]`:
    // in a signature the name is the developer's own declaration.
    let marked = decl.args.iter().any(|a| a.attrs.amount.is_some());
    t.fields = decl
        .args
        .iter()
        .map(|arg| field_model(arg, !marked && arg.name == "amount"))
        .collect();
    t
}

fn field_model(arg: &ArgDecl, named_amount: bool) -> rules::FieldDecl {
    let at = &arg.attrs;
    let mut f = rules::FieldDecl::new(arg.name.clone(), arg_kind(arg), scalar(&arg.ty));
    f.description = arg.description().map(str::to_owned);
    f.refused_kind = at.refused_kind.as_ref().map(|k| k.value.clone());
    f.collection = collection(&arg.field_ty);
    f.amount = at.amount.is_some() || named_amount;
    f.sensitive = at.sensitive.is_some();
    f.root = at.root.as_ref().map(|v| v.value.clone());
    // `SafePath` checks its own paths (relative, no `..`) when it is deserialized.
    f.confined = last_ident(innermost(&arg.ty)).as_deref() == Some("SafePath");
    f.min_len = at.min_len.as_ref().map(|v| v.value);
    f.max_len = at.max_len.as_ref().map(|v| v.value);
    f.pattern = at.pattern.as_ref().map(|v| v.value.clone());
    f.min = at.min.as_ref().map(|v| v.value.value);
    f.max = at.max.as_ref().map(|v| v.value.value);
    f.max_items = at.max_items.as_ref().map(|v| v.value);
    f
}

/// The result paths of `untrusted_fields`, as written.
pub(crate) fn untrusted_fields(decl: &ToolDecl) -> Vec<String> {
    decl.attrs
        .untrusted_fields
        .as_ref()
        .map(|l| l.value.iter().map(|p| p.value.clone()).collect())
        .unwrap_or_default()
}

/// Whether a result of type `ty` is free-form text: a string, a JSON value, or a collection or
/// option of them.
/// Whether the tool's result is free-form text by its type's name (`String`, `Cow`, `Value`).
pub(crate) fn returns_text(decl: &ToolDecl) -> bool {
    decl.ok_ty.as_ref().is_some_and(is_text)
}

fn is_text(ty: &syn::Type) -> bool {
    matches!(
        last_ident(innermost(ty)).as_deref(),
        Some("String" | "str" | "Cow" | "Value")
    )
}

/// What each value of a field of type `ty` holds, from the innermost type's name.
fn scalar(ty: &syn::Type) -> Scalar {
    match last_ident(innermost(ty)).as_deref() {
        Some("String" | "str" | "Cow") => Scalar::Text,
        Some("PathBuf" | "Path") => Scalar::Path,
        Some(
            "u8" | "u16" | "u32" | "u64" | "u128" | "usize" | "i8" | "i16" | "i32" | "i64" | "i128"
            | "isize",
        ) => Scalar::Integer,
        Some("f32" | "f64") => Scalar::Float,
        Some("bool") => Scalar::Boolean,
        _ => Scalar::Other,
    }
}

/// Reports `v` on the tokens its site names.
fn report(decl: &ToolDecl, v: Violation, errors: &mut Errors) {
    let arg = |i: usize| &decl.args[i];
    match v.site {
        Site::Tool => errors.push(decl.fn_ident.span(), v.message),
        Site::ToolName => errors.push(decl.name_span(), v.message),
        Site::ToolOption(key) => errors.push(tool_option_span(decl, key), v.message),
        Site::Field(i) => errors.spanned(&arg(i).tokens, v.message),
        Site::FieldName(i) => errors.push(arg(i).ident.span(), v.message),
        Site::FieldType(i) => errors.spanned(&arg(i).ty, v.message),
        Site::FieldOption(i, key) => errors.push(arg_option_span(arg(i), key), v.message),
    }
}

fn tool_option_span(decl: &ToolDecl, key: &str) -> Span {
    let a = &decl.attrs;
    let span = match key {
        "risk" => a.risk.as_ref().map(|v| v.span),
        "read_only" => a.read_only,
        "idempotent" => a.idempotent.as_ref().map(|v| v.span),
        "key_wins" => a.key_wins,
        "approval_over" => a.approval_over.as_ref().map(|v| v.span),
        "approvals" => a.approvals.as_ref().map(|v| v.span),
        "timeout_ms" => a.timeout_ms.as_ref().map(|v| v.span),
        "revision" => a.revision.as_ref().map(|v| v.span),
        "output" => a.output.as_ref().map(|v| v.span),
        "untrusted_fields" => a.untrusted_fields.as_ref().map(|v| v.span),
        "egress" => a.egress.as_ref().map(|v| v.span),
        _ => None,
    };
    span.unwrap_or_else(|| decl.fn_ident.span())
}

fn arg_option_span(arg: &ArgDecl, key: &str) -> Span {
    let a = &arg.attrs;
    let span = match key {
        "sensitive" => a.sensitive,
        "amount" => a.amount,
        "kind" => a
            .refused_kind
            .as_ref()
            .map(|v| v.span)
            .or(a.kind.as_ref().map(|v| v.span)),
        "root" => a.root.as_ref().map(|v| v.span),
        "min_len" => a.min_len.as_ref().map(|v| v.span),
        "max_len" => a.max_len.as_ref().map(|v| v.span),
        "pattern" => a.pattern.as_ref().map(|v| v.span),
        "min" => a.min.as_ref().map(|v| v.span),
        "max" => a.max.as_ref().map(|v| v.span),
        "max_items" => a.max_items.as_ref().map(|v| v.span),
        _ => None,
    };
    span.unwrap_or_else(|| arg.ident.span())
}

/// The block-level rules of `#[toolset]`: an inherent, non-generic `impl` with no method named
/// `tools` (the generated constructor).
pub(crate) fn toolset_block(block: &syn::ItemImpl, errors: &mut Errors) {
    if let Some((path, _)) = &block.trait_ {
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
pub(crate) fn toolset(self_ty: &syn::Type, decls: &[ToolDecl], errors: &mut Errors) {
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
        let fields = format!("{tool}Fields");
        let clash = [&tool, &args, &fields]
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
                for generated in [tool, args, fields] {
                    structs.insert(generated, d.fn_ident.to_string());
                }
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

/// The collection kind of `ty`, if it is one (fixed-size arrays are not: their length is fixed).
pub(crate) fn collection(ty: &syn::Type) -> Option<Collection> {
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
