//! A webhook [`ApprovalNotifier`]: POSTs each approval event as JSON, signed with HMAC-SHA256,
//! retrying with exponential backoff for a bounded time. It never blocks or fails the call path:
//! `notify` only spawns a delivery task, and an event that cannot be delivered is recorded in the
//! dispatcher's audit trail (kind `notification`, reason `webhook_undeliverable`,
//! `webhook_rejected` or `webhook_overloaded`).
//!
//! It is also a detection [`AlertSink`](toolguard_pipeline::detect::AlertSink): alerts are POSTed to the
//! same URL, signed alike, with `Toolguard-Event: alert`.
//!
//! # Signature
//!
//! Every request carries
//!
//! ```text
//! Toolguard-Signature: t=1796290800,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd
//! Toolguard-Event: opened
//! Toolguard-Delivery: 0b9c…               (the same for every retry of one event)
//! ```
//!
//! where `v1` is the lowercase hex `HMAC-SHA256(secret, t + "." + body)` over the exact body bytes
//! and `t` the Unix time in seconds of that attempt (as payment webhooks do). A receiver
//! recomputes it, compares in constant time, and refuses a `t` older than a few minutes (replay);
//! [`verify_signature`] does all three. Deduplicate on `Toolguard-Delivery`: a retry after a lost
//! response delivers the same event again.
//!
//! # Bodies
//!
//! [`Format::Json`] sends the [`ApprovalEvent`] itself. [`Format::Chat`] sends `{"text": ".."}`
//! for chat incoming webhooks (Slack, Mattermost, Rocket.Chat, Teams workflows): a one-line
//! summary with a link to the console's detail page. Neither carries the arguments.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use tokio::sync::Semaphore;
use toolguard_pipeline::notify::{
    ApprovalEvent, ApprovalEventKind, ApprovalNotifier, NotifyReport,
};

use crate::money::{format_amount, format_instant};

/// Header with the timestamp and signature.
pub const SIGNATURE_HEADER: &str = "toolguard-signature";
/// Header with the event kind (`opened`, `approved`, `decided`, `expired`).
pub const EVENT_HEADER: &str = "toolguard-event";
/// Header with the delivery id, stable across retries of one event.
pub const DELIVERY_HEADER: &str = "toolguard-delivery";

/// What the body looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    /// The event as JSON (default).
    Json,
    /// `{"text": ".."}` for chat incoming webhooks, linking to `console_url` (the console's
    /// public base URL, like `https://bank.example/console`).
    Chat {
        /// The console's base URL.
        console_url: String,
    },
}

/// How long and how often to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// Stop retrying once this much time passed since the first attempt (default 10 min).
    pub max_elapsed: Duration,
    /// Wait before the first retry; doubles after each (default 500 ms).
    pub initial_backoff: Duration,
    /// Longest wait between attempts (default 60 s).
    pub max_backoff: Duration,
    /// Time limit of one attempt (default 10 s).
    pub attempt_timeout: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            max_elapsed: Duration::from_secs(600),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(60),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

/// Deliveries in flight at most (default); more are recorded as undeliverable at once.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;

/// Why a webhook notifier could not be built.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The URL is not `http(s)://…`.
    #[error("webhook URL {0:?} must start with http:// or https://")]
    Url(String),
    /// The secret is too short to sign with.
    #[error("the webhook secret must be at least 32 bytes (it has {0}); generate a random one")]
    ShortSecret(usize),
    /// The HTTP client could not be built.
    #[error("the webhook HTTP client could not be built: {0}")]
    Client(String),
}

struct Inner {
    url: String,
    secret: Vec<u8>,
    format: Format,
    retry: Retry,
    client: reqwest::Client,
    slots: Arc<Semaphore>,
}

/// POSTs signed approval events to one URL. Cheap to clone.
#[derive(Clone)]
pub struct WebhookNotifier {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for WebhookNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookNotifier").finish_non_exhaustive()
    }
}

impl WebhookNotifier {
    /// A notifier posting JSON to `url`, signed with `secret` (at least 32 bytes, shared with the
    /// receiver), with the default [`Retry`].
    pub fn new(url: &str, secret: impl Into<Vec<u8>>) -> Result<Self, WebhookError> {
        WebhookNotifier::with(url, secret, Format::Json, Retry::default())
    }

    /// A notifier with an explicit body format and retry bound.
    pub fn with(
        url: &str,
        secret: impl Into<Vec<u8>>,
        format: Format,
        retry: Retry,
    ) -> Result<Self, WebhookError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(WebhookError::Url(url.to_owned()));
        }
        let secret = secret.into();
        if secret.len() < 32 {
            return Err(WebhookError::ShortSecret(secret.len()));
        }
        let client = reqwest::Client::builder()
            .timeout(retry.attempt_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| WebhookError::Client(e.to_string()))?;
        Ok(WebhookNotifier {
            inner: Arc::new(Inner {
                url: url.to_owned(),
                secret,
                format,
                retry,
                client,
                slots: Arc::new(Semaphore::new(DEFAULT_MAX_IN_FLIGHT)),
            }),
        })
    }

    /// The body sent for `event`.
    pub fn body(&self, event: &ApprovalEvent) -> Vec<u8> {
        match &self.inner.format {
            Format::Json => serde_json::to_vec(event).unwrap_or_default(),
            Format::Chat { console_url } => {
                serde_json::to_vec(&serde_json::json!({ "text": chat_text(event, console_url) }))
                    .unwrap_or_default()
            }
        }
    }
}

