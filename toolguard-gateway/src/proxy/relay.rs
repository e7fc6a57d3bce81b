//! Everything that passes between the connected clients and the upstream beside the guard
//! decisions: requests forwarded with their cancellation, progress tokens mapped both ways,
//! the upstream's own requests (sampling, elicitation, roots) and notifications routed to the
//! client whose request they belong to, resource subscriptions, and the upstream requests a
//! reviewer holds.
//!
//! A request forwarded upstream gets rmcp's own request id and progress token there; the relay
//! remembers which client and which client token each upstream token stands for, so
//! `notifications/progress` goes back to that client with that client's token, and a client's
//! `notifications/cancelled` cancels the upstream request. The upstream's requests and log
//! messages go to the client of the newest request still in flight (the one that can have
//! caused them), else to the most recently connected client; over Streamable HTTP they travel
//! on that request's stream.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CancelledNotificationParam, ClientRequest, ClientResult, GetExtensions,
    ProgressNotificationParam, ProgressToken, RequestId, ServerRequest, ServerResult,
};
use rmcp::service::{OriginatingRequestId, Peer, PeerRequestOptions, RequestContext, ServiceError};
use rmcp::{ErrorData, RoleClient, RoleServer};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::call_results::CallResults;
use super::clients::Clients;
use toolguard_policy::{Policy, UpstreamRequestAction};

/// The client request an upstream exchange serves: who asked, with which progress token, and
/// the token its cancellation fires.
#[derive(Clone)]
pub(crate) struct Caller {
    /// The connected client (one per stdio session or Streamable HTTP session).
    pub(crate) client: u64,
    pub(crate) context: RequestContext<RoleServer>,
}

impl Caller {
    /// The caller of the request `context` belongs to, of client `client`.
    pub(crate) fn of(client: u64, context: &RequestContext<RoleServer>) -> Caller {
        Caller {
            client,
            context: context.clone(),
        }
    }

    fn progress(&self) -> Option<ProgressToken> {
        self.context.meta.get_progress_token()
    }
}

tokio::task_local! {
    /// The caller of the `tools/call` the dispatcher is running (the forwarder reads it).
    pub(crate) static CALLER: Caller;
}

/// One upstream request a reviewer must decide.
struct Held {
    kind: &'static str,
    summary: Value,
    decide: oneshot::Sender<bool>,
}

/// Resource URI → the clients (id, peer) subscribed to it.
type Subscribers = HashMap<String, Vec<(u64, Peer<RoleServer>)>>;

/// Longest an answer waits for the notifications that arrived before it to be passed on. A
/// notification goes to one client; a client that does not read its stream can hold another
/// client's answer this long, once (then its notifications are no longer waited for).
const NOTES_WAIT: Duration = Duration::from_millis(500);

/// The progress and log notifications of the upstream: how many arrived (counted by the
/// transport, in the order of the upstream's messages) and how many were passed on (each in a
/// task of its own). An answer is passed on once every notification that arrived before it
/// was: a client sees a request's progress and log messages before its result, as the
/// upstream sent them, and none is dropped for arriving after its request ended.
#[derive(Default)]
pub(crate) struct Notes {
    arrived: AtomicU64,
    passed: AtomicU64,
    changed: tokio::sync::Notify,
}

/// Counts one notification passed on when dropped (also when its task fails).
pub(crate) struct Passing<'a>(&'a Notes);

impl Drop for Passing<'_> {
    fn drop(&mut self) {
        self.0.passed.fetch_add(1, Ordering::AcqRel);
        self.0.changed.notify_waiters();
    }
}

impl Notes {
    /// One more notification arrived.
    pub(crate) fn arrived(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
    }

    /// A notification being passed on: counted as passed when the guard drops.
    pub(crate) fn passing(&self) -> Passing<'_> {
        Passing(self)
    }

    /// Waits until every notification that has arrived so far was passed on, at most
    /// [`NOTES_WAIT`]; after that the ones still missing are no longer waited for.
    async fn caught_up(&self) {
        let mark = self.arrived.load(Ordering::Acquire);
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if self.passed.load(Ordering::Acquire) >= mark {
                    return;
                }
                changed.await;
            }
        };
        if tokio::time::timeout(NOTES_WAIT, wait).await.is_err() {
            tracing::warn!("upstream notifications were not passed on within {NOTES_WAIT:?}");
            self.passed.fetch_max(mark, Ordering::AcqRel);
        }
    }
}

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Relay {
    pub(crate) clients: Clients,
    /// The upstream's progress and log notifications, arrived and passed on.
    pub(crate) notes: Notes,
    next: AtomicU64,
    /// Upstream progress token → the caller of the request it belongs to.
    routes: Mutex<HashMap<ProgressToken, (u64, Caller)>>,
    /// Resource URI → clients subscribed to it.
    subscribers: Mutex<Subscribers>,
    held: Mutex<HashMap<String, Held>>,
    /// `[sampling]` and `[elicitation]` of the policy in force.
    actions: Mutex<(UpstreamRequestAction, UpstreamRequestAction)>,
    /// Results of forwarded tool calls, kept by the upstream transport as they arrived.
    pub(crate) results: CallResults,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// Removes a route when the exchange ends (also when its future is dropped).
struct RouteGuard<'a> {
    relay: &'a Relay,
    token: ProgressToken,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        lock(&self.relay.routes).remove(&self.token);
    }
}

