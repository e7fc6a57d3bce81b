//! Reading `#[tool(...)]`, `#[arg(...)]` and function signatures into the [`model`](crate::model).
//!
//! Parsing never stops at the first problem: every error is collected in [`Errors`] and reported
//! together. Signature-shape rules (receiver, `ctx` position, generics, return type) are checked
//! here because they decide what the declaration is.

use proc_macro2::{Span, TokenStream};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Expr, ExprLit, ExprUnary, FnArg, GenericArgument, GenericParam, Lit, Meta, Pat,
    PatType, PathArguments, ReturnType, Signature, Token, Type, UnOp, Visibility,
};

use toolguard_rules::kinds::REFUSED_KINDS;
use toolguard_rules::suggest::suggestion_and_list;

use crate::model::{
    ArgAttrs, ArgDecl, EgressDecl, Errors, KeySource, Kind, Number, OutputTrust, Receiver, Risk,
    Role, Spanned as Sp, ToolAttrs, ToolDecl, unraw,
};

/// Keys `#[tool(...)]` accepts.
pub(crate) const TOOL_KEYS: [&str; 16] = [
    "name",
    "description",
    "risk",
    "read_only",
    "idempotent",
    "key_wins",
    "approval_over",
    "approvals",
    "timeout_ms",
    "revision",
    "output",
    "untrusted_fields",
    "egress",
    "preflight",
    "authorize",
    "reconcile",
];

/// Keys `#[arg(...)]` accepts.
pub(crate) const ARG_KEYS: [&str; 12] = [
    "description",
    "min_len",
    "max_len",
    "pattern",
    "min",
    "max",
    "sensitive",
    "amount",
    "kind",
    "root",
    "max_items",
    "role",
];

/// Parses the tokens inside `#[tool(...)]`.
pub(crate) fn tool_attrs(tokens: TokenStream, errors: &mut Errors) -> ToolAttrs {
    let mut out = ToolAttrs::default();
    let metas = match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(tokens) {
        Ok(m) => m,
        Err(e) => {
            errors.add(syn::Error::new(
                e.span(),
                format!(
                    "{e}; `#[tool]` takes a comma-separated list such as \
                     `#[tool(risk = \"high\", idempotent, approval_over = 10_000)]`"
                ),
            ));
            return out;
        }
    };
    for meta in metas {
        let key = meta_key(&meta);
        let span = meta.span();
        match key.as_str() {
            "name" => set(
                &mut out.name,
                string_value(&meta, errors),
                span,
                &key,
                errors,
            ),
            "description" => set(
                &mut out.description,
                string_value(&meta, errors),
                span,
                &key,
                errors,
            ),
            "risk" => {
                let v = string_value(&meta, errors).and_then(|s| match Risk::from_name(&s.value) {
                    Some(r) => Some(Sp::new(r, s.span)),
                    None => {
                        errors.push(s.span, Risk::parse(&s.value).err().unwrap_or_default());
                        None
                    }
                });
                set(&mut out.risk, v, span, &key, errors)
            }
            "read_only" => set(&mut out.read_only, flag(&meta, errors), span, &key, errors),
            "output" => {
                let v = output_value(&meta, errors);
                set(&mut out.output, v, span, &key, errors)
            }
            "untrusted_fields" => {
                let v = result_paths(&meta, errors);
                set(&mut out.untrusted_fields, v, span, &key, errors)
            }
            "egress" => {
                let v = egress_value(&meta, errors);
                set(&mut out.egress, v, span, &key, errors)
            }
            "key_wins" => set(&mut out.key_wins, flag(&meta, errors), span, &key, errors),
            "idempotent" => {
                let v = idempotent_value(&meta, errors);
                set(&mut out.idempotent, v, span, &key, errors)
            }
            "approval_over" | "approvals" | "timeout_ms" | "revision" => {
                let v = int_value(&meta, errors);
                let slot = match key.as_str() {
                    "approval_over" => &mut out.approval_over,
                    "approvals" => &mut out.approvals,
                    "timeout_ms" => &mut out.timeout_ms,
                    _ => &mut out.revision,
                };
                set(slot, v, span, &key, errors)
            }
            "preflight" | "authorize" | "reconcile" => {
                let v = path_value(&meta, errors);
                let slot = match key.as_str() {
                    "preflight" => &mut out.preflight,
                    "authorize" => &mut out.authorize,
                    _ => &mut out.reconcile,
                };
                set(slot, v, span, &key, errors)
            }
            _ => unknown_key(&meta, &key, "tool", &TOOL_KEYS, errors),
        }
    }
    out
}

