//! Which requests were decided, newest first, so that the console can list them. The store keeps
//! the requests; this keeps their ids. Add a [`History`] to the dispatcher as a notifier to see
//! every decision and expiry, wherever it was made.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use toolguard_pipeline::notify::{
    ApprovalEvent, ApprovalEventKind, ApprovalNotifier, NotifyReport,
};

/// Ids kept at most.
pub const HISTORY_CAPACITY: usize = 1000;

/// Ids of decided (or expired) approval requests with their tenant, newest first. Cheap to clone;
/// clones share the list.
#[derive(Clone, Default)]
pub struct History {
    ids: Arc<Mutex<VecDeque<(String, String)>>>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").finish_non_exhaustive()
    }
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        History::default()
    }

    /// Records that request `id` of `tenant` was decided.
    pub fn record(&self, tenant: &str, id: &str) {
        let Ok(mut ids) = self.ids.lock() else {
            return;
        };
        ids.retain(|(_, known)| known != id);
        ids.push_front((tenant.to_owned(), id.to_owned()));
        ids.truncate(HISTORY_CAPACITY);
    }

    /// Ids of `tenant`'s decided requests, newest first, at most `limit`.
    pub fn of_tenant(&self, tenant: &str, limit: usize) -> Vec<String> {
        let Ok(ids) = self.ids.lock() else {
            return Vec::new();
        };
        ids.iter()
            .filter(|(t, _)| t == tenant)
            .take(limit)
            .map(|(_, id)| id.clone())
            .collect()
    }
}

impl ApprovalNotifier for History {
    fn notify(&self, event: ApprovalEvent, _report: NotifyReport) {
        if matches!(
            event.kind,
            ApprovalEventKind::Decided | ApprovalEventKind::Expired
        ) {
            self.record(&event.tenant, &event.approval_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_first_per_tenant_without_duplicates() {
        let h = History::new();
        h.record("acme", "a");
        h.record("globex", "g");
        h.record("acme", "b");
        h.record("acme", "a");
        assert_eq!(h.of_tenant("acme", 10), vec!["a", "b"]);
        assert_eq!(h.of_tenant("globex", 10), vec!["g"]);
        assert_eq!(h.of_tenant("acme", 1), vec!["a"]);
    }

    #[test]
    fn keeps_a_bounded_number_of_ids() {
        let h = History::new();
        for i in 0..HISTORY_CAPACITY + 10 {
            h.record("acme", &i.to_string());
        }
        assert_eq!(h.of_tenant("acme", usize::MAX).len(), HISTORY_CAPACITY);
    }
}
