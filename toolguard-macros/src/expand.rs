//! Code generation: the `<Name>Args` struct, the unit tool struct and its `Tool` impl, and a
//! toolset's `tools()` constructor.

use proc_macro2::{Group, Literal, Span, TokenStream, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Ident, Type};

use crate::model::{ArgDecl, EgressDecl, Number, OutputTrust, Receiver, ToolDecl};
use crate::parse::{is_option, is_sequence};
use crate::paths;
use crate::validate::{Collection, arg_kind, collection, is_amount};

/// Name and pattern of the `idempotency_key` argument `idempotent` adds.
const KEY_FIELD: &str = "idempotency_key";
const KEY_PATTERN: &str = "^[A-Za-z0-9_-]{8,128}$";
const KEY_DESCRIPTION: &str =
    "Stable key for this operation; reuse it when retrying the same action";

/// `transfer_funds` → `TransferFunds`; a name that would not start with a letter gets a `Tool`
/// prefix, so the result is always an identifier.
pub(crate) fn camel(name: &str) -> String {
    let mut out = String::new();
    let mut upper = true;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    if out.starts_with(|c: char| c.is_alphabetic()) {
        out
    } else {
        format!("Tool{out}")
    }
}

/// The unit struct's identifier.
pub(crate) fn tool_ident(decl: &ToolDecl) -> Ident {
    let name = camel(&crate::model::unraw(&decl.fn_ident));
    // `Ident::new` would panic on a string that is not an identifier; parse instead.
    let mut ident =
        syn::parse_str::<Ident>(&name).unwrap_or_else(|_| format_ident!("GeneratedTool"));
    ident.set_span(decl.fn_ident.span());
    ident
}

fn args_ident(decl: &ToolDecl) -> Ident {
    format_ident!("{}Args", tool_ident(decl))
}

/// The identifier of the struct of field names (`TransferFundsFields`).
pub(crate) fn fields_ident(decl: &ToolDecl) -> Ident {
    format_ident!("{}Fields", tool_ident(decl))
}

/// `Tool::NAME`, `Tool::FIELDS` and the struct of field names, so that builder options name the
/// tool and its fields without a hand-typed string.
fn name_constants(decl: &ToolDecl, name: &str) -> TokenStream {
    let vis = &decl.vis;
    let tool_ident = tool_ident(decl);
    let fields_ident = fields_ident(decl);
    let mut idents: Vec<Ident> = decl.args.iter().map(|a| a.ident.clone()).collect();
    let mut names: Vec<String> = decl.args.iter().map(|a| a.name.clone()).collect();
    if decl.key_argument() {
        idents.push(format_ident!("{}", KEY_FIELD));
        names.push(KEY_FIELD.to_owned());
    }
    let docs = names
        .iter()
        .map(|n| format!("`\"{n}\"`: the name of the `{n}` argument field."));
    let struct_doc = format!(
        "The argument field names of the `{name}` tool, as `{tool_ident}::FIELDS`: \
         `{tool_ident}::FIELDS.<field>` is the field's name in the arguments object."
    );
    quote! {
        #[doc = #struct_doc]
        #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::marker::Copy, ::core::cmp::PartialEq, ::core::cmp::Eq)]
        #[allow(dead_code, reason = "generated for builder options; a tool may use none of them")]
        #vis struct #fields_ident {
            #(
                #[doc = #docs]
                pub #idents: &'static str,
            )*
        }

        #[allow(dead_code, reason = "generated for builder options; a tool may use none of them")]
        impl #tool_ident {
            /// The tool's name, as the model calls it and as builder options take it
            /// (`RiskPolicy::max_per_call(Self::NAME, ..)`).
            #vis const NAME: &'static str = #name;
            /// The names of the tool's argument fields (`Self::FIELDS.to`), for builder options
            /// that name a field (`Sanitizer::allow_email_domains(Self::NAME, Self::FIELDS.to, ..)`).
            #vis const FIELDS: #fields_ident = #fields_ident { #(#idents: #names,)* };
        }
    }
}

