//! The parsed declaration of a tool: what `parse` produces, `validate` checks and `expand` emits.

use proc_macro2::Span;
use syn::{Ident, Path, Type, Visibility};

pub(crate) use toolguard_rules::decl::{EgressDecl, KeySource, OutputTrust};
pub(crate) use toolguard_rules::{Kind, Risk, Role};

/// A value with the span of the tokens it came from.
#[derive(Debug, Clone)]
pub(crate) struct Spanned<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: Span,
}

impl<T> Spanned<T> {
    /// Wraps `value`.
    pub(crate) fn new(value: T, span: Span) -> Self {
        Spanned { value, span }
    }
}

/// A numeric literal of `min`/`max`, kept both as a number and as written.
#[derive(Debug, Clone)]
pub(crate) struct Number {
    /// Its value.
    pub value: f64,
    /// Written as an integer (emitted as a JSON integer).
    pub integer: Option<i128>,
}

/// The `#[tool(...)]` options.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolAttrs {
    /// `name = "..."`.
    pub name: Option<Spanned<String>>,
    /// `description = "..."`.
    pub description: Option<Spanned<String>>,
    /// `risk = "..."`.
    pub risk: Option<Spanned<Risk>>,
    /// `read_only`.
    pub read_only: Option<Span>,
    /// `idempotent` / `idempotent(key = "host")`.
    pub idempotent: Option<Spanned<KeySource>>,
    /// `key_wins`.
    pub key_wins: Option<Span>,
    /// `approval_over = N`.
    pub approval_over: Option<Spanned<u64>>,
    /// `approvals = N`.
    pub approvals: Option<Spanned<u64>>,
    /// `timeout_ms = N`.
    pub timeout_ms: Option<Spanned<u64>>,
    /// `revision = N`.
    pub revision: Option<Spanned<u64>>,
    /// `output = "trusted"` / `"untrusted"`.
    pub output: Option<Spanned<OutputTrust>>,
    /// `untrusted_fields = ["/pointer", ...]` (only the paths that parsed).
    pub untrusted_fields: Option<Spanned<Vec<Spanned<String>>>>,
    /// `egress` / `egress = "allowlisted"`.
    pub egress: Option<Spanned<EgressDecl>>,
    /// `preflight = path`.
    pub preflight: Option<Path>,
    /// `authorize = path`.
    pub authorize: Option<Path>,
    /// `reconcile = path`.
    pub reconcile: Option<Path>,
}

/// The `#[arg(...)]` options of one parameter.
#[derive(Debug, Clone, Default)]
pub(crate) struct ArgAttrs {
    /// `description = "..."`.
    pub description: Option<Spanned<String>>,
    /// `min_len = N`.
    pub min_len: Option<Spanned<u64>>,
    /// `max_len = N`.
    pub max_len: Option<Spanned<u64>>,
    /// `pattern = "..."`.
    pub pattern: Option<Spanned<String>>,
    /// `min = N`.
    pub min: Option<Spanned<Number>>,
    /// `max = N`.
    pub max: Option<Spanned<Number>>,
    /// `sensitive`.
    pub sensitive: Option<Span>,
    /// `amount`.
    pub amount: Option<Span>,
    /// `kind = "..."`; `None` inside when the spelling was refused.
    pub kind: Option<Spanned<Option<Kind>>>,
    /// `root = "..."`.
    pub root: Option<Spanned<String>>,
    /// `max_items = N`.
    pub max_items: Option<Spanned<u64>>,
    /// A `kind = "shell"` or `kind = "sql"` spelling, refused by `validate`.
    pub refused_kind: Option<Spanned<String>>,
    /// `role = "..."` (provenance per argument).
    pub role: Option<Spanned<Role>>,
}

/// A parameter that becomes an argument field.
#[derive(Debug, Clone)]
pub(crate) struct ArgDecl {
    /// The identifier as written (may be raw).
    pub ident: Ident,
    /// The field name in the arguments object (`r#` removed).
    pub name: String,
    /// The parameter's type as written.
    pub ty: Type,
    /// The field's type: the referent of a `&T` parameter, owned.
    pub field_ty: Type,
    /// The parameter is a reference; the handler gets `&field`.
    pub by_ref: bool,
    /// Doc comment text.
    pub doc: Option<String>,
    /// `#[arg]` options.
    pub attrs: ArgAttrs,
    /// The parameter as written (`name: Type`, attributes removed), for error spans.
    pub tokens: proc_macro2::TokenStream,
}

