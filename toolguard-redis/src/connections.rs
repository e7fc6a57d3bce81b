//! The connections a store's commands go over, taken in turn.

use std::sync::atomic::{AtomicUsize, Ordering};

use redis::aio::ConnectionManager;

use crate::RedisConfig;
use crate::store::err;
use toolguard_pipeline::store::{StoreError, StoreResult};

/// Multiplexed connections to one server (never none), each reconnecting by itself after the
/// server restarts or the link drops. Cloning shares the connections.
pub(crate) struct Connections {
    all: Vec<ConnectionManager>,
    /// The connection the next command takes, modulo their number.
    next: AtomicUsize,
}

impl Connections {
    /// Opens `config.connections` connections (at least one) to `config.url`, all of them now:
    /// an unreachable server is an error here, not on the first call. A command fails when its
    /// reply has not come within `config.reply_timeout` (the client's own default, half a
    /// second, would answer a loaded server `unavailable` before the dispatcher's store
    /// deadline). Without any bound, a command queued on a connection as it drops can wait
    /// forever: the connection's task ends, and the queued command is neither sent nor failed.
    pub(crate) async fn open(config: &RedisConfig) -> StoreResult<Self> {
        if config.reply_timeout.is_zero() {
            return Err(StoreError::new(
                "redis: `reply_timeout` is zero: every command would fail before its reply",
            ));
        }
        let client = redis::Client::open(config.url.as_str()).map_err(err)?;
        let manager = redis::aio::ConnectionManagerConfig::new()
            .set_response_timeout(Some(config.reply_timeout));
        let n = config.connections.max(1);
        let mut all = Vec::with_capacity(n);
        for _ in 0..n {
            let conn = ConnectionManager::new_with_config(client.clone(), manager.clone())
                .await
                .map_err(err)?;
            all.push(conn);
        }
        Ok(Connections {
            all,
            next: AtomicUsize::new(0),
        })
    }

    /// A handle on the next connection in turn (cheap to clone).
    pub(crate) fn next(&self) -> ConnectionManager {
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        self.all[turn % self.all.len()].clone()
    }

    /// How many connections there are.
    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }
}

impl Clone for Connections {
    fn clone(&self) -> Self {
        Connections {
            all: self.all.clone(),
            next: AtomicUsize::new(self.next.load(Ordering::Relaxed)),
        }
    }
}
