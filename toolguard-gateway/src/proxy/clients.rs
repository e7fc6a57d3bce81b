//! The MCP clients connected to the proxy, told `notifications/tools/list_changed` when the tool
//! set the proxy exposes changes (a policy reload, or the upstream announcing new tools), and
//! the upstream's `notifications/resources/list_changed` and `notifications/prompts/list_changed`.

use std::sync::Mutex;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::Peer;

/// How long one client may take to accept a notification before it is skipped.
const NOTIFY_DEADLINE: Duration = Duration::from_secs(5);

/// A list whose changes clients are told about.
#[derive(Debug, Clone, Copy)]
pub(super) enum List {
    Tools,
    Resources,
    Prompts,
}

/// The connected clients (one over stdio, one per session over Streamable HTTP).
#[derive(Default)]
pub(super) struct Clients {
    peers: Mutex<Vec<Peer<RoleServer>>>,
}

impl Clients {
    /// Registers an initialized client; clients whose transport closed are dropped.
    pub(super) fn add(&self, peer: Peer<RoleServer>) {
        let mut peers = self.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// Sends `notifications/tools/list_changed` to every connected client; returns how many it
    /// reached.
    pub(super) async fn tools_changed(&self) -> usize {
        self.changed(List::Tools).await
    }

    /// Sends the `list_changed` notification of `list` to every connected client; returns how
    /// many it reached.
    pub(super) async fn changed(&self, list: List) -> usize {
        let mut reached = 0;
        for peer in self.open() {
            let sent = match list {
                List::Tools => {
                    tokio::time::timeout(NOTIFY_DEADLINE, peer.notify_tool_list_changed()).await
                }
                List::Resources => {
                    tokio::time::timeout(NOTIFY_DEADLINE, peer.notify_resource_list_changed()).await
                }
                List::Prompts => {
                    tokio::time::timeout(NOTIFY_DEADLINE, peer.notify_prompt_list_changed()).await
                }
            };
            if matches!(sent, Ok(Ok(()))) {
                reached += 1;
            }
        }
        reached
    }

    /// The most recently connected client still connected.
    pub(super) fn newest(&self) -> Option<Peer<RoleServer>> {
        self.open().pop()
    }

    fn open(&self) -> Vec<Peer<RoleServer>> {
        let mut peers = self.lock();
        peers.retain(|p| !p.is_transport_closed());
        peers.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Peer<RoleServer>>> {
        match self.peers.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
