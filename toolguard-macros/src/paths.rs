//! Paths to the runtime crate that generated code names. Change them here, in one place.

use proc_macro2::TokenStream;
use quote::quote;

/// The runtime crate as a path prefix, e.g. `::toolguard`.
pub(crate) fn krate() -> TokenStream {
    quote!(::toolguard)
}

/// The runtime crate's private re-exports used by generated code.
pub(crate) fn private() -> TokenStream {
    let k = krate();
    quote!(#k::__private)
}

/// The `serde` re-export, as the string that `#[serde(crate = "...")]` takes.
pub(crate) fn serde_crate_str() -> String {
    format!("{}::__private::serde", krate_str())
}

/// The `schemars` re-export, as the string that `#[schemars(crate = "...")]` takes.
pub(crate) fn schemars_crate_str() -> String {
    format!("{}::__private::schemars", krate_str())
}

fn krate_str() -> String {
    krate().to_string().replace(' ', "")
}
