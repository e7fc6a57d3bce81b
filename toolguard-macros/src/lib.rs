//! Procedural macros of toolguard: `#[tool]` on functions and `#[toolset]` on `impl` blocks.
//!
//! Use them through the `toolguard` crate, which re-exports them. Each declaration is parsed into
//! a model (`model`), checked against the compile-time safety rules (`validate`, listed in
//! `RULES.md`) and expanded into an arguments struct, a unit tool struct and its `Tool` impl
//! (`expand`). Every problem is a compile error at the offending tokens; the macros never panic.

#![warn(missing_docs)]

mod expand;
mod model;
mod no_free_text;
mod parse;
mod paths;
mod validate;

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::spanned::Spanned;
use syn::{ImplItem, Item, ItemFn, ItemImpl};

use model::Errors;

/// Declares a tool from a function.
///
/// ```ignore
/// /// Moves money between two of the caller's accounts.
/// #[tool(risk = "high", idempotent, approval_over = 10_000)]
/// async fn transfer_funds(
///     ctx: &ToolContext<Bank>,
///     /// Account to debit.
///     #[arg(kind = "identifier", max_len = 34)] from: String,
///     /// Account to credit.
///     #[arg(kind = "identifier", max_len = 34)] to: String,
///     /// Amount in cents.
///     #[arg(min = 1)] amount: u64,
/// ) -> Result<Receipt, ToolError> { ... }
/// ```
///
/// generates `TransferFundsArgs` (the arguments the model proposes), `TransferFunds` (a unit
/// struct implementing `toolguard::Tool<Bank>`), and keeps `transfer_funds` callable as written.
///
/// Tool options: `name`, `description` (default: the doc comment), `risk = "low" | "medium" |
/// "high" | "critical"`, `read_only`, `idempotent` / `idempotent(key = "host")`, `key_wins`,
/// `approval_over = N`, `approvals = N`, `timeout_ms = N`, `revision = N`,
/// `preflight = path`, `authorize = path` (each an
/// `async fn(&ToolContext<S>, &XArgs) -> Result<(), ToolError>`), `reconcile = path` (an
/// `async fn(&ToolContext<S>, &XArgs) -> Result<Reconciled<T>, ToolError>` that finds out what
/// became of an operation whose outcome was unknown).
///
/// Argument options (`#[arg(...)]`): `description` (default: the doc comment), `min_len`,
/// `max_len`, `pattern`, `min`, `max`, `sensitive`, `amount`,
/// `kind = "identifier" | "text" | "name" | "email" | "url" | "path" | "money"`, `root`,
/// `max_items` (on a collection: `maxItems`, or `maxProperties` for a map, in the schema).
///
/// The compile-time safety rules are listed in `RULES.md`.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    tool_impl(attr.into(), item.into()).into()
}

/// Derives `toolguard::NoFreeText` for a struct or enum whose fields all hold no free-form
/// text (numbers, booleans, checked value types, containers of them, other `NoFreeText`
/// types): a read-only tool may then return it without declaring `output`. A field that can
/// hold free text (a `String`, a `serde_json::Value`) is a compile error at that field.
#[proc_macro_derive(NoFreeText)]
pub fn derive_no_free_text(item: TokenStream) -> TokenStream {
    match syn::parse(item) {
        Ok(input) => no_free_text::derive(input).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Declares the tools of an `impl` block: each method marked `#[tool(...)]` becomes a tool over
/// the block's type as state, and `Type::tools()` returns them all.
#[proc_macro_attribute]
pub fn toolset(attr: TokenStream, item: TokenStream) -> TokenStream {
    toolset_impl(attr.into(), item.into()).into()
}

fn tool_impl(attr: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut func: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            let err = syn::Error::new_spanned(
                &item,
                "`#[tool]` goes on a function (`fn` or `async fn`); for methods, mark the `impl` \
                 block `#[toolset]` and its methods `#[tool]`",
            );
            let err = err.to_compile_error();
            return quote!(#err #item);
        }
    };
    let mut errors = Errors::default();
    let attrs = parse::tool_attrs(attr, &mut errors);
    let decl = parse::tool_decl(
        attrs,
        &func.attrs,
        &func.vis,
        &mut func.sig,
        false,
        &mut errors,
    );
    validate::tool(&decl, &mut errors);
    match errors.finish() {
        Ok(()) => {
            let generated = expand::tool(&decl, None);
            quote!(#func #generated)
        }
        Err(e) => {
            let e = e.to_compile_error();
            quote!(#func #e)
        }
    }
}

fn toolset_impl(attr: TokenStream2, item: TokenStream2) -> TokenStream2 {
    let mut errors = Errors::default();
    if !attr.is_empty() {
        errors.push(
            attr.span(),
            "`#[toolset]` takes no options; put them on each `#[tool(...)]`",
        );
    }
    let mut block: ItemImpl = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Impl(i)) => i,
        _ => {
            let err = syn::Error::new_spanned(
                &item,
                "`#[toolset]` goes on an inherent `impl` block (`impl Bank { ... }`) whose methods \
                 are marked `#[tool(...)]`",
            )
            .to_compile_error();
            return quote!(#err #item);
        }
    };
    validate::toolset_block(&block, &mut errors);
    let self_ty = (*block.self_ty).clone();
    let mut decls = Vec::new();
    for item in block.items.iter_mut() {
        let ImplItem::Fn(method) = item else { continue };
        let mut tool_attr = None;
        let mut rest = Vec::new();
        for a in std::mem::take(&mut method.attrs) {
            if a.path().is_ident("tool") && tool_attr.is_none() {
                tool_attr = Some(a);
            } else if a.path().is_ident("tool") {
                errors.push(
                    a.span(),
                    "`#[tool]` is given twice on this method: keep one",
                );
            } else {
                rest.push(a);
            }
        }
        method.attrs = rest;
        let Some(tool_attr) = tool_attr else { continue };
        let tokens = match &tool_attr.meta {
            syn::Meta::Path(_) => TokenStream2::new(),
            syn::Meta::List(l) => l.tokens.clone(),
            syn::Meta::NameValue(nv) => {
                errors.push(nv.span(), "write `#[tool]` or `#[tool(...)]`");
                continue;
            }
        };
        let attrs = parse::tool_attrs(tokens, &mut errors);
        let decl = parse::tool_decl(
            attrs,
            &method.attrs,
            &method.vis,
            &mut method.sig,
            true,
            &mut errors,
        );
        validate::tool(&decl, &mut errors);
        decls.push(decl);
    }
    validate::toolset(&self_ty, &decls, &mut errors);
    match errors.finish() {
        Ok(()) => {
            let tools = decls.iter().map(|d| expand::tool(d, Some(&self_ty)));
            let tools_fn = expand::tools_fn(&self_ty, &decls);
            quote! {
                #block
                #(#tools)*
                #tools_fn
            }
        }
        Err(e) => {
            let e = e.to_compile_error();
            quote!(#block #e)
        }
    }
}