/// Parses one `#[arg(...)]` attribute into `out`.
pub(crate) fn arg_attrs(attr: &Attribute, out: &mut ArgAttrs, errors: &mut Errors) {
    let Some(metas) = arg_metas(attr, errors) else {
        return;
    };
    for meta in metas {
        arg_option(&meta, out, errors);
    }
}

/// The comma-separated options of an `#[arg(...)]` attribute, or `None` after reporting why
/// they cannot be read.
fn arg_metas(attr: &Attribute, errors: &mut Errors) -> Option<Punctuated<Meta, Token![,]>> {
    let Meta::List(list) = &attr.meta else {
        errors.spanned(
            attr,
            "`#[arg]` needs options, e.g. `#[arg(max_len = 140)]`; remove it if there are none",
        );
        return None;
    };
    match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(list.tokens.clone()) {
        Ok(m) => Some(m),
        Err(e) => {
            errors.add(syn::Error::new(
                e.span(),
                format!(
                    "{e}; `#[arg]` takes a comma-separated list such as \
                     `#[arg(max_len = 140, description = \"...\")]`"
                ),
            ));
            None
        }
    }
}

/// Stores one `#[arg(...)]` option in its slot of `out`, reporting an unknown or repeated key.
fn arg_option(meta: &Meta, out: &mut ArgAttrs, errors: &mut Errors) {
    let key = meta_key(meta);
    let span = meta.span();
    match key.as_str() {
        "description" | "pattern" | "root" => {
            let v = string_value(meta, errors);
            let slot = match key.as_str() {
                "description" => &mut out.description,
                "pattern" => &mut out.pattern,
                _ => &mut out.root,
            };
            set(slot, v, span, &key, errors)
        }
        "min_len" | "max_items" | "max_len" => {
            let v = int_value(meta, errors);
            let slot = match key.as_str() {
                "min_len" => &mut out.min_len,
                "max_items" => &mut out.max_items,
                _ => &mut out.max_len,
            };
            set(slot, v, span, &key, errors)
        }
        "min" | "max" => {
            let v = number_value(meta, errors);
            let slot = if key == "min" {
                &mut out.min
            } else {
                &mut out.max
            };
            set(slot, v, span, &key, errors)
        }
        "sensitive" | "amount" => {
            let v = flag(meta, errors);
            let slot = if key == "sensitive" {
                &mut out.sensitive
            } else {
                &mut out.amount
            };
            set(slot, v, span, &key, errors)
        }
        "kind" => {
            let v = kind_value(meta, out, errors);
            set(&mut out.kind, v, span, &key, errors)
        }
        "role" => {
            let v = string_value(meta, errors).and_then(|s| match Role::parse(&s.value) {
                Ok(role) => Some(Sp::new(role, s.span)),
                Err(message) => {
                    errors.push(s.span, message);
                    None
                }
            });
            set(&mut out.role, v, span, &key, errors)
        }
        _ => unknown_key(meta, &key, "arg", &ARG_KEYS, errors),
    }
}

/// The value of `kind = "..."`: a known kind, or `None` inside for a kind that is refused (kept
/// in `out.refused_kind` for `validate` to explain) or unknown (reported here).
fn kind_value(meta: &Meta, out: &mut ArgAttrs, errors: &mut Errors) -> Option<Sp<Option<Kind>>> {
    string_value(meta, errors).map(|s| {
        let kind = Kind::from_name(&s.value);
        match s.value.as_str() {
            _ if kind.is_some() => {}
            // Refused with its reason by `validate`.
            k if REFUSED_KINDS.contains(&k) => out.refused_kind = Some(s.clone()),
            other => errors.push(s.span, Kind::unknown(other)),
        }
        Sp::new(kind, s.span)
    })
}

