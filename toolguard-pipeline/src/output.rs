//! What a read-only tool's result can carry into the model's context.
//!
//! A read-only tool that returns free-form text (a `String`, a `serde_json::Value`, or a struct
//! with such a field anywhere inside) may hand someone else's words to the model, so it must
//! declare where the text comes from: `output = "untrusted"` (mail, web pages, documents,
//! other users' text: the session records it as a provenance source) or `output = "trusted"`
//! (text the application produced itself). That is rule 20 of `RULES.md`.
//!
//! The rule reads the type, not its name. `#[tool]` asks the compiler whether the result type
//! of a read-only tool without `output` implements [`NoFreeText`]: numbers, booleans, the
//! checked value types ([`Email`], [`Url`], [`Money`],
//! …), and containers and tuples of them do; a struct or enum does when it derives
//! `NoFreeText`, which in turn requires it of every field. A type that holds a `String`
//! anywhere cannot derive it, so the tool does not compile until it declares `output`. Tools
//! declared at run time or in a policy file are judged the same way from their output schema
//! when the dispatcher is built.
//!
//! ```
//! use toolguard_pipeline::{Money, NoFreeText};
//!
//! fn holds_no_free_text<T: NoFreeText + ?Sized>() {}
//! holds_no_free_text::<Vec<(u64, Option<Money>)>>();
//! ```
//!
//! ```compile_fail
//! # use toolguard_pipeline::NoFreeText;
//! # fn holds_no_free_text<T: NoFreeText + ?Sized>() {}
//! holds_no_free_text::<Vec<String>>(); // someone else's words may be in it
//! ```
//!
//! With the facade: `#[derive(serde::Serialize, schemars::JsonSchema, toolguard::NoFreeText)]`
//! on a result struct of numbers lets `#[tool(read_only)]` return it without `output`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::kinds::{Cents, Currency, Email, Identifier, Money, SafePath, Url};

/// A type whose values hold no free-form text: a read-only tool may return it without declaring
/// `output` (see the [module documentation](self)). Derive it with `#[derive(NoFreeText)]`;
/// the derive requires it of every field.
#[diagnostic::on_unimplemented(
    message = "`{Self}` may carry free-form text into the model's context",
    label = "the result of a read-only tool without `output = ...`",
    note = "declare where its text comes from on the tool: `output = \"untrusted\"` (mail, web \
            pages, documents, other users' text) or `output = \"trusted\"` (text the \
            application produced); or, if `{Self}` holds no free-form text, \
            `#[derive(toolguard::NoFreeText)]` on it (rule 20)"
)]
pub trait NoFreeText {}

macro_rules! no_free_text {
    ($($t:ty),* $(,)?) => { $(impl NoFreeText for $t {})* };
}

no_free_text!(
    (),
    bool,
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    f32,
    f64,
    Cents,
    Currency,
    Email,
    Identifier,
    Money,
    SafePath,
    Url,
);

impl<T: NoFreeText + ?Sized> NoFreeText for Box<T> {}
impl<T: NoFreeText + ?Sized> NoFreeText for Arc<T> {}
impl<T: NoFreeText + ?Sized> NoFreeText for &T {}
impl<T: NoFreeText> NoFreeText for Option<T> {}
impl<T: NoFreeText> NoFreeText for Vec<T> {}
impl<T: NoFreeText> NoFreeText for VecDeque<T> {}
impl<T: NoFreeText> NoFreeText for [T] {}
impl<T: NoFreeText, const N: usize> NoFreeText for [T; N] {}
impl<T: NoFreeText> NoFreeText for BTreeSet<T> {}
impl<T: NoFreeText, S> NoFreeText for HashSet<T, S> {}
// A map's keys are written into the result too: they must hold no free text either.
impl<K: NoFreeText, V: NoFreeText> NoFreeText for BTreeMap<K, V> {}
impl<K: NoFreeText, V: NoFreeText, S> NoFreeText for HashMap<K, V, S> {}

macro_rules! no_free_text_tuples {
    ($(($($t:ident),+)),* $(,)?) => {
        $(impl<$($t: NoFreeText),+> NoFreeText for ($($t,)+) {})*
    };
}

no_free_text_tuples!((A), (A, B), (A, B, C), (A, B, C, D), (A, B, C, D, E));
