// The guide's chapters are the markdown files of `toolguard/guide/`, included here so that
// rustdoc shows them as modules and `cargo test --doc` compiles their examples.

#![doc = include_str!("../guide/index.md")]

#[doc = include_str!("../guide/01-pipeline.md")]
pub mod pipeline {}

#[doc = include_str!("../guide/02-tools.md")]
pub mod tools {}

#[doc = include_str!("../guide/03-approvals.md")]
pub mod approvals {}

#[doc = include_str!("../guide/04-console.md")]
pub mod console {}

#[doc = include_str!("../guide/05-detection.md")]
pub mod detection {}

#[doc = include_str!("../guide/06-provenance.md")]
pub mod provenance {}

#[doc = include_str!("../guide/07-sanitization.md")]
pub mod sanitization {}

#[doc = include_str!("../guide/08-providers.md")]
pub mod providers {}

#[doc = include_str!("../guide/09-mcp-proxy.md")]
pub mod mcp_proxy {}

#[doc = include_str!("../guide/10-stores.md")]
pub mod stores {}

#[doc = include_str!("../guide/11-keys-and-audit.md")]
pub mod keys_and_audit {}

#[doc = include_str!("../guide/12-install.md")]
pub mod install {}