/// Reads a function signature (with its attributes) into a [`ToolDecl`], removing the `#[arg]`
/// attributes and doc comments of its parameters from `sig`.
///
/// `in_toolset` says whether it is a method of a `#[toolset]` block.
pub(crate) fn tool_decl(
    attrs: ToolAttrs,
    fn_attrs: &[Attribute],
    vis: &Visibility,
    sig: &mut Signature,
    in_toolset: bool,
    errors: &mut Errors,
) -> ToolDecl {
    refuse_signature_shape(sig, errors);

    let mut receiver = if in_toolset {
        Some(Receiver::None)
    } else {
        None
    };
    let mut ctx_state = None;
    let mut args = Vec::new();
    let mut position = 0usize;
    for input in sig.inputs.iter_mut() {
        match input {
            FnArg::Receiver(r) => {
                if receiver_is_shared_ref(r, in_toolset, errors) {
                    receiver = Some(Receiver::Ref);
                }
                strip_param_attrs(&mut r.attrs);
            }
            FnArg::Typed(pt) => {
                let index = position;
                position += 1;
                if !context_param(pt, index, in_toolset, &mut ctx_state, errors) {
                    args.extend(arg_decl(pt, errors));
                }
            }
        }
    }

    let (ok_ty, err_ty) = result_types(&sig.output, sig.ident.span(), errors);

    let mut doc_lines = Vec::new();
    for a in fn_attrs {
        if a.path().is_ident("doc") {
            doc_line(a, &mut doc_lines);
        }
    }

    ToolDecl {
        fn_ident: sig.ident.clone(),
        vis: vis.clone(),
        is_async: sig.asyncness.is_some(),
        attrs,
        doc: join_doc(&doc_lines),
        ctx_state,
        receiver,
        args,
        ok_ty,
        err_ty,
    }
}

/// Reports signature features a tool function cannot have: type or const generics, `unsafe`,
/// variadic parameters.
fn refuse_signature_shape(sig: &Signature, errors: &mut Errors) {
    for param in &sig.generics.params {
        match param {
            GenericParam::Type(t) => errors.spanned(
                t,
                format!(
                    "tool functions cannot be generic: the argument schema must be one concrete \
                     type. Replace the type parameter `{}` with a concrete type (an enum if several \
                     shapes are allowed)",
                    t.ident
                ),
            ),
            GenericParam::Const(c) => errors.spanned(
                c,
                format!(
                    "tool functions cannot have const generics: the schema must be fixed. Replace \
                     `{}` with a constant or an argument",
                    c.ident
                ),
            ),
            GenericParam::Lifetime(_) => {}
        }
    }
    if let syn::Safety::Unsafe(u) = &sig.safety {
        errors.spanned(
            u,
            "a tool function cannot be `unsafe`: the dispatcher calls it with model-proposed \
             arguments. Make it safe and keep the `unsafe` block inside",
        );
    }
    if let Some(v) = &sig.variadic {
        errors.push(v.span(), "a tool function cannot be variadic");
    }
}

/// Whether a `self` parameter is the one a tool accepts, `&self` in a toolset; reports any other.
fn receiver_is_shared_ref(r: &syn::Receiver, in_toolset: bool, errors: &mut Errors) -> bool {
    if !in_toolset {
        errors.spanned(
            r,
            "`self` in a `#[tool]` function: tools on methods go in an `impl` block \
             marked `#[toolset]`",
        );
    } else if !matches!(r.kind, syn::ReceiverKind::Reference(..)) {
        errors.spanned(
            r,
            "a toolset method cannot take `self` by value: one state value serves \
             every call. Take `&self`",
        );
    } else if matches!(r.kind, syn::ReceiverKind::Reference(_, _, Some(_))) {
        errors.spanned(
            r,
            "a toolset method cannot take `&mut self`: calls run concurrently on \
             shared state. Take `&self` and use interior mutability (a `Mutex`, \
             atomics, a pool) for changes",
        );
    } else {
        return true;
    }
    false
}

