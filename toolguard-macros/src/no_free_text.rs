//! `#[derive(NoFreeText)]`: the type holds no free-form text when none of its fields does.
//!
//! The impl carries the type's own generics; a compile-time assertion names every field's type,
//! spanned at the field, so a `String` anywhere is reported where it is declared.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields};

use crate::paths;

/// The expansion of `#[derive(NoFreeText)]` on `input`.
pub(crate) fn derive(input: DeriveInput) -> TokenStream {
    let k = paths::krate();
    let name = &input.ident;
    // Each type parameter must hold no free text either.
    let mut generics = input.generics.clone();
    for param in generics.type_params_mut() {
        param.bounds.push(syn::parse_quote!(#k::NoFreeText));
    }
    let (impl_generics, ty_generics, where_clause) = generics.split_for_impl();
    let fields: Vec<&syn::Field> = match &input.data {
        Data::Struct(s) => field_list(&s.fields).collect(),
        Data::Enum(e) => e
            .variants
            .iter()
            .flat_map(|v| field_list(&v.fields))
            .collect(),
        Data::Union(u) => {
            return syn::Error::new(
                u.union_token.span,
                "`NoFreeText` cannot be derived for a union: implement it by hand if its fields \
                 hold no free-form text",
            )
            .to_compile_error();
        }
    };
    let checks = fields.iter().map(|f| {
        let ty = &f.ty;
        quote_spanned! {ty.span()=>
            __field_holds_no_free_text::<#ty>();
        }
    });
    quote! {
        impl #impl_generics #k::NoFreeText for #name #ty_generics #where_clause {}

        const _: () = {
            #[allow(dead_code, clippy::extra_unused_type_parameters)]
            fn __fields #impl_generics () #where_clause {
                fn __field_holds_no_free_text<T: #k::NoFreeText + ?Sized>() {}
                #(#checks)*
            }
        };
    }
}

fn field_list(fields: &Fields) -> syn::punctuated::Iter<'_, syn::Field> {
    fields.iter()
}