impl ApprovalNotifier for WebhookNotifier {
    fn notify(&self, event: ApprovalEvent, report: NotifyReport) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(approval = %event.approval_id, "no async runtime to deliver the webhook on");
            return;
        };
        let inner = self.inner.clone();
        let body = self.body(&event);
        runtime.spawn(async move {
            let Ok(_slot) = inner.slots.clone().try_acquire_owned() else {
                record(&report, &event, "webhook_overloaded").await;
                return;
            };
            let (kind, delivery) = (kind_str(event.kind), delivery_id(&event));
            if let Err(code) = deliver(&inner, kind, &delivery, body).await {
                record(&report, &event, code).await;
            }
        });
    }
}

/// Detection alerts go to the same URL, signed alike, with event header `alert`: the JSON
/// [`Alert`](toolguard_pipeline::detect::Alert), or for [`Format::Chat`] a one-line summary. An alert
/// that cannot be delivered is logged (target `toolguard_pipeline::alert`); the alert's own audit entry
/// already records it.
impl toolguard_pipeline::detect::AlertSink for WebhookNotifier {
    fn alert(&self, alert: &toolguard_pipeline::detect::Alert) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::error!(rule = %alert.rule, "no async runtime to deliver the alert webhook on");
            return;
        };
        let body = match &self.inner.format {
            Format::Json => serde_json::to_vec(alert).unwrap_or_default(),
            Format::Chat { .. } => serde_json::to_vec(&serde_json::json!({
                "text": format!("Alert ({:?}) {}: {}", alert.severity, alert.rule, alert.summary)
            }))
            .unwrap_or_default(),
        };
        let delivery = format!(
            "alert.{}.{}.{}",
            alert.rule,
            alert.at_ms,
            alert.audit_seq.unwrap_or_default()
        );
        let inner = self.inner.clone();
        let rule = alert.rule.clone();
        runtime.spawn(async move {
            let Ok(_slot) = inner.slots.clone().try_acquire_owned() else {
                tracing::warn!(target: "toolguard_pipeline::alert", %rule, "alert webhook overloaded; not delivered");
                return;
            };
            if let Err(code) = deliver(&inner, "alert", &delivery, body).await {
                tracing::warn!(target: "toolguard_pipeline::alert", %rule, reason = code, "alert webhook undeliverable");
            }
        });
    }
}

async fn record(report: &NotifyReport, event: &ApprovalEvent, code: &str) {
    tracing::warn!(approval = %event.approval_id, reason = code, "approval notification undeliverable");
    if let Err(err) = report.undeliverable(event, code).await {
        tracing::error!(error = %err, "undeliverable notification could not be audited");
    }
}

/// Tries until a 2xx answer, a permanent refusal, or the time bound; `Err` holds the reason code.
async fn deliver(
    inner: &Inner,
    kind: &str,
    delivery: &str,
    body: Vec<u8>,
) -> Result<(), &'static str> {
    let started = tokio::time::Instant::now();
    let mut backoff = inner.retry.initial_backoff;
    loop {
        let signature = sign(&inner.secret, unix_secs(SystemTime::now()), &body);
        let sent = inner
            .client
            .post(&inner.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(SIGNATURE_HEADER, signature)
            .header(EVENT_HEADER, kind)
            .header(DELIVERY_HEADER, delivery)
            .body(body.clone())
            .send()
            .await;
        match sent.map(|r| r.status()) {
            Ok(s) if s.is_success() => return Ok(()),
            // The receiver refuses this request for good (bad signature, gone): retrying the
            // same bytes cannot help.
            Ok(s) if s.is_client_error() && s.as_u16() != 408 && s.as_u16() != 429 => {
                return Err("webhook_rejected");
            }
            Ok(s) => tracing::debug!(status = %s, "webhook attempt failed; retrying"),
            Err(e) => tracing::debug!(error = %e, "webhook attempt failed; retrying"),
        }
        if started.elapsed() + backoff > inner.retry.max_elapsed {
            return Err("webhook_undeliverable");
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(inner.retry.max_backoff);
    }
}

fn kind_str(kind: ApprovalEventKind) -> &'static str {
    match kind {
        ApprovalEventKind::Opened => "opened",
        ApprovalEventKind::Approved => "approved",
        ApprovalEventKind::Decided => "decided",
        ApprovalEventKind::Expired => "expired",
        _ => "event",
    }
}