impl ArgDecl {
    /// The description: `#[arg(description)]`, else the doc comment.
    pub(crate) fn description(&self) -> Option<&str> {
        self.attrs
            .description
            .as_ref()
            .map(|d| d.value.as_str())
            .or(self.doc.as_deref())
    }
}

/// The receiver of a toolset method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receiver {
    /// No receiver: an associated function.
    None,
    /// `&self`.
    Ref,
}

/// One tool, from a function or a toolset method.
#[derive(Debug, Clone)]
pub(crate) struct ToolDecl {
    /// The function's identifier.
    pub fn_ident: Ident,
    /// Visibility of the function (given to the generated items).
    pub vis: Visibility,
    /// `async fn`.
    pub is_async: bool,
    /// The tool options.
    pub attrs: ToolAttrs,
    /// Doc comment text.
    pub doc: Option<String>,
    /// The state type of a `ctx: &ToolContext<S>` parameter, if there is one.
    pub ctx_state: Option<Type>,
    /// The receiver, for toolset methods (`Some`) or functions (`None`).
    pub receiver: Option<Receiver>,
    /// The argument parameters.
    pub args: Vec<ArgDecl>,
    /// `T` of the `Result<T, E>` return type.
    pub ok_ty: Option<Type>,
    /// `E` of the `Result<T, E>` return type.
    pub err_ty: Option<Type>,
}

impl ToolDecl {
    /// The tool name: `name = ...`, else the function's name.
    pub(crate) fn name(&self) -> String {
        match &self.attrs.name {
            Some(n) => n.value.clone(),
            None => unraw(&self.fn_ident),
        }
    }

    /// Where the name was written.
    pub(crate) fn name_span(&self) -> Span {
        match &self.attrs.name {
            Some(n) => n.span,
            None => self.fn_ident.span(),
        }
    }

    /// The description: `description = ...`, else the doc comment.
    pub(crate) fn description(&self) -> Option<&str> {
        self.attrs
            .description
            .as_ref()
            .map(|d| d.value.as_str())
            .or(self.doc.as_deref())
    }

    /// The declared risk, `low` by default.
    pub(crate) fn risk(&self) -> Risk {
        self.attrs
            .risk
            .as_ref()
            .map(|r| r.value)
            .unwrap_or(Risk::Low)
    }

    /// The amount field: marked `#[arg(amount)]`, else named `amount`.
    pub(crate) fn amount_field(&self) -> Option<&ArgDecl> {
        self.args
            .iter()
            .find(|a| a.attrs.amount.is_some())
            .or_else(|| self.args.iter().find(|a| a.name == "amount"))
    }

    /// The model sends an `idempotency_key` argument.
    pub(crate) fn key_argument(&self) -> bool {
        matches!(&self.attrs.idempotent, Some(k) if k.value == KeySource::Argument)
    }
}

/// An identifier's name without `r#`.
pub(crate) fn unraw(ident: &Ident) -> String {
    let s = ident.to_string();
    match s.strip_prefix("r#") {
        Some(rest) => rest.to_owned(),
        None => s,
    }
}

/// Errors collected while reading a declaration, reported together.
#[derive(Default)]
pub(crate) struct Errors {
    inner: Option<syn::Error>,
}

impl Errors {
    /// Records an error at `span`.
    pub(crate) fn push(&mut self, span: Span, msg: impl std::fmt::Display) {
        self.add(syn::Error::new(span, msg));
    }

    /// Records an error spanning all of `tokens`.
    pub(crate) fn spanned(&mut self, tokens: &dyn quote::ToTokens, msg: impl std::fmt::Display) {
        self.add(syn::Error::new_spanned(tokens, msg));
    }

    /// Records `err`.
    pub(crate) fn add(&mut self, err: syn::Error) {
        match &mut self.inner {
            Some(e) => e.combine(err),
            None => self.inner = Some(err),
        }
    }

    /// `Ok` if nothing was recorded, else every error at once.
    pub(crate) fn finish(self) -> syn::Result<()> {
        match self.inner {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