/// Everything generated for one tool. `self_ty` is the toolset's type for methods.
pub(crate) fn tool(decl: &ToolDecl, self_ty: Option<&Type>) -> TokenStream {
    let k = paths::krate();
    let p = paths::private();
    let vis = &decl.vis;
    let tool_ident = tool_ident(decl);
    let args_ident = args_ident(decl);
    let name = decl.name();
    let description = decl.description().unwrap_or_default().to_owned();
    let tool_doc = if description.is_empty() {
        format!("The `{name}` tool.")
    } else {
        description.clone()
    };
    let (impl_generics, state) = impl_state(decl, self_ty);
    let ok_ty = ok_type(decl);

    let args_struct = args_struct(decl, &name, &args_ident);
    let name_constants = name_constants(decl, &name);
    let type_checks = type_checks(decl, &ok_ty);
    let spec = spec_body(decl, &name, &description, &args_ident, &ok_ty);
    let hook = |method: &str, path: &Option<syn::Path>| {
        path.as_ref()
            .map(|path| hook_method(method, path, self_ty, &state, &args_ident))
    };
    let preflight = hook("preflight", &decl.attrs.preflight);
    let authorize = hook("authorize", &decl.attrs.authorize);
    let reconcile = hook("reconcile", &decl.attrs.reconcile);
    let (run, call) = call_method(decl, self_ty, &impl_generics, &state, &args_ident, &ok_ty);

    quote! {
        #args_struct

        #[doc = #tool_doc]
        #[derive(::core::fmt::Debug, ::core::clone::Clone, ::core::marker::Copy, ::core::default::Default)]
        #vis struct #tool_ident;

        #name_constants

        #type_checks

        #run

        // The output bound is stated higher-ranked so that it is checked where the tool is
        // used, not here: an unfit output type is then reported once, by `output_check`.
        impl #impl_generics #k::Tool<#state> for #tool_ident
        where
            for<'__tg> #ok_ty: #p::ToolOutput,
        {
            type Args = #args_ident;
            type Output = #ok_ty;

            fn spec(&self) -> #k::ToolSpec {
                #spec
            }

            fn static_name(&self) -> ::core::option::Option<#k::ArcStr> {
                ::core::option::Option::Some(#p::arcstr::literal!(#name))
            }

            #preflight
            #authorize
            #reconcile

            #call
        }
    }
}

