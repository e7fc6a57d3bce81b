//! The audit trail: one terminal [`AuditEntry`] for every call, chained so that a changed,
//! inserted, reordered or removed entry is detected.
//!
//! Threat model. With an [`AuditAnchor`] (host keys), every entry is sealed with HMAC-SHA256
//! under a key the store does not hold: someone with write access to the store cannot edit an
//! entry, insert one, reorder them, or rewrite the chain after an edit without verification
//! naming the first broken entry. Removing the newest entries leaves a valid shorter chain; the
//! sink's signed [`Checkpoint`]s, written to a host-provided [`CheckpointSink`] outside the store
//! every N entries or T seconds, let [`AuditQuery::verify_against`] detect it. Without keys a
//! sink writes the plain SHA-256 chain, which only detects accidental damage and naive edits.

mod anchor;
mod chain;
/// The column layout SQL audit sinks share (for backend crates).
#[doc(hidden)]
pub mod columns;
mod encode;
mod entry;
mod memory;
mod query;

pub use anchor::{
    AuditAnchor, Checkpoint, CheckpointPolicy, CheckpointSink, FileCheckpoints, MemoryCheckpoints,
};
#[doc(hidden)]
pub use chain::Sealer;
pub use chain::{ChainBreak, GENESIS_HASH, seal, verify_chain};
pub use entry::{AuditEntry, AuditEvent, AuditRecord, REDACTED, Stage};
pub use memory::MemoryAuditSink;
pub use query::{AuditQuery, ChainVerifier, VerifyError, VerifyReport};

use crate::tool::BoxFuture;

/// Why an audit sink could not append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("audit sink unavailable: {0}")]
pub struct AuditError(pub String);

/// Where audit entries go. The sink assigns the sequence number and seals the entry into the
/// chain (with its host keys, see [`seal`]), so that the chain is consistent with what it
/// stores. [`append_inline`](Self::append_inline) is the pipeline's only way in; by default it
/// is [`append`](Self::append).
pub trait AuditSink: Send + Sync + 'static {
    /// Appends `record`, sealed into the chain, and returns its sequence number.
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>>;

    /// Appends `record` as [`append`](Self::append) does, answering without a boxed future when
    /// the append finished before returning ([`Appending::ready`]). A sink that appends without
    /// waiting (one in memory) overrides it to save the box; the default boxes `append`.
    fn append_inline(&self, record: AuditRecord) -> Appending<'_> {
        Appending::waiting(self.append(record))
    }

    /// Appends the entry of a call that changed nothing (a call of a `read_only` tool): a sink
    /// that syncs to disk may answer once the entry is committed, so that the read does not wait
    /// for the disk; the entry then survives a crash of the process at once and a power loss
    /// from the sync that follows it. The entry's place in the chain and its seal are the same.
    /// The default appends as [`append_inline`](Self::append_inline) does.
    fn append_unsynced(&self, record: AuditRecord) -> Appending<'_> {
        self.append_inline(record)
    }

    /// Whether this sink keeps its trail durably (a database, a file) without an anchor that
    /// both seals entries under host keys and writes checkpoints: such a trail can be truncated,
    /// or rewritten and re-sealed, unnoticed. [`DispatcherBuilder::build`](crate::DispatcherBuilder::build)
    /// refuses it unless the host opts out by name
    /// ([`unanchored_audit`](crate::DispatcherBuilder::unanchored_audit)). Default `false` (a
    /// sink in memory); the SQLite and PostgreSQL sinks answer for themselves.
    fn durable_unanchored(&self) -> bool {
        false
    }
}

impl<T: AuditSink> AuditSink for std::sync::Arc<T> {
    fn append(&self, record: AuditRecord) -> BoxFuture<'_, Result<u64, AuditError>> {
        (**self).append(record)
    }

    fn append_inline(&self, record: AuditRecord) -> Appending<'_> {
        (**self).append_inline(record)
    }

    fn append_unsynced(&self, record: AuditRecord) -> Appending<'_> {
        (**self).append_unsynced(record)
    }

    fn durable_unanchored(&self) -> bool {
        (**self).durable_unanchored()
    }
}

/// The future of [`AuditSink::append_inline`]: an append that already finished
/// ([`ready`](Self::ready)), or one still under way ([`waiting`](Self::waiting)).
#[must_use = "an append still under way does nothing unless awaited"]
pub struct Appending<'a>(State<'a>);

enum State<'a> {
    /// The append finished; its result until it is taken.
    Ready(Option<Result<u64, AuditError>>),
    /// The append is under way.
    Waiting(BoxFuture<'a, Result<u64, AuditError>>),
}

impl<'a> Appending<'a> {
    /// An append that finished with `result`.
    pub fn ready(result: Result<u64, AuditError>) -> Self {
        Appending(State::Ready(Some(result)))
    }

    /// An append still under way.
    pub fn waiting(fut: BoxFuture<'a, Result<u64, AuditError>>) -> Self {
        Appending(State::Waiting(fut))
    }

    /// The same append as a boxed future (for an [`AuditSink::append`] written with
    /// [`AuditSink::append_inline`]).
    pub fn boxed(self) -> BoxFuture<'a, Result<u64, AuditError>> {
        match self.0 {
            State::Waiting(fut) => fut,
            ready @ State::Ready(_) => Box::pin(Appending(ready)),
        }
    }
}

impl std::fmt::Debug for Appending<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            State::Ready(result) => f.debug_tuple("Appending::Ready").field(result).finish(),
            State::Waiting(_) => f.write_str("Appending::Waiting(..)"),
        }
    }
}

impl std::future::Future for Appending<'_> {
    type Output = Result<u64, AuditError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        // `Appending` is `Unpin`: it holds a plain value or a box.
        match &mut self.get_mut().0 {
            State::Ready(result) => std::task::Poll::Ready(
                result
                    .take()
                    .unwrap_or_else(|| Err(AuditError("append polled after it finished".into()))),
            ),
            State::Waiting(fut) => fut.as_mut().poll(cx),
        }
    }
}