/// One id per event: approval id, kind, and the event's time.
fn delivery_id(event: &ApprovalEvent) -> String {
    format!(
        "{}.{}.{}",
        event.approval_id,
        kind_str(event.kind),
        event.at_ms
    )
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// HMAC accepts keys of any length, so this is `None` only in theory.
fn mac(secret: &[u8], timestamp: u64, body: &[u8]) -> Option<Hmac<Sha256>> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).ok()?;
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(mac)
}

/// The `Toolguard-Signature` value of `body` at `timestamp` (Unix seconds).
pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let digest = mac(secret, timestamp, body).map(|m| hex::encode(m.finalize().into_bytes()));
    format!("t={timestamp},v1={}", digest.unwrap_or_default())
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The header is not `t=<secs>,v1=<hex>`.
    #[error("the signature header must look like t=<unix seconds>,v1=<hex HMAC-SHA256>")]
    Malformed,
    /// The timestamp is further from now than the tolerance (a replay, or a skewed clock).
    #[error("the signature timestamp is outside the tolerance; refuse it as a possible replay")]
    Stale,
    /// No `v1` matches the body.
    #[error("the signature does not match the body and secret")]
    Mismatch,
}

/// Checks a `Toolguard-Signature` header for `body` at `now`: the format, the timestamp within
/// `tolerance`, and the HMAC in constant time. For receivers.
pub fn verify_signature(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now: SystemTime,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => timestamp = v.parse::<u64>().ok(),
            Some(("v1", v)) => {
                signatures.push(hex::decode(v).map_err(|_| SignatureError::Malformed)?)
            }
            _ => {}
        }
    }
    let t = timestamp.ok_or(SignatureError::Malformed)?;
    if signatures.is_empty() {
        return Err(SignatureError::Malformed);
    }
    if unix_secs(now).abs_diff(t) > tolerance.as_secs() {
        return Err(SignatureError::Stale);
    }
    if signatures
        .iter()
        .any(|s| mac(secret, t, body).is_some_and(|m| m.verify_slice(s).is_ok()))
    {
        Ok(())
    } else {
        Err(SignatureError::Mismatch)
    }
}

/// The one-line chat summary of `event`, linking to its detail page under `console_url`.
pub fn chat_text(event: &ApprovalEvent, console_url: &str) -> String {
    let amount = event
        .amount
        .map(|a| format!(" of {}", format_amount(a, event.currency)))
        .unwrap_or_default();
    let what = match event.kind {
        ApprovalEventKind::Opened => format!(
            "Approval needed: {}{amount} requested by {}",
            event.tool, event.requester
        ),
        ApprovalEventKind::Approved => format!(
            "Approval {} of {} given for {}{amount} requested by {}",
            event.approvals_given, event.approvals_required, event.tool, event.requester
        ),
        ApprovalEventKind::Decided => format!(
            "Decided ({}): {}{amount} requested by {}",
            event.status.map_or("unknown", |s| s.as_str()),
            event.tool,
            event.requester
        ),
        ApprovalEventKind::Expired => format!(
            "Expired without a decision: {}{amount} requested by {}",
            event.tool, event.requester
        ),
        _ => format!(
            "Changed: {}{amount} requested by {}",
            event.tool, event.requester
        ),
    };
    format!(
        "{what} (tenant {}, expires {}). Review: {}/requests/{}",
        event.tenant,
        format_instant(event.expires_at_ms),
        console_url.trim_end_matches('/'),
        event.approval_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signature_verifies_only_with_its_secret_body_and_time() {
        let secret = [9u8; 32];
        let now = UNIX_EPOCH + Duration::from_secs(1_796_290_800);
        let header = sign(&secret, 1_796_290_800, b"{\"a\":1}");
        let tol = Duration::from_secs(300);
        assert_eq!(
            verify_signature(&secret, &header, b"{\"a\":1}", now, tol),
            Ok(())
        );
        assert_eq!(
            verify_signature(&secret, &header, b"{\"a\":2}", now, tol),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(
            verify_signature(&[8u8; 32], &header, b"{\"a\":1}", now, tol),
            Err(SignatureError::Mismatch)
        );
        let later = now + Duration::from_secs(301);
        assert_eq!(
            verify_signature(&secret, &header, b"{\"a\":1}", later, tol),
            Err(SignatureError::Stale)
        );
        assert_eq!(
            verify_signature(&secret, "v1=00", b"", now, tol),
            Err(SignatureError::Malformed)
        );
    }

    #[test]
    fn short_secrets_and_odd_urls_are_refused() {
        assert!(matches!(
            WebhookNotifier::new("http://127.0.0.1:1/hook", vec![1; 16]),
            Err(WebhookError::ShortSecret(16))
        ));
        assert!(matches!(
            WebhookNotifier::new("ftp://x", vec![1; 32]),
            Err(WebhookError::Url(_))
        ));
    }
}