/// Whether the parameter at `index` is the `ctx: &ToolContext<S>` context. If it is, checks
/// that it comes first and carries no `#[arg]`, records its state type in `ctx_state` and
/// strips its attributes.
fn context_param(
    pt: &mut PatType,
    index: usize,
    in_toolset: bool,
    ctx_state: &mut Option<Type>,
    errors: &mut Errors,
) -> bool {
    let Some(state) = context_state(&pt.ty, errors) else {
        return false;
    };
    if index != 0 {
        errors.spanned(
            &*pt,
            if in_toolset {
                "`ctx: &ToolContext<_>` must come first, right after `&self`: \
                 move it before the argument parameters"
            } else {
                "`ctx: &ToolContext<_>` must be the first parameter: move it \
                 before the argument parameters"
            },
        );
    } else if ctx_state.is_none() {
        *ctx_state = state;
    }
    for a in pt.attrs.iter().filter(|a| a.path().is_ident("arg")) {
        errors.spanned(
            a,
            "`#[arg]` on the context: `ctx` is the trusted side of the call, not \
             an argument the model sends. Remove the attribute",
        );
    }
    strip_param_attrs(&mut pt.attrs);
    true
}

/// One argument parameter as an [`ArgDecl`], taking its `#[arg]` options and doc comments off
/// the parameter; `None` after reporting a pattern that is not a plain name.
fn arg_decl(pt: &mut PatType, errors: &mut Errors) -> Option<ArgDecl> {
    let mut arg_attrs = ArgAttrs::default();
    let mut doc_lines = Vec::new();
    pt.attrs.retain(|a| {
        if a.path().is_ident("arg") {
            arg_attrs_into(a, &mut arg_attrs, errors);
            false
        } else if a.path().is_ident("doc") {
            doc_line(a, &mut doc_lines);
            false
        } else {
            true
        }
    });
    let ident = match &*pt.pat {
        Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => pi.ident.clone(),
        other => {
            errors.spanned(
                other,
                "tool parameters must be plain names (`to: String`): the name \
                 becomes the argument field's name",
            );
            return None;
        }
    };
    let (field_ty, by_ref) = field_type(&pt.ty, errors);
    Some(ArgDecl {
        name: unraw(&ident),
        ident,
        ty: (*pt.ty).clone(),
        field_ty,
        by_ref,
        doc: join_doc(&doc_lines),
        attrs: arg_attrs,
        tokens: quote::quote!(#pt),
    })
}

fn arg_attrs_into(attr: &Attribute, out: &mut ArgAttrs, errors: &mut Errors) {
    arg_attrs(attr, out, errors);
}

fn strip_param_attrs(attrs: &mut Vec<Attribute>) {
    attrs.retain(|a| !a.path().is_ident("arg") && !a.path().is_ident("doc"));
}

/// If `ty` is `&ToolContext<S>`, `Some(Some(S))` (or `Some(None)` after reporting a malformed one).
fn context_state(ty: &Type, errors: &mut Errors) -> Option<Option<Type>> {
    let (inner, is_ref) = match ty {
        Type::Reference(r) => (&*r.elem, true),
        other => (other, false),
    };
    let Type::Path(tp) = inner else { return None };
    let seg = tp.path.segments.last()?;
    if seg.ident != "ToolContext" {
        return None;
    }
    if !is_ref {
        errors.spanned(
            ty,
            "the context is taken by value, but the dispatcher lends it to the call: take it by \
             reference, `ctx: &ToolContext<S>`",
        );
        return Some(None);
    }
    if let Type::Reference(r) = ty
        && r.mutability.is_some()
    {
        errors.spanned(
            ty,
            "the context is taken by `&mut`, but calls run concurrently and share it: take it by \
             shared reference, `ctx: &ToolContext<S>`",
        );
        return Some(None);
    }
    let state = match &seg.arguments {
        PathArguments::AngleBracketed(ab) => ab.args.iter().find_map(|a| match a {
            GenericArgument::Type(t) => Some(t.clone()),
            _ => None,
        }),
        _ => None,
    };
    if state.is_none() {
        errors.push(
            seg.span(),
            "name the state type of the context: `ctx: &ToolContext<MyState>`",
        );
    }
    Some(state)
}

/// The owned field type of a parameter type, and whether the handler takes a reference to it.
fn field_type(ty: &Type, errors: &mut Errors) -> (Type, bool) {
    match ty {
        Type::Reference(r) => {
            if r.mutability.is_some() {
                errors.spanned(
                    ty,
                    "tool arguments cannot be `&mut`: they are decoded from the model's proposal. \
                     Take the value or a shared reference",
                );
            }
            let owned: Type = match &*r.elem {
                Type::Path(tp) if tp.qself.is_none() && tp.path.is_ident("str") => {
                    syn::parse_quote!(::std::string::String)
                }
                Type::Path(tp)
                    if last_ident(&Type::Path(tp.clone())).as_deref() == Some("Path") =>
                {
                    syn::parse_quote!(::std::path::PathBuf)
                }
                Type::Slice(s) => {
                    let e = &s.elem;
                    syn::parse_quote!(::std::vec::Vec<#e>)
                }
                other => {
                    check_plain(other, errors);
                    other.clone()
                }
            };
            (owned, true)
        }
        other => {
            check_plain(other, errors);
            (other.clone(), false)
        }
    }
}

fn check_plain(ty: &Type, errors: &mut Errors) {
    if let Type::ImplTrait(it) = ty {
        errors.spanned(
            it,
            "tool functions cannot be generic (`impl Trait` is an anonymous type parameter): the \
             argument schema must be one concrete type. Use a concrete type",
        );
    }
}

/// `T` and `E` of a `Result<T, E>` return type.
fn result_types(
    output: &ReturnType,
    fn_span: Span,
    errors: &mut Errors,
) -> (Option<Type>, Option<Type>) {
    const HOW: &str = "a tool must return `Result<T, E>` (written with both parameters), where `T: \
                       Serialize + JsonSchema` is the output and `E: Into<ToolError>`";
    let ty = match output {
        ReturnType::Default => {
            errors.push(fn_span, format!("missing return type: {HOW}"));
            return (None, None);
        }
        ReturnType::Type(_, ty) => ty,
    };
    if let Type::Path(tp) = &**ty
        && tp.qself.is_none()
        && let Some(seg) = tp.path.segments.last()
        && seg.ident == "Result"
        && let PathArguments::AngleBracketed(ab) = &seg.arguments
    {
        let tys: Vec<&Type> = ab
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect();
        if let [ok, err] = tys.as_slice() {
            return (Some((*ok).clone()), Some((*err).clone()));
        }
    }
    errors.spanned(ty, format!("unsupported return type: {HOW}"));
    (None, None)
}

fn doc_line(attr: &Attribute, lines: &mut Vec<String>) {
    if let Meta::NameValue(nv) = &attr.meta
        && let Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) = &nv.value
    {
        for line in s.value().lines() {
            lines.push(line.trim().to_owned());
        }
    }
}

/// Joins doc-comment lines: lines of a paragraph with a space, paragraphs with a blank line.
fn join_doc(lines: &[String]) -> Option<String> {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in lines {
        if line.is_empty() {
            if !current.is_empty() {
                paragraphs.push(std::mem::take(&mut current));
            }
        } else {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(line);
        }
    }
    if !current.is_empty() {
        paragraphs.push(current);
    }
    if paragraphs.is_empty() {
        None
    } else {
        Some(paragraphs.join("\n\n"))
    }
}

fn meta_key(meta: &Meta) -> String {
    let path = meta.path();
    path.segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect::<Vec<_>>()
        .join("::")
}

fn set<T>(slot: &mut Option<T>, value: Option<T>, span: Span, key: &str, errors: &mut Errors) {
    if slot.is_some() {
        errors.push(span, format!("`{key}` is given twice: keep one"));
    } else if value.is_some() {
        *slot = value;
    }
}

/// `untrusted_fields = ["/pointer", ...]`: each a result path, reported on its own literal when
/// it is not one (and then left out of the declaration, so that it is reported once).
fn result_paths(meta: &Meta, errors: &mut Errors) -> Option<Sp<Vec<Sp<String>>>> {
    const USAGE: &str = "`untrusted_fields` takes a list of JSON pointers into the result: \
                         `untrusted_fields = [\"/messages/*/body\"]`";
    let expr = value_expr(meta, "[\"/messages/*/body\"]", errors)?;
    let Expr::Array(list) = expr else {
        errors.push(expr.span(), USAGE);
        // Still a declaration of where the result comes from: reported once, here.
        return Some(Sp::new(Vec::new(), expr.span()));
    };
    let mut paths = Vec::with_capacity(list.elems.len());
    for item in &list.elems {
        match item {
            Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) => match toolguard_rules::result_path::parse(&s.value()) {
                Ok(_) => paths.push(Sp::new(s.value(), s.span())),
                Err(e) => errors.push(s.span(), format!("`untrusted_fields`: {e}")),
            },
            other => errors.push(other.span(), USAGE),
        }
    }
    if list.elems.is_empty() {
        errors.push(
            list.span(),
            "`untrusted_fields = []` lists no place: name the result's untrusted places, or \
             remove the option",
        );
    }
    Some(Sp::new(paths, list.span()))
}

