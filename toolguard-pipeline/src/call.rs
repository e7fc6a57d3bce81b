//! What arrives at the dispatcher: the model's proposal ([`ToolCall`], untrusted) and the
//! authenticated caller ([`Principal`], trusted, supplied by the host application).

use std::sync::Arc;
use std::time::SystemTime;

use arcstr::ArcStr;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Arguments exactly as the provider delivered them.
///
/// OpenAI sends a JSON *string* (possibly invalid, possibly with duplicate keys); Anthropic and
/// Gemini send an already-parsed object. Both are accepted; the string form is parsed strictly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RawArguments {
    /// A JSON document still to be parsed.
    Json(String),
    /// An already-parsed JSON value.
    Value(Value),
}

impl RawArguments {
    /// The pipeline's argument gate: checks these arguments against `limits` (size, depth, keys,
    /// items, string length) the way every call is checked before it is parsed. `Err` with
    /// status `malformed` and a reason code (`too_large`, `too_deep`, `too_many_keys`,
    /// `too_many_keys_total`, `too_many_items`, `string_too_long`) when a limit is crossed.
    /// Invalid JSON text is left to [`parse`](Self::parse).
    ///
    /// ```
    /// use toolguard_pipeline::{Limits, RawArguments};
    /// let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    /// let stop = RawArguments::Json(format!("{{\"a\":{deep}}}"))
    ///     .check_limits(&Limits::default())
    ///     .unwrap_err();
    /// assert_eq!(stop.reason.as_deref(), Some("too_deep"));
    /// ```
    pub fn check_limits(&self, limits: &crate::Limits) -> Result<(), crate::outcome::Stop> {
        use toolguard_sanitize::limits::{check_text, check_value};
        let result = match self {
            RawArguments::Json(text) => check_text(text.as_bytes(), limits),
            RawArguments::Value(value) => check_value(value, limits),
        };
        result.map_err(|over| {
            let (code, message) = over.describe(limits);
            crate::outcome::Stop::new(crate::outcome::Status::Malformed, code, message)
        })
    }

    /// The pipeline's parse stage: the arguments as one JSON object, with no duplicate keys at
    /// any depth. `Err` with status `malformed` (`empty`, `invalid_json`, `duplicate_key`,
    /// `trailing_data`, `not_an_object`) otherwise.
    pub fn parse(&self) -> Result<Value, crate::outcome::Stop> {
        use toolguard_sanitize::json::{self, JsonError};
        let malformed = |reason: &str, message: String| {
            crate::outcome::Stop::new(crate::outcome::Status::Malformed, reason, message)
        };
        let value = match self {
            RawArguments::Value(v) => v.clone(),
            RawArguments::Json(text) if text.trim().is_empty() => {
                return Err(malformed(
                    "empty",
                    "arguments are empty; send a JSON object".into(),
                ));
            }
            // The gate measured the text already: the strict reader alone.
            RawArguments::Json(text) => json::strict(text, usize::MAX).map_err(|e| match e {
                JsonError::DuplicateKey(_) => {
                    malformed("duplicate_key", "arguments repeat a key".into())
                }
                JsonError::TrailingData => malformed(
                    "trailing_data",
                    "arguments hold more than one JSON value".into(),
                ),
                e => malformed("invalid_json", format!("arguments are not valid JSON: {e}")),
            })?,
        };
        if !value.is_object() {
            let message = "arguments must be a JSON object".to_owned();
            return Err(malformed("not_an_object", message));
        }
        Ok(value)
    }
}

/// Parses one JSON document strictly (no duplicate keys at any depth, nothing after it), without
/// the size and object checks of [`RawArguments::parse`]. `None` when it does not parse.
pub fn strict_json(text: &str) -> Option<Value> {
    toolguard_sanitize::json::strict(text, usize::MAX).ok()
}

impl From<&str> for RawArguments {
    fn from(s: &str) -> Self {
        RawArguments::Json(s.to_owned())
    }
}

impl From<String> for RawArguments {
    fn from(s: String) -> Self {
        RawArguments::Json(s)
    }
}

impl From<Value> for RawArguments {
    fn from(v: Value) -> Self {
        RawArguments::Value(v)
    }
}

