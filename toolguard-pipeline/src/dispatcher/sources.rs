//! The session's provenance sources as the host sees them: add one it placed into the context
//! itself, clear them for a new conversation, list them, and ask what the flow policy does to a
//! tool (see [`crate::provenance`]).

use super::Dispatcher;
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::provenance::{FlowAction, Source, session_key};
use crate::store::StoreError;

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// Adds a source the host placed into `principal`'s session context itself (an uploaded
    /// document, retrieved passages), labelled `label` for reviewers. Returns the source, whose
    /// id audit queries join on.
    pub async fn add_source(
        &self,
        principal: &Principal,
        label: impl Into<String>,
    ) -> Result<Source, StoreError> {
        let source = Source::host(label, unix_millis(self.core.now()));
        let key = session_key(&principal.tenant, &principal.session_id);
        self.core
            .stores
            .provenance
            .add_source(&key, &source)
            .await?;
        Ok(source)
    }

    /// Removes every source of `principal`'s session (a new conversation). Returns how many
    /// were removed.
    pub async fn clear_sources(&self, principal: &Principal) -> Result<u64, StoreError> {
        let key = session_key(&principal.tenant, &principal.session_id);
        self.core.stores.provenance.clear_sources(&key).await
    }

    /// The sources of `principal`'s session, oldest first.
    pub async fn sources(&self, principal: &Principal) -> Result<Vec<Source>, StoreError> {
        let key = session_key(&principal.tenant, &principal.session_id);
        self.core.stores.provenance.sources(&key).await
    }

    /// What the flow policy does to a call of `tool` in a session with sources (`None` for an
    /// unknown tool).
    pub fn flow_action(&self, tool: &str) -> Option<FlowAction> {
        let spec = self.core.spec(tool)?;
        Some(
            self.core
                .policy
                .current_flow()
                .action(spec, &self.core.sanitizer),
        )
    }
}
