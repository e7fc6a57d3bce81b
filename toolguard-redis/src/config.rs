//! Where the Redis stores connect, over how many connections, and how long a reply may take.

use std::time::Duration;

use toolguard_pipeline::store::encode::without_credentials;

/// Connections a store opens unless told otherwise.
pub const DEFAULT_CONNECTIONS: usize = 2;

/// How long a command waits for its reply unless told otherwise: far above the dispatcher's
/// store deadline (two seconds unless the host sets another), which decides first.
pub const DEFAULT_REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how a [`RedisStore`](crate::RedisStore) connects.
///
/// Every call's commands go over one of `connections` multiplexed connections, taken in turn;
/// each connection pipelines the commands of every call that uses it. With one connection the
/// server answers one batch while the client waits, then the client handles the replies while
/// the server waits; with two, one connection's replies are handled while the server answers
/// the other's batch (measured in `BENCHMARKS.md`, "Replicas"). More connections than the
/// machine has cores seldom help.
///
/// How long a call may wait for the store is the dispatcher's store deadline
/// (`DispatcherBuilder::store_deadline`). The connection's own bound, `reply_timeout`, is a
/// backstop for commands that no deadline no longer than it covers (the store used directly):
/// a command whose connection dropped while it was still queued may otherwise never be
/// answered. Under a shorter store deadline a command sets no timer of its own. Keep it above
/// the store deadline, so that a slow server is answered `unavailable` at the deadline the
/// host chose.
///
/// ```
/// use std::time::Duration;
/// use toolguard_redis::RedisConfig;
///
/// let config = RedisConfig::new("redis://127.0.0.1:6379", "myapp:toolguard")
///     .connections(4)
///     .reply_timeout(Duration::from_secs(10));
/// assert_eq!(config.connections, 4);
/// assert_eq!(config.reply_timeout, Duration::from_secs(10));
/// let defaults = RedisConfig::new("redis://127.0.0.1:6379", "p");
/// assert_eq!((defaults.connections, defaults.reply_timeout.as_secs()), (2, 30));
/// ```
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisConfig {
    /// A `redis://` (or `rediss://`, `unix://`) URL. It may hold a password: `Debug` shows the
    /// URL without what comes before its `@`.
    pub url: String,
    /// The prefix of every key (followed by a colon).
    pub prefix: String,
    /// Multiplexed connections the store's commands are spread over (at least 1).
    pub connections: usize,
    /// How long a command waits for its reply before it fails (above zero), unless a shorter
    /// store deadline of the dispatcher's covers it: [`DEFAULT_REPLY_TIMEOUT`] unless told
    /// otherwise.
    pub reply_timeout: Duration,
}

impl RedisConfig {
    /// Connects to `url` with keys under `prefix`, over [`DEFAULT_CONNECTIONS`] connections.
    pub fn new(url: impl Into<String>, prefix: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: prefix.into(),
            connections: DEFAULT_CONNECTIONS,
            reply_timeout: DEFAULT_REPLY_TIMEOUT,
        }
    }

    /// Spreads the commands over `n` connections (0 counts as 1).
    #[must_use]
    pub fn connections(mut self, n: usize) -> Self {
        self.connections = n.max(1);
        self
    }

    /// Fails a command whose reply has not come within `timeout` (zero is refused when the
    /// store connects).
    #[must_use]
    pub fn reply_timeout(mut self, timeout: Duration) -> Self {
        self.reply_timeout = timeout;
        self
    }
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &without_credentials(&self.url))
            .field("prefix", &self.prefix)
            .field("connections", &self.connections)
            .field("reply_timeout", &self.reply_timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_leaves_the_password_out() {
        for (url, shown) in [
            ("redis://:hunter2@cache:6379/0", "redis://…@cache:6379/0"),
            ("rediss://app:p%40ss@cache:6380", "rediss://…@cache:6380"),
            ("redis://cache:6379/0?user=a", "redis://cache:6379/0?user=a"),
            ("unix:///run/redis.sock", "unix:///run/redis.sock"),
            ("not a url", "not a url"),
        ] {
            let debug = format!("{:?}", RedisConfig::new(url, "p"));
            assert!(debug.contains(shown), "{debug}");
            assert!(
                !debug.contains("hunter2") && !debug.contains("p%40ss"),
                "{debug}"
            );
        }
    }
}