/// The `Tool` impl's generics and state type: the toolset's type for methods, the context's
/// state when the function names one, and otherwise any state (`__S`).
fn impl_state(decl: &ToolDecl, self_ty: Option<&Type>) -> (TokenStream, TokenStream) {
    match (self_ty, &decl.ctx_state) {
        (Some(s), _) => (quote!(), quote!(#s)),
        (None, Some(s)) => (quote!(), quote!(#s)),
        (None, None) => (
            quote!(<__S: ::core::marker::Send + ::core::marker::Sync + 'static>),
            quote!(__S),
        ),
    }
}

/// The success type of the tool's result (`()` when the function returns none).
fn ok_type(decl: &ToolDecl) -> TokenStream {
    match &decl.ok_ty {
        Some(t) => quote!(#t),
        None => quote!(()),
    }
}

/// The `<Name>Args` struct: one field per argument, plus the idempotency key when the tool
/// asks for one.
fn args_struct(decl: &ToolDecl, name: &str, args_ident: &Ident) -> TokenStream {
    let p = paths::private();
    let vis = &decl.vis;
    let serde_crate = paths::serde_crate_str();
    let schemars_crate = paths::schemars_crate_str();
    let args_doc = format!("Arguments of the `{name}` tool, as the model proposes them.");
    let fields = decl.args.iter().map(field);
    let key_field = decl.key_argument().then(|| {
        let key = format_ident!("{}", KEY_FIELD);
        quote! {
            #[doc = #KEY_DESCRIPTION]
            #[schemars(description = #KEY_DESCRIPTION, extend("pattern" = #KEY_PATTERN))]
            pub #key: ::std::string::String,
        }
    });
    quote! {
        #[doc = #args_doc]
        #[derive(#p::serde::Serialize, #p::serde::Deserialize, #p::schemars::JsonSchema)]
        #[serde(crate = #serde_crate, deny_unknown_fields)]
        #[schemars(crate = #schemars_crate)]
        #vis struct #args_ident {
            #(#fields)*
            #key_field
        }
    }
}

/// Compile-time checks on the declared types, each spanned at the type it checks: the output
/// must be serializable, and the amount field an unsigned integer.
fn type_checks(decl: &ToolDecl, ok_ty: &TokenStream) -> TokenStream {
    let p = paths::private();
    let ok_span = decl
        .ok_ty
        .as_ref()
        .map(|t| t.span())
        .unwrap_or_else(Span::call_site);
    let output_check = quote_spanned! {ok_span=>
        const _: fn() = || {
            fn output_is_serializable<T: #p::ToolOutput>() {}
            output_is_serializable::<#ok_ty>();
        };
    };

    // The amount field's type is checked after type aliases are resolved, so that
    // `type Dollars = f64` cannot pass as an amount.
    let amount_check = decl.amount_field().map(|f| {
        let ty = &f.field_ty;
        quote_spanned! {ty.span()=>
            const _: fn() = || {
                fn amount_is_unsigned_integer<T: #p::AmountType>() {}
                amount_is_unsigned_integer::<#ty>();
            };
        }
    });
    // Rule 20 on the type: a read-only tool that does not say where its result's text comes
    // from must return a type that holds none (a `String` result is refused by the rules with
    // its own message).
    let text_check = (decl.attrs.read_only.is_some()
        && decl.attrs.output.is_none()
        && decl.attrs.untrusted_fields.is_none()
        && !crate::validate::returns_text(decl))
    .then(|| {
        let k = paths::krate();
        quote_spanned! {ok_span=>
            const _: fn() = || {
                fn read_only_result_holds_no_free_text<T: #k::NoFreeText + ?Sized>() {}
                read_only_result_holds_no_free_text::<#ok_ty>();
            };
        }
    });
    quote! {
        #output_check
        #amount_check
        #text_check
    }
}

/// The tool's run function and its `Tool::call` and `Tool::call_json` methods. The run function
/// (an inherent `async fn` of the tool type, written once so that the function call is checked
/// once) unpacks the arguments into locals, calls the function (on the toolset's state for
/// `&self` methods, with the context when it takes one) and converts its error into a
/// `ToolError`; `call` boxes it, `call_json` boxes it with the result's conversion to JSON (one
/// future, one allocation).
fn call_method(
    decl: &ToolDecl,
    self_ty: Option<&Type>,
    impl_generics: &TokenStream,
    state: &TokenStream,
    args_ident: &Ident,
    ok_ty: &TokenStream,
) -> (TokenStream, TokenStream) {
    let k = paths::krate();
    let p = paths::private();
    let locals: Vec<Ident> = (0..decl.args.len())
        .map(|i| Ident::new(&format!("__arg_{i}"), Span::mixed_site()))
        .collect();
    let field_idents = decl.args.iter().map(|a| &a.ident);
    let passes = decl
        .args
        .iter()
        .zip(&locals)
        .map(|(a, l)| if a.by_ref { quote!(&#l) } else { quote!(#l) });
    let fn_ident = &decl.fn_ident;
    let callee = match self_ty {
        Some(s) => quote!(<#s>::#fn_ident),
        None => quote!(#fn_ident),
    };
    let receiver_arg = (decl.receiver == Some(Receiver::Ref)).then(|| quote!(ctx.state(),));
    let ctx_arg = decl.ctx_state.is_some().then(|| quote!(ctx,));
    let awaited = decl.is_async.then(|| quote!(.await));
    let call = quote! { #callee ( #receiver_arg #ctx_arg #(#passes),* ) #awaited };
    let err_span = decl
        .err_ty
        .as_ref()
        .map(|t| t.span())
        .unwrap_or_else(Span::call_site);
    let convert = quote_spanned!(err_span=> #p::IntoToolError::into_tool_error(e));
    let key_ignore = decl.key_argument().then(|| {
        let key = format_ident!("{}", KEY_FIELD);
        quote!(#key: _,)
    });
    let tool_ident = tool_ident(decl);
    let run = quote! {
        impl #tool_ident {
            #[doc(hidden)]
            async fn __toolguard_run #impl_generics (
                ctx: &#k::ToolContext<#state>,
                args: #args_ident,
            ) -> ::core::result::Result<#ok_ty, #k::ToolError> {
                let _ = ctx;
                let #args_ident { #(#field_idents: #locals,)* #key_ignore } = args;
                match #call {
                    ::core::result::Result::Ok(v) => ::core::result::Result::Ok(v),
                    ::core::result::Result::Err(e) => ::core::result::Result::Err(#convert),
                }
            }
        }
    };
    let methods = quote! {
        fn call<'a>(
            &'a self,
            ctx: &'a #k::ToolContext<#state>,
            args: Self::Args,
        ) -> #k::BoxFuture<'a, ::core::result::Result<Self::Output, #k::ToolError>> {
            ::std::boxed::Box::pin(Self::__toolguard_run(ctx, args))
        }

        fn call_json<'a>(
            &'a self,
            ctx: &'a #k::ToolContext<#state>,
            args: Self::Args,
        ) -> #k::BoxFuture<'a, ::core::result::Result<#p::serde_json::Value, #k::ToolError>> {
            ::std::boxed::Box::pin(async move {
                #p::output_json(Self::__toolguard_run(ctx, args).await?)
            })
        }
    };
    (run, methods)
}

/// The `Tool` method that runs a hook. The hook is passed as a value to a local function whose
/// bound (`GuardHook` or `ReconcileHook`) names the expected signature; every token of that
/// check carries the hook path's span, so a hook of the wrong shape (not `async`, other
/// arguments, another result) is reported once, at its path.
fn hook_method(
    method: &str,
    path: &syn::Path,
    self_ty: Option<&Type>,
    state: &TokenStream,
    args_ident: &Ident,
) -> TokenStream {
    let k = paths::krate();
    let p = paths::private();
    let span = path.span();
    let method = Ident::new(method, Span::call_site());
    let callee = self_path(path, self_ty);
    let (extra, bound, out, out_self) = if method == "reconcile" {
        (
            quote!(O,),
            quote!(#p::ReconcileHook<'a, S, #args_ident, O>),
            quote!(#k::Reconciled<O>),
            quote!(Self::Output,),
        )
    } else {
        (
            quote!(),
            quote!(#p::GuardHook<'a, S, #args_ident>),
            quote!(()),
            quote!(),
        )
    };
    // The bound's "required by" note points at the hook's path too, not at the attribute.
    let def = respan(
        quote! {
            fn hook<'a, S: 'a, #extra H: #bound>(
                hook: H,
                ctx: &'a #k::ToolContext<S>,
                args: &'a #args_ident,
            ) -> #k::BoxFuture<'a, ::core::result::Result<#out, #k::ToolError>> {
                hook.call_hook(ctx, args)
            }
        },
        span,
    );
    // Hygienic locals: a hook named `ctx`, `args` or `hook` still names the user's function.
    let here = Span::mixed_site().located_at(span);
    let (ctx, args, value) = (
        Ident::new("ctx", here),
        Ident::new("args", here),
        Ident::new("__toolguard_hook", here),
    );
    let ret = if method == "reconcile" {
        quote!(#k::Reconciled<Self::Output>)
    } else {
        quote!(())
    };
    let call = quote_spanned! {span=>
        let #value = #callee;
        { #def hook::<#state, #out_self _>(#value, #ctx, #args) }
    };
    quote! {
        fn #method<'a>(
            &'a self,
            #ctx: &'a #k::ToolContext<#state>,
            #args: &'a Self::Args,
        ) -> #k::BoxFuture<'a, ::core::result::Result<#ret, #k::ToolError>> {
            #call
        }
    }
}

/// `tokens` with every span, also inside groups, set to `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|tt| match tt {
            TokenTree::Group(g) => {
                let mut group = Group::new(g.delimiter(), respan(g.stream(), span));
                group.set_span(span);
                TokenTree::Group(group)
            }
            mut other => {
                other.set_span(span);
                other
            }
        })
        .collect()
}

/// A hook path; a leading `Self::` names the toolset type (the hook is called from outside it).
fn self_path(path: &syn::Path, self_ty: Option<&Type>) -> TokenStream {
    match (self_ty, path.segments.first()) {
        (Some(s), Some(first)) if first.ident == "Self" && path.segments.len() > 1 => {
            let rest = path.segments.iter().skip(1);
            quote!(<#s> #(:: #rest)*)
        }
        _ => quote!(#path),
    }
}

fn field(arg: &ArgDecl) -> TokenStream {
    let ident = &arg.ident;
    let ty = &arg.field_ty;
    let docs = arg.description().map(|d| {
        quote! {
            #[doc = #d]
            #[schemars(description = #d)]
        }
    });
    let a = &arg.attrs;
    let constraints = if is_sequence(&arg.field_ty) {
        // Constraints apply to each element of a list.
        let mut inner = Vec::new();
        if a.min_len.is_some() || a.max_len.is_some() {
            let min = a.min_len.as_ref().map(|v| {
                let l = Literal::u64_unsuffixed(v.value);
                quote!(min = #l)
            });
            let max = a.max_len.as_ref().map(|v| {
                let l = Literal::u64_unsuffixed(v.value);
                quote!(max = #l)
            });
            let parts = min.into_iter().chain(max);
            inner.push(quote!(length(#(#parts),*)));
        }
        if let Some(pat) = &a.pattern {
            let pat = &pat.value;
            inner.push(quote!(regex(pattern = #pat)));
        }
        if a.min.is_some() || a.max.is_some() {
            let min = a.min.as_ref().map(|v| {
                let l = number(&v.value);
                quote!(min = #l)
            });
            let max = a.max.as_ref().map(|v| {
                let l = number(&v.value);
                quote!(max = #l)
            });
            let parts = min.into_iter().chain(max);
            inner.push(quote!(range(#(#parts),*)));
        }
        (!inner.is_empty()).then(|| quote!(#[schemars(inner(#(#inner),*))]))
    } else {
        let mut ext = Vec::new();
        if let Some(v) = &a.min_len {
            let l = Literal::u64_unsuffixed(v.value);
            ext.push(quote!("minLength" = #l));
        }
        if let Some(v) = &a.max_len {
            let l = Literal::u64_unsuffixed(v.value);
            ext.push(quote!("maxLength" = #l));
        }
        if let Some(v) = &a.pattern {
            let s = &v.value;
            ext.push(quote!("pattern" = #s));
        }
        if let Some(v) = &a.min {
            let l = number(&v.value);
            ext.push(quote!("minimum" = #l));
        }
        if let Some(v) = &a.max {
            let l = number(&v.value);
            ext.push(quote!("maximum" = #l));
        }
        (!ext.is_empty()).then(|| quote!(#[schemars(extend(#(#ext),*))]))
    };
    let max_items = a.max_items.as_ref().and_then(|m| {
        let l = Literal::u64_unsuffixed(m.value);
        match collection(&arg.field_ty)? {
            Collection::Sequence => Some(quote!(#[schemars(extend("maxItems" = #l))])),
            Collection::Map => Some(quote!(#[schemars(extend("maxProperties" = #l))])),
        }
    });
    quote! {
        #docs
        #constraints
        #max_items
        pub #ident: #ty,
    }
}

/// A JSON number as written: integers stay integers.
fn number(n: &Number) -> TokenStream {
    match n.integer {
        Some(i) if i < 0 => {
            let l = Literal::u128_unsuffixed(i.unsigned_abs());
            quote!(-#l)
        }
        Some(i) => {
            let l = Literal::u128_unsuffixed(i.unsigned_abs());
            quote!(#l)
        }
        None if n.value < 0.0 => {
            let l = Literal::f64_unsuffixed(-n.value);
            quote!(-#l)
        }
        None => {
            let l = Literal::f64_unsuffixed(n.value);
            quote!(#l)
        }
    }
}

fn opt_string(s: Option<&str>) -> TokenStream {
    match s {
        Some(s) => quote!(::core::option::Option::Some(::std::string::String::from(#s))),
        None => quote!(::core::option::Option::None),
    }
}

fn opt_u64(v: Option<u64>) -> TokenStream {
    match v {
        Some(v) => {
            let l = Literal::u64_suffixed(v);
            quote!(::core::option::Option::Some(#l))
        }
        None => quote!(::core::option::Option::None),
    }
}

fn opt_f64(v: Option<f64>) -> TokenStream {
    match v {
        Some(v) if v.is_finite() => {
            let l = Literal::f64_suffixed(v);
            quote!(::core::option::Option::Some(#l))
        }
        _ => quote!(::core::option::Option::None),
    }
}

fn field_spec(decl: &ToolDecl, arg: &ArgDecl) -> TokenStream {
    let k = paths::krate();
    let name = &arg.name;
    let kind = Ident::new(arg_kind(arg).variant(), Span::call_site());
    let description = opt_string(arg.description());
    let sensitive = arg.attrs.sensitive.is_some();
    let amount = is_amount(decl, arg);
    let optional = is_option(&arg.ty);
    let min_len = opt_u64(arg.attrs.min_len.as_ref().map(|v| v.value));
    let max_len = opt_u64(arg.attrs.max_len.as_ref().map(|v| v.value));
    let pattern = opt_string(arg.attrs.pattern.as_ref().map(|v| v.value.as_str()));
    let min = opt_f64(arg.attrs.min.as_ref().map(|v| v.value.value));
    let max = opt_f64(arg.attrs.max.as_ref().map(|v| v.value.value));
    let root = opt_string(arg.attrs.root.as_ref().map(|v| v.value.as_str()));
    let role = match &arg.attrs.role {
        Some(r) => {
            let variant = Ident::new(r.value.variant(), Span::call_site());
            quote!(::core::option::Option::Some(#k::Role::#variant))
        }
        None => quote!(::core::option::Option::None),
    };
    quote! {
        {
            let mut field = #k::FieldSpec::new(#name);
            field.kind = #k::FieldKind::#kind;
            field.description = #description;
            field.sensitive = #sensitive;
            field.amount = #amount;
            field.optional = #optional;
            field.min_len = #min_len;
            field.max_len = #max_len;
            field.pattern = #pattern;
            field.min = #min;
            field.max = #max;
            field.root = #root;
            field.role = #role;
            field
        }
    }
}

fn spec_body(
    decl: &ToolDecl,
    name: &str,
    description: &str,
    args_ident: &Ident,
    ok_ty: &TokenStream,
) -> TokenStream {
    let k = paths::krate();
    let p = paths::private();
    let a = &decl.attrs;
    let risk = Ident::new(decl.risk().variant(), Span::call_site());
    let read_only = a.read_only.is_some();
    let idempotent = a.idempotent.is_some();
    let reuse = Ident::new(
        if a.key_wins.is_some() {
            "KeyWins"
        } else {
            "Conflict"
        },
        Span::call_site(),
    );
    let approval_over = opt_u64(a.approval_over.as_ref().map(|v| v.value));
    let approvals = a.approvals.as_ref().map(|v| {
        let l = Literal::u8_suffixed(u8::try_from(v.value).unwrap_or(u8::MAX));
        quote!(spec.approvals = #l;)
    });
    let timeout = a.timeout_ms.as_ref().map(|v| {
        let l = Literal::u64_suffixed(v.value);
        quote!(spec.timeout = ::core::time::Duration::from_millis(#l);)
    });
    let revision = a.revision.as_ref().map(|v| {
        let l = Literal::u32_suffixed(u32::try_from(v.value).unwrap_or(u32::MAX));
        quote!(spec.revision = #l;)
    });
    let untrusted_fields = crate::validate::untrusted_fields(decl);
    let untrusted_output = !untrusted_fields.is_empty()
        || a.output
            .as_ref()
            .is_some_and(|o| o.value == OutputTrust::Untrusted);
    let output_declared = a.output.is_some() || !untrusted_fields.is_empty();
    let egress = Ident::new(
        match a.egress.as_ref().map(|e| e.value) {
            None => "None",
            Some(EgressDecl::Open) => "Open",
            Some(EgressDecl::Allowlisted) => "Allowlisted",
        },
        Span::call_site(),
    );
    let key_field = opt_string(decl.key_argument().then_some(KEY_FIELD));
    let mut fields: Vec<TokenStream> = decl.args.iter().map(|arg| field_spec(decl, arg)).collect();
    if decl.key_argument() {
        fields.push(quote! {
            {
                let mut field = #k::FieldSpec::new(#KEY_FIELD);
                field.kind = #k::FieldKind::Identifier;
                field.description = ::core::option::Option::Some(
                    ::std::string::String::from(#KEY_DESCRIPTION),
                );
                field.pattern = ::core::option::Option::Some(
                    ::std::string::String::from(#KEY_PATTERN),
                );
                field
            }
        });
    }
    quote! {
        let mut spec = #k::ToolSpec::new(
            #name,
            #description,
            #p::schema_for::<#args_ident>(),
            #p::schema_for::<#ok_ty>(),
        );
        spec.risk = #k::Risk::#risk;
        spec.read_only = #read_only;
        spec.idempotent = #idempotent;
        spec.key_reuse = #k::KeyReuse::#reuse;
        spec.approval_over = #approval_over;
        #approvals
        #timeout
        #revision
        spec.idempotency_key_field = #key_field;
        spec.untrusted_output = #untrusted_output;
        spec.untrusted_fields = ::std::vec![#(::std::string::String::from(#untrusted_fields)),*];
        spec.output_declared = #output_declared;
        spec.egress = #k::Egress::#egress;
        spec.fields = ::std::vec![#(#fields),*];
        spec
    }
}

/// `impl Type { pub fn tools() -> Vec<ToolHandle<Type>> }` for a toolset.
pub(crate) fn tools_fn(self_ty: &Type, decls: &[ToolDecl]) -> TokenStream {
    let k = paths::krate();
    let idents = decls.iter().map(tool_ident);
    let names: Vec<String> = decls.iter().map(|d| format!("`{}`", d.name())).collect();
    let doc = if names.is_empty() {
        "The tools of this toolset (none are declared).".to_owned()
    } else {
        format!("The tools of this toolset: {}.", names.join(", "))
    };
    quote! {
        impl #self_ty {
            #[doc = #doc]
            pub fn tools() -> ::std::vec::Vec<#k::ToolHandle<#self_ty>> {
                ::std::vec![#(#k::ToolHandle::new(#idents)),*]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::camel;

    #[test]
    fn camel_case() {
        assert_eq!(camel("transfer_funds"), "TransferFunds");
        assert_eq!(camel("add"), "Add");
        assert_eq!(camel("_1"), "Tool1");
        assert_eq!(camel("_"), "Tool");
        assert_eq!(camel("a__b_"), "AB");
    }
}
