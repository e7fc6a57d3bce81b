//! Where a session's sources live: [`ProvenanceStore`], implemented by every store backend
//! (memory here; SQLite, PostgreSQL and Redis in their modules), so that every replica sharing a
//! backend sees every source of a session.

use super::{MAX_SOURCES_PER_SESSION, Source};
use crate::store::deadline::Deadlined;
use crate::store::{MemoryStore, StoreResult};
use crate::tool::BoxFuture;

/// The sources of each session, keyed by [`session_key`].
///
/// A store that cannot answer fails the call closed: a state-changing call cannot be judged
/// without its session's sources (`unavailable`), and an untrusted result whose source cannot be
/// recorded is not handed to the model.
pub trait ProvenanceStore: Send + Sync + 'static {
    /// Appends `source` to `session`'s sources (the oldest beyond
    /// [`MAX_SOURCES_PER_SESSION`] are dropped). Adding a source whose id is already there
    /// changes nothing.
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>>;

    /// The sources of `session`, oldest first.
    fn sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<Source>>>;

    /// Removes every source of `session` (a new conversation). Returns how many were removed.
    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>>;
}

/// The provenance key of `session_id` in `tenant` (length-prefixed, so no tenant can spell
/// another's key).
pub fn session_key(tenant: &str, session_id: &str) -> String {
    crate::store::tenant_key(tenant, '|', session_id)
}

/// The key under which `session_id`'s trusted values (user turns, trusted tools' outputs) are
/// kept in the same [`ProvenanceStore`], beside its sources (never equal to a [`session_key`]).
pub fn trusted_key(tenant: &str, session_id: &str) -> String {
    crate::store::tenant_key(tenant, '~', session_id)
}

impl ProvenanceStore for MemoryStore {
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>> {
        self.with_sources(|all| {
            let list = all.entry(session.to_owned()).or_default();
            if !list.iter().any(|s| s.id == source.id) {
                list.push(source.clone());
            }
            let extra = list.len().saturating_sub(MAX_SOURCES_PER_SESSION);
            list.drain(..extra);
        });
        Box::pin(std::future::ready(Ok(())))
    }

    fn sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<Source>>> {
        let list = self.with_sources(|all| all.get(session).cloned().unwrap_or_default());
        Box::pin(std::future::ready(Ok(list)))
    }

    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>> {
        let n = self.with_sources(|all| all.remove(session).map_or(0, |l| l.len() as u64));
        Box::pin(std::future::ready(Ok(n)))
    }
}

impl Deadlined<dyn ProvenanceStore> {
    /// [`ProvenanceStore::add_source`] under the deadline.
    pub(crate) async fn add_source(&self, session: &str, source: &Source) -> StoreResult<()> {
        self.timed("provenance add", self.inner().add_source(session, source))
            .await
    }

    /// [`ProvenanceStore::sources`] under the deadline.
    pub(crate) async fn sources(&self, session: &str) -> StoreResult<Vec<Source>> {
        self.timed("provenance read", self.inner().sources(session))
            .await
    }

    /// [`ProvenanceStore::clear_sources`] under the deadline.
    pub(crate) async fn clear_sources(&self, session: &str) -> StoreResult<u64> {
        self.timed("provenance clear", self.inner().clear_sources(session))
            .await
    }
}

impl ProvenanceStore for Deadlined<dyn ProvenanceStore> {
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>> {
        Box::pin(Deadlined::<dyn ProvenanceStore>::add_source(
            self, session, source,
        ))
    }

    fn sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<Source>>> {
        Box::pin(Deadlined::<dyn ProvenanceStore>::sources(self, session))
    }

    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>> {
        Box::pin(Deadlined::<dyn ProvenanceStore>::clear_sources(
            self, session,
        ))
    }
}

impl<T: ProvenanceStore + ?Sized> ProvenanceStore for std::sync::Arc<T> {
    fn add_source<'a>(
        &'a self,
        session: &'a str,
        source: &'a Source,
    ) -> BoxFuture<'a, StoreResult<()>> {
        (**self).add_source(session, source)
    }

    fn sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<Vec<Source>>> {
        (**self).sources(session)
    }

    fn clear_sources<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<u64>> {
        (**self).clear_sources(session)
    }
}
