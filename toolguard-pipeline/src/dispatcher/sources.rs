//! The session's provenance sources as the host sees them: add one it placed into the context
//! itself (with its text, so its values are known), register what the user said (trusted
//! values), clear them for a new conversation, list them, and ask what the flow policy does to
//! a tool (see [`crate::provenance`]).

use super::Dispatcher;
use crate::call::Principal;
use crate::clock::unix_millis;
use crate::provenance::{FlowAction, Source, session_key, trusted_key};
use crate::store::StoreError;

impl<S: Send + Sync + 'static> Dispatcher<S> {
    /// Adds a source the host placed into `principal`'s session context itself (an uploaded
    /// document, retrieved passages), labelled `label` for reviewers. Returns the source, whose
    /// id audit queries join on.
    ///
    /// Its content is not known, so in the precise mode (see
    /// [`FlowPolicy::per_argument`](crate::provenance::FlowPolicy::per_argument)) any value a
    /// later call carries that no other content of the session holds may come from it, and is
    /// judged as untrusted (the source is marked
    /// [`values_truncated`](crate::provenance::Source::values_truncated)). Prefer
    /// [`add_source_text`](Self::add_source_text) or [`add_source_json`](Self::add_source_json),
    /// which tell the values it holds from those it does not.
    pub async fn add_source(
        &self,
        principal: &Principal,
        label: impl Into<String>,
    ) -> Result<Source, StoreError> {
        let mut source = Source::host(label, unix_millis(self.core.now()));
        source.values_truncated = true;
        self.store_source(principal, source).await
    }

    /// Adds a source the host placed into `principal`'s session context itself, with its
    /// `content` as JSON (a resource read, a prompt, a structured document): the values of its
    /// strings and numbers are kept as keyed hashes, as for a tool's untrusted result.
    pub async fn add_source_json(
        &self,
        principal: &Principal,
        label: impl Into<String>,
        content: &serde_json::Value,
    ) -> Result<Source, StoreError> {
        let source = Source::host(label, unix_millis(self.core.now()))
            .with_json(&self.core.value_key, content);
        self.store_source(principal, source).await
    }

    /// Adds a source the host placed into `principal`'s session context itself, with the
    /// `text` it put there: the values in it that can steer an action are kept as keyed hashes
    /// (never the text), so that an argument copied from it is judged `untrusted`.
    pub async fn add_source_text(
        &self,
        principal: &Principal,
        label: impl Into<String>,
        text: &str,
    ) -> Result<Source, StoreError> {
        let source =
            Source::host(label, unix_millis(self.core.now())).with_text(&self.core.value_key, text);
        self.store_source(principal, source).await
    }

    async fn store_source(
        &self,
        principal: &Principal,
        source: Source,
    ) -> Result<Source, StoreError> {
        let key = session_key(&principal.tenant, &principal.session_id);
        self.core
            .stores
            .provenance
            .add_source(&key, &source)
            .await?;
        Ok(source)
    }

    /// Registers one turn of what the user said in `principal`'s session: the values in
    /// `text` (an IBAN the user typed, an address, an amount, and each word and run of two and
    /// three words: a name such as `Breizh Cafe`) are trusted, and named by the user, so that a
    /// call carrying them runs unattended in the precise mode even after untrusted content was
    /// read.
    /// Kept as keyed hashes beside the sources (the newest
    /// [`MAX_SOURCES_PER_SESSION`](crate::provenance::MAX_SOURCES_PER_SESSION) turns and trusted
    /// outputs), cleared by [`clear_sources`](Self::clear_sources).
    ///
    /// Register only the user's own words: text the user pasted from elsewhere is as untrusted
    /// as where it came from.
    pub async fn add_trusted_input(
        &self,
        principal: &Principal,
        text: &str,
    ) -> Result<(), StoreError> {
        let record = Source::trusted("user input", unix_millis(self.core.now()))
            .with_input(&self.core.value_key, text);
        if record.values.is_empty() {
            return Ok(());
        }
        let key = trusted_key(&principal.tenant, &principal.session_id);
        self.core.stores.provenance.add_source(&key, &record).await
    }

    /// Removes every source and every trusted value of `principal`'s session (a new
    /// conversation). Returns how many sources were removed.
    pub async fn clear_sources(&self, principal: &Principal) -> Result<u64, StoreError> {
        let key = session_key(&principal.tenant, &principal.session_id);
        let trusted = trusted_key(&principal.tenant, &principal.session_id);
        self.core.stores.provenance.clear_sources(&trusted).await?;
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
