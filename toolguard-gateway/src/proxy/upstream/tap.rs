//! The upstream's messages in the order they arrive: a transport that counts the notifications
//! the relay passes on to a client (progress and log messages) before the SDK hands them to
//! tasks of their own, so that an answer is not passed on before the notifications that came
//! before it ([`Notes`](super::super::relay::Notes)).

use std::sync::Arc;

use rmcp::RoleClient;
use rmcp::model::{GetMeta, JsonRpcMessage, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::super::relay::Relay;

/// `inner`, with every progress and log notification counted as it arrives.
pub(super) struct Tapped<T> {
    inner: T,
    relay: Arc<Relay>,
}

impl<T> Tapped<T> {
    pub(super) fn new(inner: T, relay: Arc<Relay>) -> Self {
        Tapped { inner, relay }
    }
}

/// Whether the relay passes `message` on to a client as a notification it counts: a progress
/// or log notification (one of a subscription goes to that subscription's stream instead).
fn counted(message: &RxJsonRpcMessage<RoleClient>) -> bool {
    let JsonRpcMessage::Notification(n) = message else {
        return false;
    };
    matches!(
        n.notification,
        ServerNotification::ProgressNotification(_)
            | ServerNotification::LoggingMessageNotification(_)
    ) && n.notification.get_meta().subscription_id().is_none()
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Tapped<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), T::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await?;
        if counted(&message) {
            self.relay.notes.arrived();
        }
        Some(message)
    }

    async fn close(&mut self) -> Result<(), T::Error> {
        self.inner.close().await
    }
}
