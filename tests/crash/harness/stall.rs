//! Stores that answer late: during the load of each round the harness makes the store hold
//! every write for a while, past the dispatchers' store deadline (2 s) or not: PostgreSQL's
//! store tables locked (`LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`, in a transaction of the
//! harness's own), Redis's writes paused (`CLIENT PAUSE ms WRITE`), the SQLite file's write lock
//! held. A write whose caller stopped waiting (and answered `unavailable`, or gave up on a
//! settling write) then lands after all, when the stall ends: the invariants must hold as they
//! do when an answer is lost with a killed process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use toolguard_sqlite::SqliteStore;

use super::cluster::Cluster;
use super::rng::Rng;

/// The PostgreSQL tables a stall locks (a random non-empty subset each time).
const TABLES: [&str; 5] = [
    "toolguard_idempotency",
    "toolguard_operations",
    "toolguard_approvals",
    "toolguard_ledger",
    "toolguard_audit",
];

/// What a stall holds.
pub(crate) enum Target {
    /// The run's PostgreSQL schema (with Redis's writes too when a URL is given).
    Postgres {
        client: Box<tokio_postgres::Client>,
        schema: String,
        redis: Option<super::admin::Redis>,
    },
    /// The run's SQLite file, through a store of the harness's own.
    Sqlite(Arc<SqliteStore>),
}

/// Stalls the stores now and then while the processes are being killed.
pub(crate) struct Staller {
    target: Target,
    /// How long a stall holds the writes, in milliseconds (`LO`, `HI`).
    hold_ms: (u64, u64),
    /// Stalls made so far.
    pub(crate) stalls: Arc<AtomicU64>,
}

impl Staller {
    /// Connects to PostgreSQL at `pg_url` for schema `schema`, and to Redis at `redis_url` when
    /// given.
    pub(crate) async fn postgres(
        pg_url: &str,
        schema: &str,
        redis_url: Option<&str>,
        hold_ms: (u64, u64),
    ) -> Result<Self, String> {
        let (client, redis) = super::admin::connect(pg_url, redis_url).await?;
        Ok(Staller {
            target: Target::Postgres {
                client: Box::new(client),
                schema: schema.to_owned(),
                redis,
            },
            hold_ms,
            stalls: Arc::default(),
        })
    }

    /// Stalls through `store`, which has the run's SQLite file open.
    pub(crate) fn sqlite(store: Arc<SqliteStore>, hold_ms: (u64, u64)) -> Self {
        Staller {
            target: Target::Sqlite(store),
            hold_ms,
            stalls: Arc::default(),
        }
    }

    /// Holds the store's writes for a while (`hold_ms`), drawing what to hold from `seed`.
    async fn stall(&self, seed: u64) -> Result<(), String> {
        let mut rng = Rng::new(seed);
        let hold = Duration::from_millis(rng.between(self.hold_ms.0, self.hold_ms.1));
        match &self.target {
            Target::Postgres {
                client,
                schema,
                redis,
            } => {
                let mut tables: Vec<String> = TABLES
                    .iter()
                    .filter(|_| rng.chance(50))
                    .map(|t| format!("\"{schema}\".{t}"))
                    .collect();
                if tables.is_empty() {
                    let t = TABLES[rng.below(TABLES.len() as u64) as usize];
                    tables.push(format!("\"{schema}\".{t}"));
                }
                if let Some(conn) = redis {
                    // Redis ends the pause by itself.
                    redis::cmd("CLIENT")
                        .arg("PAUSE")
                        .arg(hold.as_millis() as u64)
                        .arg("WRITE")
                        .exec_async(&mut conn.clone())
                        .await
                        .map_err(|e| format!("redis: {e}"))?;
                }
                let pg = |e: tokio_postgres::Error| format!("postgres: {e}");
                client
                    .batch_execute(&format!(
                        "BEGIN; LOCK TABLE {} IN ACCESS EXCLUSIVE MODE",
                        tables.join(", ")
                    ))
                    .await
                    .map_err(pg)?;
                tokio::time::sleep(hold).await;
                client.batch_execute("COMMIT").await.map_err(pg)?;
            }
            Target::Sqlite(store) => {
                // A statement that writes takes the file's write lock (it changes no row);
                // the store's transaction holds it while the thread sleeps.
                store
                    .with_connection(move |conn| {
                        conn.execute("UPDATE toolguard_idempotency SET key = key WHERE 0", [])?;
                        std::thread::sleep(hold);
                        Ok(())
                    })
                    .await
                    .map_err(|e| format!("sqlite: {e}"))?;
            }
        }
        self.stalls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// While the cluster's processes are being killed (the load of each round), stalls the
    /// stores every `gap` (random in the range). Runs until `stop` is set.
    pub(crate) async fn run(
        self,
        cluster: Arc<Cluster>,
        seed: u64,
        gap: (u64, u64),
        stop: Arc<AtomicBool>,
    ) -> Result<(), String> {
        let this = &self;
        cluster
            .during_load(seed, gap, &stop, |seed| this.stall(seed))
            .await
    }
}