/// The JSON-RPC error of a failed exchange: the peer's own error passes unchanged.
pub(crate) fn service_error(e: ServiceError) -> ErrorData {
    match e {
        ServiceError::McpError(e) => e,
        ServiceError::Timeout { timeout } => ErrorData::internal_error(
            format!(
                "the upstream did not answer within {}s (`[proxy] upstream_timeout_secs`)",
                timeout.as_secs()
            ),
            None,
        ),
        other => ErrorData::internal_error(format!("the upstream exchange failed: {other}"), None),
    }
}

fn cancelled() -> ErrorData {
    ErrorData::internal_error("the request was cancelled by the client", None)
}

impl Relay {
    /// Puts the `[sampling]` and `[elicitation]` actions of `policy` in force.
    pub(crate) fn set_policy(&self, policy: &Policy) {
        *lock(&self.actions) = (policy.sampling.action, policy.elicitation.action);
    }

    /// What the policy in force does with the upstream's `sampling/createMessage` (`sampling`)
    /// or `elicitation/create` requests.
    pub(crate) fn action(&self, sampling: bool) -> UpstreamRequestAction {
        let (s, e) = *lock(&self.actions);
        if sampling { s } else { e }
    }

    /// Sends `request` upstream for `caller` and waits for the answer within `timeout`; the
    /// caller's cancellation is passed on as `notifications/cancelled`.
    pub(crate) async fn forward(
        &self,
        upstream: &Peer<RoleClient>,
        caller: &Caller,
        request: ClientRequest,
        timeout: Duration,
    ) -> Result<ServerResult, ErrorData> {
        let (answer, ()) = self
            .forward_with(upstream, Some(caller), request, timeout, |_| ())
            .await?;
        Ok(answer)
    }

