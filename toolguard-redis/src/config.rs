//! Where the Redis stores connect and over how many connections.

/// Connections a store opens unless told otherwise.
pub const DEFAULT_CONNECTIONS: usize = 2;

/// Where and how a [`RedisStore`](crate::RedisStore) connects.
///
/// Every call's commands go over one of `connections` multiplexed connections, taken in turn;
/// each connection pipelines the commands of every call that uses it. With one connection the
/// server answers one batch while the client waits, then the client handles the replies while
/// the server waits; with two, one connection's replies are handled while the server answers
/// the other's batch (measured in `BENCHMARKS.md`, "Replicas"). More connections than the
/// machine has cores seldom help.
///
/// ```
/// use toolguard_redis::RedisConfig;
///
/// let config = RedisConfig::new("redis://127.0.0.1:6379", "myapp:toolguard").connections(4);
/// assert_eq!(config.connections, 4);
/// assert_eq!(RedisConfig::new("redis://127.0.0.1:6379", "p").connections, 2);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisConfig {
    /// A `redis://` (or `rediss://`, `unix://`) URL.
    pub url: String,
    /// The prefix of every key (followed by a colon).
    pub prefix: String,
    /// Multiplexed connections the store's commands are spread over (at least 1).
    pub connections: usize,
}

impl RedisConfig {
    /// Connects to `url` with keys under `prefix`, over [`DEFAULT_CONNECTIONS`] connections.
    pub fn new(url: impl Into<String>, prefix: impl Into<String>) -> Self {
        RedisConfig {
            url: url.into(),
            prefix: prefix.into(),
            connections: DEFAULT_CONNECTIONS,
        }
    }

    /// Spreads the commands over `n` connections (0 counts as 1).
    #[must_use]
    pub fn connections(mut self, n: usize) -> Self {
        self.connections = n.max(1);
        self
    }
}
