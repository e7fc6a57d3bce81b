//! The Redis backend of toolguard: the idempotency store, the session ledger, provenance sources
//! and detection state, shared by replicas (Lua scripts make each transition atomic). Approvals
//! and operation records need a durable store (SQLite or PostgreSQL).
//!
//! Use it through the facade (`features = ["redis"]`, module `toolguard_pipeline::redis`).

mod config;
mod connections;
mod detect;
mod provenance;
mod store;

pub use config::{DEFAULT_CONNECTIONS, DEFAULT_REPLY_TIMEOUT, RedisConfig};
pub use detect::RedisDetectionStore;
pub use store::RedisStore;
