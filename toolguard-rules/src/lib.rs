//! The safety rules of toolguard tool declarations, as plain functions over names, strings, a
//! small declaration model ([`decl`]) and (with the `json` feature) JSON Schemas (`schema`).
//!
//! Every declaration rule lives here, once. The `#[tool]` macro checks a declaration at compile
//! time by building a [`decl::ToolDecl`] and reporting each [`decl::Violation`] on the span of the
//! [`decl::Site`] it names; a tool declared at run time (a JSON Schema plus a declaration, e.g.
//! from a policy file) is read into the same model (`schema::fields`) and checked by the same
//! functions, so both meet the same conditions and read the same diagnosis; only the fix is spelt
//! for where the declaration is written ([`decl::Syntax`]). The rule numbers are those of
//! `RULES.md`.
//!
//! [`Risk`] is the crate family's one risk type (with the `serde` feature, serialized as
//! `"low"`, `"medium"`, `"high"`, `"critical"`); the runtime re-exports it.
//!
//! ```
//! use toolguard_rules::{names, pattern};
//!
//! assert!(names::is_identity_name("tenant_id"));
//! assert!(names::is_money_name("unitPrice"));
//! assert!(pattern::check("^[a-z0-9-]{1,32}$").is_ok());
//! assert!(pattern::check("(?i)^yes$").is_err());
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod decl;
pub mod kinds;
pub mod names;
pub mod pattern;
pub mod result_path;
pub mod root;
#[cfg(feature = "json")]
pub mod schema;
pub mod suggest;

pub use kinds::{Kind, Risk, Role};
