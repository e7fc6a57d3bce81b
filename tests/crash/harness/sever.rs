//! Store connections cut from the server's side at random moments: every PostgreSQL session of
//! the dispatcher processes terminated (`pg_terminate_backend`, found by the application name
//! the processes connect with) and every Redis connection of theirs closed (`CLIENT KILL USER`,
//! found by the Redis user the processes log in as), while a statement, a script or a commit
//! may be under way. The processes live on and reconnect; the invariants must hold as they do
//! when a process is killed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::admin::{self, redis_error};
use super::cluster::Cluster;

/// The server-side names the dispatcher processes connect under, so that only their
/// connections are cut (not the harness's own, nor those of anything else on the servers).
#[derive(Debug, Clone)]
pub(crate) struct Names {
    /// The PostgreSQL `application_name` of the processes' sessions.
    pub(crate) application: String,
    /// The Redis user the processes log in as (created for the run, removed after it).
    pub(crate) redis_user: String,
    /// That user's password, made for the run.
    redis_password: String,
}

impl Names {
    /// The names of run `tag`.
    pub(crate) fn of(tag: &str) -> Self {
        Names {
            application: format!("{tag}_node"),
            redis_user: format!("{tag}_node"),
            redis_password: format!("{:016x}{:016x}", unguessable(), unguessable()),
        }
    }

    /// `url` with the processes' application name added (a URL or a `key=value` string).
    pub(crate) fn pg_url(&self, url: &str) -> String {
        if url.contains("://") {
            let sep = if url.contains('?') { '&' } else { '?' };
            format!("{url}{sep}application_name={}", self.application)
        } else {
            format!("{url} application_name={}", self.application)
        }
    }

    /// `url` logging in as the processes' Redis user. A URL that carries credentials of its own
    /// is refused: the processes would log in as someone else, whose connections the harness
    /// must not cut.
    pub(crate) fn redis_url(&self, url: &str) -> Result<String, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("`{url}` is not a redis:// URL"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') {
            return Err(
                "--sever-ms needs a Redis URL without credentials (the dispatcher processes \
                 log in as a user of their own)"
                    .into(),
            );
        }
        Ok(format!(
            "{scheme}://{}:{}@{rest}",
            self.redis_user, self.redis_password
        ))
    }
}

/// 64 bits no one can guess: a hasher's random keys (made per process from the system's
/// randomness), hashing nothing.
fn unguessable() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// The connections the harness cuts with.
pub(crate) struct Severer {
    names: Names,
    pg: tokio_postgres::Client,
    redis: Option<admin::Redis>,
    /// PostgreSQL sessions terminated.
    pub(crate) pg_sessions: AtomicU64,
    /// Redis connections closed.
    pub(crate) redis_connections: AtomicU64,
}

impl std::fmt::Debug for Severer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Severer")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Severer {
    /// Connects to PostgreSQL (and Redis, when given) and, on Redis, creates the processes'
    /// user: its password, every key, channel and command.
    pub(crate) async fn connect(
        names: Names,
        pg_url: &str,
        redis_url: Option<&str>,
    ) -> Result<Self, String> {
        let (pg, redis) = admin::connect(pg_url, redis_url).await?;
        let redis = match redis {
            Some(mut conn) => {
                redis::cmd("ACL")
                    .arg("SETUSER")
                    .arg(&names.redis_user)
                    .arg("reset")
                    .arg("on")
                    .arg(format!(">{}", names.redis_password))
                    .arg("~*")
                    .arg("&*")
                    .arg("+@all")
                    .exec_async(&mut conn)
                    .await
                    .map_err(redis_error)?;
                Some(conn)
            }
            None => None,
        };
        Ok(Severer {
            names,
            pg,
            redis,
            pg_sessions: AtomicU64::new(0),
            redis_connections: AtomicU64::new(0),
        })
    }

    /// Cuts every connection the processes have now; how many were cut.
    async fn cut(&self) -> Result<u64, String> {
        let row = self
            .pg
            .query_one(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
                 WHERE application_name = $1 AND pid <> pg_backend_pid()",
                &[&self.names.application],
            )
            .await
            .map_err(|e| format!("postgres: {e}"))?;
        let sessions = u64::try_from(row.get::<_, i64>(0)).unwrap_or(0);
        self.pg_sessions.fetch_add(sessions, Ordering::SeqCst);
        let mut cut = sessions;
        if let Some(conn) = &self.redis {
            let closed: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("USER")
                .arg(&self.names.redis_user)
                .query_async(&mut conn.clone())
                .await
                .map_err(redis_error)?;
            let closed = u64::try_from(closed).unwrap_or(0);
            self.redis_connections.fetch_add(closed, Ordering::SeqCst);
            cut += closed;
        }
        Ok(cut)
    }

    /// While the cluster's processes are being killed (the load of each round), cuts their
    /// store connections every `gap` (random in the range). Runs until `stop` is set.
    pub(crate) async fn run(
        self: Arc<Self>,
        cluster: Arc<Cluster>,
        seed: u64,
        gap: (u64, u64),
        stop: Arc<AtomicBool>,
    ) -> Result<(), String> {
        let this = &*self;
        cluster
            .during_load(
                seed,
                gap,
                &stop,
                |_| async move { this.cut().await.map(drop) },
            )
            .await
    }

    /// Removes the processes' Redis user (end of the run).
    pub(crate) async fn remove_user(&self) {
        if let Some(conn) = &self.redis {
            let _ = redis::cmd("ACL")
                .arg("DELUSER")
                .arg(&self.names.redis_user)
                .exec_async(&mut conn.clone())
                .await;
        }
    }
}
