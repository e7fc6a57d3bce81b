//! The MCP clients connected to the proxy, told `notifications/tools/list_changed` when the tool
//! set the proxy exposes changes (a policy reload, or the upstream announcing new tools).

use std::sync::Mutex;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::Peer;

/// How long one client may take to accept a notification before it is skipped.
const NOTIFY_DEADLINE: Duration = Duration::from_secs(5);

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
        let peers: Vec<Peer<RoleServer>> = {
            let mut peers = self.lock();
            peers.retain(|p| !p.is_transport_closed());
            peers.clone()
        };
        let mut reached = 0;
        for peer in peers {
            let sent = tokio::time::timeout(NOTIFY_DEADLINE, peer.notify_tool_list_changed()).await;
            if matches!(sent, Ok(Ok(()))) {
                reached += 1;
            }
        }
        reached
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Peer<RoleServer>>> {
        match self.peers.lock() {
            Ok(p) => p,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