    /// [`forward`](Self::forward), also for a request outside any client request (`caller`
    /// `None`: no progress or cancellation to map), calling `sent` with the request's upstream
    /// id once it is sent; what `sent` returns lives until the answer was passed on.
    pub(crate) async fn forward_with<T>(
        &self,
        upstream: &Peer<RoleClient>,
        caller: Option<&Caller>,
        request: ClientRequest,
        timeout: Duration,
        sent: impl FnOnce(&RequestId) -> T,
    ) -> Result<(ServerResult, T), ErrorData> {
        let options = PeerRequestOptions::with_timeout(timeout);
        let Some(caller) = caller else {
            let handle = upstream
                .send_cancellable_request(request, options)
                .await
                .map_err(service_error)?;
            let kept = sent(&handle.id);
            let answer = handle.await_response().await.map_err(service_error)?;
            return Ok((answer, kept));
        };
        let mut meta = caller.context.meta.clone();
        meta.0.0.remove("progressToken");
        let handle = upstream
            .send_cancellable_request(request, options.with_meta(meta))
            .await
            .map_err(service_error)?;
        let id = handle.id.clone();
        let kept = sent(&id);
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.routes).insert(handle.progress_token.clone(), (seq, caller.clone()));
        let _route = RouteGuard {
            relay: self,
            token: handle.progress_token.clone(),
        };
        tokio::select! {
            answer = handle.await_response() => {
                // The request's progress and log messages go first, with its route still
                // known.
                self.notes.caught_up().await;
                answer.map(|a| (a, kept)).map_err(service_error)
            }
            () = caller.context.ct.cancelled() => {
                let mut note = CancelledNotificationParam::new(Some(id), None);
                note.reason = Some("cancelled by the client".to_owned());
                let _ = upstream.notify_cancelled(note).await;
                Err(cancelled())
            }
        }
    }

    /// The caller of the newest exchange in flight.
    fn newest(&self) -> Option<Caller> {
        lock(&self.routes)
            .values()
            .max_by_key(|(seq, _)| *seq)
            .map(|(_, c)| c.clone())
    }

    /// Passes the upstream's `notifications/progress` to the client that asked, with its token
    /// (dropped when that client sent none).
    pub(crate) async fn progress(&self, mut params: ProgressNotificationParam) {
        let _passed = self.notes.passing();
        let route = lock(&self.routes).get(&params.progress_token).cloned();
        let Some((_, caller)) = route else { return };
        let Some(token) = caller.progress() else {
            return;
        };
        params.progress_token = token;
        let _ = caller.context.peer.notify_progress(params).await;
    }

    /// The client the upstream's own requests and messages go to, and the request of that
    /// client they belong to.
    fn target(&self) -> Option<(Peer<RoleServer>, Option<RequestId>)> {
        match self.newest() {
            Some(c) => Some((c.context.peer, Some(c.context.id))),
            None => self.clients.newest().map(|p| (p, None)),
        }
    }

    /// Sends the upstream's `request` (sampling, elicitation, roots, ping) to the client it
    /// belongs to; the upstream's cancellation (`context`) is passed on.
    pub(crate) async fn ask_client(
        &self,
        mut request: ServerRequest,
        context: &RequestContext<RoleClient>,
    ) -> Result<ClientResult, ErrorData> {
        let Some((peer, origin)) = self.target() else {
            return Err(ErrorData::internal_error(
                "no MCP client is connected to the gateway",
                None,
            ));
        };
        if let Some(origin) = origin {
            request
                .extensions_mut()
                .insert(OriginatingRequestId(origin));
        }
        let handle = peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
            .map_err(service_error)?;
        let id = handle.id.clone();
        tokio::select! {
            answer = handle.await_response() => answer.map_err(service_error),
            () = context.ct.cancelled() => {
                let mut note = CancelledNotificationParam::new(Some(id), None);
                note.reason = Some("cancelled by the upstream".to_owned());
                let _ = peer.notify_cancelled(note).await;
                Err(cancelled())
            }
        }
    }

    /// The client the upstream's log messages go to.
    pub(crate) fn log_target(&self) -> Option<Peer<RoleServer>> {
        self.target().map(|(p, _)| p)
    }

    /// Records that the caller's client subscribed to `uri`.
    pub(crate) fn subscribe(&self, uri: &str, caller: &Caller) {
        let mut subs = lock(&self.subscribers);
        let list = subs.entry(uri.to_owned()).or_default();
        list.retain(|(id, p)| *id != caller.client && !p.is_transport_closed());
        list.push((caller.client, caller.context.peer.clone()));
    }

    /// Records that the caller's client unsubscribed from `uri`; whether no client is
    /// subscribed any more.
    pub(crate) fn unsubscribe(&self, uri: &str, caller: &Caller) -> bool {
        let mut subs = lock(&self.subscribers);
        let Some(list) = subs.get_mut(uri) else {
            return true;
        };
        list.retain(|(id, p)| *id != caller.client && !p.is_transport_closed());
        let empty = list.is_empty();
        if empty {
            subs.remove(uri);
        }
        empty
    }

    /// The clients subscribed to `uri`.
    pub(crate) fn subscribers(&self, uri: &str) -> Vec<Peer<RoleServer>> {
        lock(&self.subscribers)
            .get(uri)
            .map(|l| {
                l.iter()
                    .filter(|(_, p)| !p.is_transport_closed())
                    .map(|(_, p)| p.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Holds an upstream request of `kind` until a reviewer decides it or `timeout` passes;
    /// whether it was approved.
    pub(crate) async fn hold(&self, kind: &'static str, summary: Value, timeout: Duration) -> bool {
        let id = format!("upr_{}", uuid::Uuid::new_v4().simple());
        let (decide, decision) = oneshot::channel();
        lock(&self.held).insert(
            id.clone(),
            Held {
                kind,
                summary,
                decide,
            },
        );
        let approved = matches!(tokio::time::timeout(timeout, decision).await, Ok(Ok(true)));
        lock(&self.held).remove(&id);
        approved
    }

    /// The upstream requests waiting for a reviewer.
    pub(crate) fn held(&self) -> Value {
        let held = lock(&self.held);
        let mut list: Vec<Value> = held
            .iter()
            .map(|(id, h)| json!({"id": id, "kind": h.kind, "request": h.summary}))
            .collect();
        list.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
        Value::Array(list)
    }

    /// Decides a held request; whether it was waiting.
    pub(crate) fn decide(&self, id: &str, approve: bool) -> bool {
        match lock(&self.held).remove(id) {
            Some(h) => h.decide.send(approve).is_ok(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{NOTES_WAIT, Notes};

    #[tokio::test]
    async fn an_answer_waits_for_the_notifications_that_arrived_before_it() {
        let notes = Arc::new(Notes::default());
        notes.arrived();
        notes.arrived();
        let first = notes.passing();
        drop(first);
        // One of the two is still being passed on: the answer waits for it.
        let waiting = tokio::spawn({
            let notes = notes.clone();
            async move { notes.caught_up().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        let second = notes.passing();
        drop(second);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("caught up once both were passed on")
            .expect("the task ran");
        // A notification that arrives later does not hold an answer that is already caught up.
        let started = Instant::now();
        notes.caught_up().await;
        assert!(started.elapsed() < Duration::from_millis(100));
    }

    #[tokio::test]
    async fn a_notification_never_passed_on_holds_one_answer_at_most_the_wait() {
        let notes = Notes::default();
        notes.arrived();
        let started = Instant::now();
        notes.caught_up().await;
        assert!(started.elapsed() >= NOTES_WAIT);
        // It is not waited for again.
        let started = Instant::now();
        notes.caught_up().await;
        assert!(started.elapsed() < Duration::from_millis(100));
    }
}