/// Where a call came from: provider, API family, adapter revision and response id.
///
/// These feed the approval digest, so an approval granted for one provider turn cannot be replayed
/// through another adaptation path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderContext {
    /// Provider name, e.g. `openai`, `anthropic`, `gemini`, `mcp`.
    pub provider: String,
    /// API family, e.g. `chat_completions`, `responses`, `messages`.
    pub api_family: String,
    /// Revision of the adapter that produced the call.
    pub adapter_revision: String,
    /// The provider's response (message) id, when it has one.
    pub response_id: Option<String>,
}

/// A tool call proposed by a model. Everything in it is untrusted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCall {
    /// The provider's call id (or one the host made up).
    pub call_id: String,
    /// The tool name the model asked for.
    pub tool: String,
    /// The arguments the model proposed.
    pub arguments: RawArguments,
    /// Provider path of the call, when known.
    pub provider: Option<ProviderContext>,
    /// An idempotency key supplied by the host (takes precedence over one in the arguments).
    pub idempotency_key: Option<String>,
    /// How long to wait for a call with the same key that is still executing, instead of
    /// answering `in_progress` at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_in_progress: Option<std::time::Duration>,
    /// The ids of the session's provenance sources that were in the model's context for this
    /// call, when the host knows (`None`: all of the session's sources). Set by the host, never
    /// from the model's output; see [`crate::provenance`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<String>>,
}

impl ToolCall {
    /// A call with the given id, tool name and arguments.
    pub fn new(
        call_id: impl Into<String>,
        tool: impl Into<String>,
        arguments: impl Into<RawArguments>,
    ) -> Self {
        ToolCall {
            call_id: call_id.into(),
            tool: tool.into(),
            arguments: arguments.into(),
            provider: None,
            idempotency_key: None,
            wait_in_progress: None,
            sources: None,
        }
    }

    /// Sets the provider path of the call.
    #[must_use]
    pub fn with_provider(mut self, provider: ProviderContext) -> Self {
        self.provider = Some(provider);
        self
    }

    /// Waits up to `at_most` for a call with the same key that is still executing, then answers
    /// with its outcome (or executes, if it released the key), instead of `in_progress`.
    #[must_use]
    pub fn wait_in_progress(mut self, at_most: std::time::Duration) -> Self {
        self.wait_in_progress = Some(at_most);
        self
    }

    /// Narrows the session's provenance sources to those with these ids: the host knows that
    /// only they were in the model's context for this call (e.g. it trimmed the conversation).
    #[must_use]
    pub fn with_sources(mut self, ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.sources = Some(ids.into_iter().map(Into::into).collect());
        self
    }

    /// Sets a host-supplied idempotency key.
    #[must_use]
    pub fn with_idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
}

/// The authenticated caller, from the host application's auth layer. Trusted.
///
/// Tools never read identity or authority from model arguments; they read it from here through
/// [`crate::ToolContext`]. Its strings are shared (`ArcStr`): a call copies the principal into
/// its handler context and audit entry without copying the strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Principal {
    /// Tenant the caller belongs to.
    pub tenant: ArcStr,
    /// The caller (user or service) within the tenant.
    pub subject: ArcStr,
    /// Roles granted by the auth layer.
    pub roles: Arc<[String]>,
    /// The agent session the call belongs to (scopes per-session limits).
    pub session_id: ArcStr,
    /// When the caller authenticated; checked for freshness.
    pub authenticated_at: SystemTime,
}

impl Principal {
    /// A principal authenticated now, with no roles.
    pub fn new(
        tenant: impl AsRef<str>,
        subject: impl AsRef<str>,
        session_id: impl AsRef<str>,
    ) -> Self {
        Principal {
            tenant: tenant.as_ref().into(),
            subject: subject.as_ref().into(),
            roles: Arc::from([]),
            session_id: session_id.as_ref().into(),
            authenticated_at: SystemTime::now(),
        }
    }

    /// Adds a role.
    #[must_use]
    pub fn with_role(mut self, role: impl Into<String>) -> Self {
        let mut roles = self.roles.to_vec();
        roles.push(role.into());
        self.roles = roles.into();
        self
    }

    /// Sets the authentication time.
    #[must_use]
    pub fn authenticated_at(mut self, at: SystemTime) -> Self {
        self.authenticated_at = at;
        self
    }

    /// Whether the principal holds `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }
}
