//! The dispatcher as a `tower::Service` (feature `tower`), so hosts add their own layers
//! (timeouts, concurrency limits, tracing) around the whole pipeline. The layers wrap the
//! pipeline; they cannot reach into it, so every built-in stage still runs for every call.
//!
//! ```
//! use tower::{Service, ServiceBuilder, ServiceExt};
//! use toolguard_pipeline::dispatcher::DispatchRequest;
//! use toolguard_pipeline::{Dispatcher, Principal, Status, ToolCall};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let dispatcher = Dispatcher::builder(()).build().unwrap();
//! let mut service = ServiceBuilder::new().concurrency_limit(8).service(dispatcher);
//! let request = DispatchRequest::new(
//!     ToolCall::new("call-1", "no_such_tool", "{}"),
//!     Principal::new("acme", "alice", "session-1"),
//! );
//! let outcome = service.ready().await.unwrap().call(request).await.unwrap();
//! assert_eq!(outcome.status, Status::UnknownTool);
//! # });
//! ```

use std::convert::Infallible;
use std::task::{Context, Poll};

use super::Dispatcher;
use crate::call::{Principal, ToolCall};
use crate::outcome::ToolOutcome;
use crate::tool::BoxFuture;

/// A call and the trusted principal it runs for.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DispatchRequest {
    /// The model's call.
    pub call: ToolCall,
    /// The authenticated caller, from the host's auth layer.
    pub principal: Principal,
}

impl DispatchRequest {
    /// `call`, run for `principal`.
    pub fn new(call: ToolCall, principal: Principal) -> Self {
        DispatchRequest { call, principal }
    }
}

/// Always ready; every request runs [`Dispatcher::dispatch`] and answers its outcome (never an
/// error: failures are outcomes with a status).
impl<S: Send + Sync + 'static> tower_service::Service<DispatchRequest> for Dispatcher<S> {
    type Response = ToolOutcome;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<ToolOutcome, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: DispatchRequest) -> Self::Future {
        let dispatcher = self.clone();
        Box::pin(async move { Ok(dispatcher.dispatch(request.call, &request.principal).await) })
    }
}