/// `output = "trusted"` or `output = "untrusted"`.
fn output_value(meta: &Meta, errors: &mut Errors) -> Option<Sp<OutputTrust>> {
    let s = string_value(meta, errors)?;
    match OutputTrust::from_name(&s.value) {
        Some(t) => Some(Sp::new(t, s.span)),
        None => {
            errors.push(
                s.span,
                format!(
                    "unknown output trust `{}`: write `output = \"untrusted\"` (mail, web pages, \
                     documents, other users' text) or `output = \"trusted\"` (data the \
                     application produced)",
                    s.value
                ),
            );
            None
        }
    }
}

/// `egress` (open) or `egress = "allowlisted"`.
fn egress_value(meta: &Meta, errors: &mut Errors) -> Option<Sp<EgressDecl>> {
    if let Meta::Path(p) = meta {
        return Some(Sp::new(EgressDecl::Open, p.span()));
    }
    let s = string_value(meta, errors)?;
    if s.value == "allowlisted" {
        return Some(Sp::new(EgressDecl::Allowlisted, s.span));
    }
    errors.push(
        s.span,
        format!(
            "unknown egress `{}`: write `egress` (any destination) or `egress = \"allowlisted\"` \
             (only destinations its `email`/`url` fields' allowlists admit)",
            s.value
        ),
    );
    None
}

