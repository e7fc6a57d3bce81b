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
//! use std::sync::Arc;
//! use toolguard_pipeline::HostKeys;
//! use toolguard_pipeline::audit::{CheckpointPolicy, FileCheckpoints};
//! use toolguard_sqlite::SqliteBuilderExt as _;
//!
//! // A trail in a database is anchored: host keys from a key file (`toolguard keys generate`)
//! // and checkpoints kept where the database's writers cannot write.
//! let checkpoints = Arc::new(FileCheckpoints::new("/var/lib/app/audit.checkpoints"));
//! let dispatcher = builder
//!     .sqlite("toolguard.db")?
//!     .host_keys(HostKeys::from_file("/etc/app/toolguard.keys")?)
//!     .audit_checkpoints(checkpoints, CheckpointPolicy::default())
//!     .build()?;
//! # let _ = dispatcher; Ok(()) }
//! ```

mod audit;
mod checkpoint;
mod detect;
mod provenance;
mod store;
mod worker;

pub use audit::{MAX_BATCH, SqliteAuditSink};
pub use detect::SqliteDetectionStore;
pub use store::{Durability, SQLITE_SCHEMA_VERSION, SqliteBuilderExt, SqliteStore};
