//! The SQLite backend of toolguard: every store the dispatcher keeps (idempotency records,
//! approval requests, the session ledger, operation records, provenance sources, detection
//! state) and the audit trail, in one file (bundled SQLite, WAL mode, group commits on one
//! writer thread).
//!
//! Use it through the facade (`toolguard = { package = "toolguard-rs", features = ["sqlite"] }`,
//! module `toolguard_pipeline::sqlite`):
//!
//! ```no_run
//! # fn build(builder: toolguard_pipeline::DispatcherBuilder<()>) -> Result<(), Box<dyn std::error::Error>> {
//! use toolguard_sqlite::SqliteBuilderExt as _;
//!
//! let dispatcher = builder.sqlite("toolguard.db")?.build()?;
//! # let _ = dispatcher; Ok(()) }
//! ```

mod audit;
mod detect;
mod provenance;
mod store;
mod worker;

pub use audit::{MAX_BATCH, SqliteAuditSink};
pub use detect::SqliteDetectionStore;
pub use store::{Durability, SQLITE_SCHEMA_VERSION, SqliteBuilderExt, SqliteStore};
