//! The in-memory detection store (one process; the default). Scopes whose marks all left their
//! window are swept once the map grows past a bound, so memory stays bounded by live scopes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::SessionResponse;
use super::{DetectionStore, Mark, Marks, live, millis};
use crate::clock::unix_millis;
use crate::store::StoreResult;
use crate::tool::BoxFuture;

/// Scopes kept before expired ones are swept.
const SWEEP_AT: usize = 4096;

#[derive(Default)]
struct State {
    /// Marks per scope, with the end of the longest window they were admitted under.
    marks: HashMap<String, (Marks, u64)>,
    claims: HashMap<String, u64>,
    responses: HashMap<String, SessionResponse>,
}

/// Detection state in this process.
#[derive(Default)]
pub struct MemoryDetectionStore {
    state: Mutex<State>,
}

impl std::fmt::Debug for MemoryDetectionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDetectionStore")
            .finish_non_exhaustive()
    }
}

impl MemoryDetectionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many scopes hold marks (bounded by the sweep).
    pub fn scopes(&self) -> usize {
        self.lock().marks.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn ready<T: Send + 'static>(v: T) -> BoxFuture<'static, T> {
    Box::pin(std::future::ready(v))
}

impl DetectionStore for MemoryDetectionStore {
    fn observe<'a>(
        &'a self,
        scope: &'a str,
        mark: Mark,
        window: Duration,
        keep: usize,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Marks>> {
        let now_ms = unix_millis(now);
        let mut state = self.lock();
        if state.marks.len() >= SWEEP_AT {
            state.marks.retain(|_, (_, until)| *until > now_ms);
            state.claims.retain(|_, until| *until > now_ms);
        }
        let until = now_ms.saturating_add(millis(window));
        let (marks, end) = state.marks.entry(scope.to_owned()).or_default();
        marks.admit(mark, window, keep, now);
        *end = (*end).max(until);
        ready(Ok(marks.clone()))
    }

    fn claim<'a>(
        &'a self,
        key: &'a str,
        ttl: Duration,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<bool>> {
        let now_ms = unix_millis(now);
        let mut state = self.lock();
        let claimed = match state.claims.get(key) {
            Some(until) if *until > now_ms => false,
            _ => {
                let until = now_ms.saturating_add(millis(ttl).max(1));
                state.claims.insert(key.to_owned(), until);
                true
            }
        };
        ready(Ok(claimed))
    }

    fn respond<'a>(&'a self, response: &'a SessionResponse) -> BoxFuture<'a, StoreResult<()>> {
        let key = response.key();
        self.lock().responses.insert(key, response.clone());
        ready(Ok(()))
    }

    fn response<'a>(
        &'a self,
        session: &'a str,
        now: SystemTime,
    ) -> BoxFuture<'a, StoreResult<Option<SessionResponse>>> {
        let now_ms = unix_millis(now);
        let found = self.lock().responses.get(session).cloned();
        ready(Ok(found.filter(|r| live(r, now_ms))))
    }

    fn lift<'a>(&'a self, session: &'a str) -> BoxFuture<'a, StoreResult<bool>> {
        ready(Ok(self.lock().responses.remove(session).is_some()))
    }
}
