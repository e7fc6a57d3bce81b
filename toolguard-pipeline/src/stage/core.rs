//! What the stages read: the registry, the configuration and the stores of a built dispatcher.
//! Stages take a `&Core` and never call back into the dispatcher; every store in it is wrapped
//! in the store deadline when the dispatcher is built.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arcstr::ArcStr;
use jsonschema::Validator;

use crate::access::Authorizer;
use crate::access::PrincipalRefresher;
use crate::audit::AuditSink;
use crate::call::Principal;
use crate::clock::Clock;
use crate::custom::CustomStages;
use crate::erased::ErasedTool;
use crate::metrics::ToolKeys;
use crate::risk::RiskPolicy;
use crate::sanitize::Sanitizer;
use crate::spec::ToolSpec;
use crate::store::deadline::Deadlined;
use crate::store::{ApprovalStore, IdempotencyStore, OperationStore, SessionLedger};
use crate::tool::ToolContext;

/// A registered tool with its compiled schemas.
pub(crate) struct Registered<S: Send + Sync + 'static> {
    /// The tool's name, shared with the calls that name it.
    pub(crate) name: ArcStr,
    pub(crate) tool: Arc<dyn ErasedTool<S>>,
    pub(crate) input: Validator,
    pub(crate) output: Validator,
    /// The tool's metric keys, made once.
    pub(crate) metrics: ToolKeys,
    /// The `opaque` fields whose schema leaves the sanitizer nothing to judge once the arguments
    /// passed the schema check (numbers, booleans, nulls, the schema's own constants, lists and
    /// closed objects of them), decided here, at registration, from the input schema
    /// ([`settled_fields`]).
    pub(crate) settled: Vec<String>,
    /// The risk policy's rules of this tool (the empty rules without any), looked up once, at
    /// build, rather than by name on every call.
    pub(crate) rules: crate::risk::ToolRules,
    /// How long this tool's stored outcomes are kept under their idempotency keys (the
    /// builder's `idempotency_ttl`, else the default), looked up once, at build.
    pub(crate) idempotency_ttl: Duration,
}

/// The `opaque` fields of `spec` that its input schema settles
/// ([`toolguard_sanitize::nested::SchemaAt::settled`]).
pub(crate) fn settled_fields(spec: &ToolSpec) -> Vec<String> {
    spec.fields
        .iter()
        .filter(|f| f.kind == toolguard_sanitize::FieldKind::Opaque)
        .filter(|f| {
            toolguard_sanitize::nested::SchemaAt::field(&spec.input_schema, &f.name).settled()
        })
        .map(|f| f.name.clone())
        .collect()
}

/// What the sanitizer reads of a registered tool: its declaration, and the fields settled at
/// registration. Only for arguments validated against the tool's input schema first.
pub(crate) struct RegisteredRules<'a, S: Send + Sync + 'static>(pub(crate) &'a Registered<S>);

impl<S: Send + Sync + 'static> toolguard_sanitize::ToolRules for RegisteredRules<'_, S> {
    type Field = crate::spec::FieldSpec;
    fn tool_name(&self) -> &str {
        &self.0.spec().name
    }
    fn input_schema(&self) -> &serde_json::Value {
        &self.0.spec().input_schema
    }
    fn field_rule(&self, name: &str) -> Option<&crate::spec::FieldSpec> {
        self.0.spec().field(name)
    }
    fn settled(&self, name: &str) -> bool {
        self.0.settled.iter().any(|f| f == name)
    }
}

impl<S: Send + Sync + 'static> Registered<S> {
    pub(crate) fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    /// The typed arguments, decoded once from the call's one copy of the arguments.
    pub(crate) fn decode(
        &self,
        args: &serde_json::Value,
    ) -> Result<Box<dyn crate::erased::DecodedArgs<S> + '_>, super::Stop> {
        self.tool
            .decode_ref(args)
            .map_err(super::validate::decode_error)
    }
}

/// The stores a call's path uses, each under the store deadline.
pub(crate) struct Stores {
    pub(crate) idempotency: Arc<Deadlined<dyn IdempotencyStore>>,
    pub(crate) approvals: Arc<Deadlined<dyn ApprovalStore>>,
    pub(crate) ledger: Arc<Deadlined<dyn SessionLedger>>,
    pub(crate) operations: Arc<Deadlined<dyn OperationStore>>,
    pub(crate) provenance: Arc<Deadlined<dyn crate::provenance::ProvenanceStore>>,
}