fn flag(meta: &Meta, errors: &mut Errors) -> Option<Span> {
    match meta {
        Meta::Path(p) => Some(p.span()),
        _ => {
            let key = meta_key(meta);
            errors.push(
                meta.span(),
                format!("`{key}` is a flag and takes no value: write `{key}`"),
            );
            None
        }
    }
}

fn value_expr<'m>(meta: &'m Meta, example: &str, errors: &mut Errors) -> Option<&'m Expr> {
    match meta {
        Meta::NameValue(nv) => Some(&nv.value),
        _ => {
            let key = meta_key(meta);
            errors.push(
                meta.span(),
                format!("`{key}` needs a value: `{key} = {example}`"),
            );
            None
        }
    }
}

fn string_value(meta: &Meta, errors: &mut Errors) -> Option<Sp<String>> {
    let expr = value_expr(meta, "\"...\"", errors)?;
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => Some(Sp::new(s.value(), s.span())),
        other => {
            errors.push(
                other.span(),
                format!(
                    "`{}` takes a string literal: `{} = \"...\"`",
                    meta_key(meta),
                    meta_key(meta)
                ),
            );
            None
        }
    }
}

fn int_value(meta: &Meta, errors: &mut Errors) -> Option<Sp<u64>> {
    let expr = value_expr(meta, "10_000", errors)?;
    let key = meta_key(meta);
    match expr {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => match i.base10_parse::<u64>() {
            Ok(v) => Some(Sp::new(v, i.span())),
            Err(e) => {
                errors.push(i.span(), format!("`{key}`: {e}"));
                None
            }
        },
        other => {
            errors.push(
                other.span(),
                format!(
                    "`{key}` takes a non-negative integer literal (underscores allowed): \
                     `{key} = 10_000`"
                ),
            );
            None
        }
    }
}

