//! The connections a store's commands go over, taken in turn, each replaced when it can no
//! longer connect by itself.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, RedisError, RedisFuture, RetryMethod, Value};

use crate::RedisConfig;
use crate::store::err;
use toolguard_pipeline::store::{StoreError, StoreResult, deadline_in_force};

/// Multiplexed connections to one server (never none), each reconnecting by itself after the
/// server restarts or the link drops. Cloning shares the connections.
#[derive(Clone)]
pub(crate) struct Connections {
    all: Arc<[Arc<Slot>]>,
    /// The connection the next command takes, modulo their number.
    next: Arc<AtomicUsize>,
}

/// One of the connections: its manager, and what a fresh one is made from.
struct Slot {
    /// The manager and how many times it was replaced.
    current: RwLock<(u64, ConnectionManager)>,
    client: redis::Client,
    config: ConnectionManagerConfig,
    /// How long a command no shorter limit covers waits for its reply.
    reply_timeout: Duration,
}

impl Connections {
    /// Opens `config.connections` connections (at least one) to `config.url`, all of them now:
    /// an unreachable server is an error here, not on the first call. A command fails when its
    /// reply has not come within `config.reply_timeout`, unless a shorter limit covers it (the
    /// dispatcher's store deadline), which then drops it first ([`Slot::bounded`]). Without any
    /// bound, a command queued on a connection as it drops can wait forever: the connection's
    /// task ends, and the queued command is neither sent nor failed. (The client's own timer,
    /// half a second by default, is turned off: it would time every command, covered or not.)
    pub(crate) async fn open(config: &RedisConfig) -> StoreResult<Self> {
        if config.reply_timeout.is_zero() {
            return Err(StoreError::new(
                "redis: `reply_timeout` is zero: every command would fail before its reply",
            ));
        }
        let client = redis::Client::open(config.url.as_str()).map_err(err)?;
        let manager = ConnectionManagerConfig::new().set_response_timeout(None);
        let n = config.connections.max(1);
        let mut all = Vec::with_capacity(n);
        for _ in 0..n {
            let conn = ConnectionManager::new_with_config(client.clone(), manager.clone())
                .await
                .map_err(err)?;
            all.push(Arc::new(Slot {
                current: RwLock::new((0, conn)),
                client: client.clone(),
                config: manager.clone(),
                reply_timeout: config.reply_timeout,
            }));
        }
        Ok(Connections {
            all: all.into(),
            next: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// A handle on the next connection in turn (cheap to clone).
    pub(crate) fn next(&self) -> Connection {
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = &self.all[turn % self.all.len()];
        let (generation, manager) = slot
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Connection {
            manager,
            slot: slot.clone(),
            generation,
        }
    }

    /// How many connections there are.
    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }
}

impl Slot {
    /// `command`, failing as an I/O error (a lost reply, sent again where that is safe) when
    /// its reply has not come within the reply timeout. Under a limit no longer than that (the
    /// dispatcher's store deadline, see [`deadline_in_force`]), the limit drops the command
    /// first, and no timer of its own is set: most commands are covered, and a timer per
    /// command costs a few percent of a store's throughput (`BENCHMARKS.md`, "Redis
    /// connections that do not come back").
    async fn bounded<T>(
        &self,
        command: impl Future<Output = redis::RedisResult<T>>,
    ) -> redis::RedisResult<T> {
        if deadline_in_force().is_some_and(|limit| limit <= self.reply_timeout) {
            return command.await;
        }
        match tokio::time::timeout(self.reply_timeout, command).await {
            Ok(answer) => answer,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no reply within the reply timeout ({} ms)",
                    self.reply_timeout.as_millis()
                ),
            ))),
        }
    }

    /// After a command on generation `generation` of this connection failed with `e`: when the
    /// connection cannot get well by itself, a fresh one takes its place (once per generation;
    /// it connects on its first command).
    ///
    /// The client's manager reconnects by itself after an I/O error, but when reconnecting
    /// fails for another reason through all its tries (the server still loading its data
    /// after a restart, the store's password refused for a while), it keeps that error and
    /// answers every later command with it, also after the server is well again.
    fn failed(&self, e: &RedisError, generation: u64) {
        let stays_down = !e.is_io_error()
            && matches!(
                e.retry_method(),
                RetryMethod::Reconnect
                    | RetryMethod::ReconnectFromInitialConnections
                    | RetryMethod::WaitAndRetry
            );
        if !stays_down {
            return;
        }
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if current.0 != generation {
            return;
        }
        if let Ok(fresh) =
            ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone())
        {
            *current = (generation + 1, fresh);
        }
    }
}

/// One of a store's connections, for a command or a few: the commands go over its manager, and
/// a failure that leaves the manager unable to reconnect replaces it ([`Slot::failed`]).
#[derive(Clone)]
pub(crate) struct Connection {
    manager: ConnectionManager,
    slot: Arc<Slot>,
    generation: u64,
}

impl ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let answer = self
                .slot
                .bounded(self.manager.send_packed_command(cmd))
                .await;
            if let Err(e) = &answer {
                self.slot.failed(e, self.generation);
            }
            answer
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let answers = self
                .slot
                .bounded(self.manager.send_packed_commands(pipeline, offset, count))
                .await;
            if let Err(e) = &answers {
                self.slot.failed(e, self.generation);
            }
            answers
        })
    }

    fn get_db(&self) -> i64 {
        self.manager.get_db()
    }
}