/// The registry and configuration of a built dispatcher.
pub(crate) struct Core<S: Send + Sync + 'static> {
    /// The registered tools by name: an ordered map, so that looking up the (untrusted) name a
    /// call carries costs a few string comparisons and no hashing.
    pub(crate) tools: BTreeMap<String, Registered<S>>,
    pub(crate) order: Vec<String>,
    pub(crate) state: Arc<S>,
    pub(crate) authorizer: Box<dyn Authorizer>,
    pub(crate) refresher: Option<Box<dyn PrincipalRefresher>>,
    pub(crate) sanitizer: Sanitizer,
    pub(crate) audit: Arc<dyn AuditSink>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) principal_max_age: Duration,
    pub(crate) policy: RiskPolicy,
    pub(crate) stores: Stores,
    pub(crate) fail_open_read_only: bool,
    pub(crate) custom: CustomStages,
    pub(crate) notifiers: crate::notify::Notifiers,
    /// The host's MAC keys (keyed request digests); `None` only when no tool has a `sensitive`
    /// field.
    pub(crate) keys: Option<Arc<crate::keys::HostKeys>>,
    /// The key of provenance value hashes: the active host key's, else random per dispatcher.
    pub(crate) value_key: crate::provenance::ValueKey,
    /// The detector fed by every finished call, if detection is configured.
    pub(crate) detector: Option<crate::detect::observation::Detector>,
    /// The metric keys of calls naming no registered tool.
    pub(crate) unknown_metrics: ToolKeys,
    /// The idempotency keys in flight in this process (single flight).
    pub(crate) flights: super::flight::Flights,
}

impl<S: Send + Sync + 'static> Core<S> {
    /// The clock's time.
    pub(crate) fn now(&self) -> SystemTime {
        self.clock.now()
    }

    /// The declaration of tool `name`.
    pub(crate) fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.get(name).map(Registered::spec)
    }

    /// The metric keys of tool `name` (those of the `unknown` label when it is not registered).
    pub(crate) fn metrics(&self, name: &str) -> &ToolKeys {
        self.tools
            .get(name)
            .map_or(&self.unknown_metrics, |r| &r.metrics)
    }

    /// Lifetime of `spec`'s idempotency records.
    pub(crate) fn idempotency_ttl(&self, spec: &ToolSpec) -> Duration {
        self.tools
            .get(&spec.name)
            .map_or(crate::store::DEFAULT_IDEMPOTENCY_TTL, |r| r.idempotency_ttl)
    }

    /// The handler's context for `principal`.
    pub(crate) fn context(
        &self,
        principal: &Principal,
        call_id: ArcStr,
        operation_id: Option<ArcStr>,
    ) -> ToolContext<S> {
        ToolContext::new(
            Arc::new(principal.clone()),
            self.state.clone(),
            call_id,
            operation_id,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolguard_sanitize::FieldKind;

    use super::*;
    use crate::spec::FieldSpec;

    #[test]
    fn registration_settles_scalar_and_enum_fields_and_lists_of_them_only() {
        let schema = json!({"type": "object", "properties": {
            "amount": {"type": "integer"},
            "currency": {"type": "string", "enum": ["USD", "EUR"]},
            "extra": {"type": "object"},
            "memo": {"type": "string", "enum": ["a", "b"]},
            "rails": {"type": "array", "items": {"$ref": "#/$defs/Rail"}},
            "notes": {"type": "array", "items": {"type": "string"}},
        }, "$defs": {"Rail": {"type": "string", "enum": ["sepa", "swift"]}}});
        let mut spec = ToolSpec::new("pay", "d", schema, json!({}));
        spec.fields = vec![
            FieldSpec::new("amount").with_kind(FieldKind::Opaque),
            FieldSpec::new("currency").with_kind(FieldKind::Opaque),
            FieldSpec::new("extra").with_kind(FieldKind::Opaque),
            // Declared text: judged as text whatever its schema says.
            FieldSpec::new("memo").with_kind(FieldKind::Text),
            // A list of an enum's members is settled; a list of strings of the model's own is not.
            FieldSpec::new("rails").with_kind(FieldKind::Opaque),
            FieldSpec::new("notes").with_kind(FieldKind::Opaque),
        ];
        assert_eq!(settled_fields(&spec), ["amount", "currency", "rails"]);
    }
}
