//! MCP for toolguard.
//!
//! - [`server`]: serve a [`Dispatcher`](toolguard_pipeline::Dispatcher) over the Model Context
//!   Protocol (stdio), the principal supplied by the host.
//! - [`proxy`] (feature `proxy`): `toolguard mcp-proxy`, the guard pipeline in front of an MCP
//!   server someone else wrote, declared by a policy file.

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod server;

#[cfg(feature = "proxy")]
#[cfg_attr(docsrs, doc(cfg(feature = "proxy")))]
pub mod proxy;