fn number_value(meta: &Meta, errors: &mut Errors) -> Option<Sp<Number>> {
    let expr = value_expr(meta, "0", errors)?;
    let key = meta_key(meta);
    let (neg, lit) = match expr {
        Expr::Lit(ExprLit { lit, .. }) => (false, lit),
        Expr::Unary(ExprUnary {
            op: UnOp::Neg(_),
            expr,
            ..
        }) => match &**expr {
            Expr::Lit(ExprLit { lit, .. }) => (true, lit),
            other => {
                errors.push(
                    other.span(),
                    format!("`{key}` takes a number literal, e.g. `{key} = 1`"),
                );
                return None;
            }
        },
        other => {
            errors.push(
                other.span(),
                format!(
                    "`{}` takes a number literal, e.g. `{} = 1`",
                    meta_key(meta),
                    meta_key(meta)
                ),
            );
            return None;
        }
    };
    let sign = if neg { -1.0 } else { 1.0 };
    match lit {
        Lit::Int(i) => match i.base10_parse::<i128>() {
            Ok(v) => {
                let v = if neg { -v } else { v };
                Some(Sp::new(
                    Number {
                        value: v as f64,
                        integer: Some(v),
                    },
                    expr.span(),
                ))
            }
            Err(e) => {
                errors.push(i.span(), e.to_string());
                None
            }
        },
        Lit::Float(f) => match f.base10_parse::<f64>() {
            Ok(v) if v.is_finite() => Some(Sp::new(
                Number {
                    value: sign * v,
                    integer: None,
                },
                expr.span(),
            )),
            Ok(_) => {
                errors.push(f.span(), format!("`{key}` must be a finite number"));
                None
            }
            Err(e) => {
                errors.push(f.span(), e.to_string());
                None
            }
        },
        other => {
            errors.push(
                other.span(),
                format!("`{key}` takes a number literal, e.g. `{key} = 1`"),
            );
            None
        }
    }
}

fn path_value(meta: &Meta, errors: &mut Errors) -> Option<syn::Path> {
    let expr = value_expr(meta, "path::to::function", errors)?;
    match expr {
        Expr::Path(p) if p.qself.is_none() => Some(p.path.clone()),
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => match s.parse::<syn::Path>() {
            Ok(p) => Some(p),
            Err(_) => {
                errors.push(
                    s.span(),
                    "expected the path of a function, e.g. `check_balance`",
                );
                None
            }
        },
        other => {
            errors.push(
                other.span(),
                format!(
                    "`{}` takes the path of an `async fn(&ToolContext<S>, &Args) -> Result<(), \
                     ToolError>`, e.g. `{} = check_balance`",
                    meta_key(meta),
                    meta_key(meta)
                ),
            );
            None
        }
    }
}

