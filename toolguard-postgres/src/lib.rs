//! The PostgreSQL backend of toolguard: every store the dispatcher keeps (idempotency records,
//! approval requests, the session ledger, operation records, provenance sources, detection
//! state) and the audit trail, shared by replicas, with prepared statements, pipelined round
//! trips and group commits.
//!
//! Use it through the facade (`features = ["postgres"]`, module `toolguard_pipeline::postgres`).

mod audit;
mod batch;
mod detect;
mod provenance;
mod store;

pub use audit::{MAX_BATCH, PgAuditSink};
pub use detect::PgDetectionStore;
pub use store::{PG_SCHEMA_VERSION, PgConfig, PgStore};