fn idempotent_value(meta: &Meta, errors: &mut Errors) -> Option<Sp<KeySource>> {
    match meta {
        Meta::Path(p) => Some(Sp::new(KeySource::Argument, p.span())),
        Meta::List(list) => {
            let inner =
                match Punctuated::<Meta, Token![,]>::parse_terminated.parse2(list.tokens.clone()) {
                    Ok(m) => m,
                    Err(e) => {
                        errors.add(e);
                        return None;
                    }
                };
            let mut source = KeySource::Argument;
            for m in inner {
                let key = meta_key(&m);
                if key != "key" {
                    errors.push(
                        m.span(),
                        format!(
                            "unknown `idempotent` option `{key}`: the only option is \
                             `key = \"host\"` or `key = \"argument\"`"
                        ),
                    );
                    continue;
                }
                if let Some(s) = string_value(&m, errors) {
                    match s.value.as_str() {
                        "host" => source = KeySource::Host,
                        "argument" => source = KeySource::Argument,
                        other => errors.push(
                            s.span,
                            format!(
                                "unknown key source `{other}`: use `\"host\"` (the host sets \
                                 `ToolCall::idempotency_key`) or `\"argument\"` (the model sends an \
                                 `idempotency_key` argument)"
                            ),
                        ),
                    }
                }
            }
            Some(Sp::new(source, list.span()))
        }
        Meta::NameValue(nv) => {
            errors.push(
                nv.span(),
                "write `idempotent` (key in the arguments) or `idempotent(key = \"host\")`",
            );
            None
        }
    }
}

fn unknown_key(meta: &Meta, key: &str, attr: &str, known: &[&str], errors: &mut Errors) {
    errors.push(
        meta.path().span(),
        format!(
            "unknown `#[{attr}]` option `{key}`{}",
            suggestion_and_list(key, known, "options")
        ),
    );
}

/// The last path segment's identifier of `ty` (through references and parentheses).
pub(crate) fn last_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(tp) => tp.path.segments.last().map(|s| s.ident.to_string()),
        Type::Reference(r) => last_ident(&r.elem),
        Type::Paren(p) => last_ident(&p.elem),
        Type::Group(g) => last_ident(&g.elem),
        _ => None,
    }
}

/// The first generic type argument of `ty`'s last segment.
pub(crate) fn first_type_arg(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Path(tp) => match &tp.path.segments.last()?.arguments {
            PathArguments::AngleBracketed(ab) => ab.args.iter().find_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            }),
            _ => None,
        },
        Type::Reference(r) => first_type_arg(&r.elem),
        Type::Paren(p) => first_type_arg(&p.elem),
        Type::Group(g) => first_type_arg(&g.elem),
        _ => None,
    }
}

/// `ty` is `Option<..>`.
pub(crate) fn is_option(ty: &Type) -> bool {
    last_ident(ty).as_deref() == Some("Option")
}

/// `ty` is a `Vec<..>` or slice, after looking through `Option<..>`.
pub(crate) fn is_sequence(ty: &Type) -> bool {
    let ty = through_option(ty);
    matches!(ty, Type::Slice(_) | Type::Array(_)) || last_ident(ty).as_deref() == Some("Vec")
}

/// `Option<T>` → `T`, anything else unchanged.
pub(crate) fn through_option(ty: &Type) -> &Type {
    if is_option(ty) {
        first_type_arg(ty).unwrap_or(ty)
    } else {
        ty
    }
}

/// `ty` with every `Option<..>`, `Vec<..>`, `Box<..>`, slice, array and reference removed.
pub(crate) fn innermost(ty: &Type) -> &Type {
    match ty {
        Type::Reference(r) => innermost(&r.elem),
        Type::Paren(p) => innermost(&p.elem),
        Type::Group(g) => innermost(&g.elem),
        Type::Slice(s) => innermost(&s.elem),
        Type::Array(a) => innermost(&a.elem),
        _ => match last_ident(ty).as_deref() {
            Some("Option" | "Vec" | "Box") => match first_type_arg(ty) {
                Some(inner) => innermost(inner),
                None => ty,
            },
            _ => ty,
        },
    }
}

/// The kind inferred from the type's name, when `kind = ...` is not given.
pub(crate) fn infer_kind(ty: &Type) -> Kind {
    match last_ident(innermost(ty)).as_deref() {
        Some("Identifier") => Kind::Identifier,
        Some("Email") => Kind::Email,
        Some("Url") => Kind::Url,
        Some("SafePath" | "PathBuf" | "Path") => Kind::Path,
        Some("Money" | "Cents") => Kind::Money,
        Some("String" | "str" | "Cow") => Kind::Text,
        _ => Kind::Opaque,
    }
}
