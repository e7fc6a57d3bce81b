//! `crash_node`: one dispatcher process of the crash harness. It serves a high-risk `transfer`
//! tool over the harness's line protocol (`crash/protocol.rs`) on 127.0.0.1, against PostgreSQL
//! (every store and the audit trail), Redis (idempotency and session ledger; approvals,
//! operations and the audit trail in PostgreSQL) or one SQLite file that every process opens
//! (every store and the audit trail), and appends every executed transfer to a side-effect log. `TOOLGUARD_CRASH_POINT` / `TOOLGUARD_CRASH_AT` make it abort at a named
//! point (see `points.rs`).
//!
//! ```text
//! crash_node --node 1 --backend postgres --pg-url URL --schema NAME --dir DIR
//!            [--redis-url URL --prefix P]
//! crash_node --node 1 --backend sqlite --dir DIR        (the file is DIR/store.db)
//! ```
//! It prints `listening PORT` on stdout once it accepts requests.

mod bank;
mod points;
#[path = "../protocol.rs"]
#[allow(dead_code)]
mod protocol;
mod serve;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolguard::audit::{AuditAnchor, AuditSink, CheckpointPolicy, FileCheckpoints};
use toolguard::store::{ApprovalStore, IdempotencyStore, OperationStore, SessionLedger};
use toolguard::{Dispatcher, HostKeys, OnExceed, RiskPolicy, StagePoint};
use toolguard_postgres::{PgConfig, PgStore};
use toolguard_sqlite::SqliteStore;

use bank::{Bank, Transfer};
use points::{BeforeReserve, CrashAudit, Points, StorePoints};
use toolguard_tests::delegate::Delegate;

/// Where the stores are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Backend {
    /// Every store and the audit trail in PostgreSQL.
    Postgres,
    /// Idempotency and the session ledger in Redis, the rest in PostgreSQL.
    Redis,
    /// Every store and the audit trail in one SQLite file (`DIR/store.db`) that every process
    /// opens.
    Sqlite,
}

/// The command line.
#[derive(Debug, clap::Parser)]
#[command(
    name = "crash_node",
    about = "One dispatcher process of the crash harness"
)]
struct Args {
    /// This process's number (its side-effect lines and checkpoints carry it).
    #[arg(long)]
    node: u32,
    /// Where the stores are.
    #[arg(long, value_enum)]
    backend: Backend,
    /// The PostgreSQL URL (backends `postgres` and `redis`).
    #[arg(long, required_if_eq_any([("backend", "postgres"), ("backend", "redis")]))]
    pg_url: Option<String>,
    /// The PostgreSQL schema of the run (backends `postgres` and `redis`).
    #[arg(long, required_if_eq_any([("backend", "postgres"), ("backend", "redis")]))]
    schema: Option<String>,
    /// The run's directory (side-effect log, checkpoints).
    #[arg(long)]
    dir: PathBuf,
    /// The Redis URL (backend `redis`).
    #[arg(long, required_if_eq("backend", "redis"))]
    redis_url: Option<String>,
    /// The Redis key prefix of the run (backend `redis`).
    #[arg(long, required_if_eq("backend", "redis"))]
    prefix: Option<String>,
}

fn policy() -> RiskPolicy {
    let hour = Duration::from_secs(3600);
    RiskPolicy::new()
        .session_limit(
            Transfer::NAME,
            protocol::SESSION_LIMIT,
            hour,
            OnExceed::Deny,
        )
        .subject_limit(
            Transfer::NAME,
            protocol::SUBJECT_LIMIT,
            hour,
            OnExceed::Deny,
        )
        .approval_ttl(Duration::from_secs(60))
}

/// The stores a process's dispatcher runs on.
struct Stores<A> {
    idempotency: Arc<dyn IdempotencyStore>,
    ledger: Arc<dyn SessionLedger>,
    approvals: Arc<dyn ApprovalStore>,
    operations: Arc<dyn OperationStore>,
    audit: A,
}

async fn build(args: &Args, points: Arc<Points>) -> Result<Dispatcher<Bank>, String> {
    let node = args.node;
    let dir = &args.dir;
    let bank = Bank::open(node, &dir.join("effects.log"), points.clone())
        .map_err(|e| format!("side-effect log: {e}"))?;
    let (id, secret) = protocol::HOST_KEYS;
    let keys = Arc::new(HostKeys::new(id, secret.to_vec()).map_err(|e| e.to_string())?);
    let checkpoints = Arc::new(FileCheckpoints::new(
        dir.join(format!("checkpoints-{node}.jsonl")),
    ));
    let every = CheckpointPolicy {
        every_entries: 25,
        every: Duration::from_secs(1),
    };
    let anchor = AuditAnchor::new(keys.clone()).checkpoints(checkpoints, every);
    if args.backend == Backend::Sqlite {
        let file = dir.join(protocol::SQLITE_FILE);
        let store = Arc::new(SqliteStore::open(&file).map_err(|e| e.to_string())?);
        let audit = store
            .audit_sink_anchored(anchor)
            .map_err(|e| e.to_string())?;
        let stores = Stores {
            idempotency: store.clone(),
            ledger: store.clone(),
            approvals: store.clone(),
            operations: store,
            audit,
        };
        return dispatcher(bank, &keys, stores, points);
    }
    let (Some(url), Some(schema)) = (&args.pg_url, &args.schema) else {
        return Err("the postgres and redis backends need --pg-url and --schema".into());
    };
    let config = PgConfig::new(url).schema(schema).pool_size(4);
    let pg = Arc::new(PgStore::connect(&config).await.map_err(|e| e.to_string())?);
    let (idempotency, ledger): (Arc<dyn IdempotencyStore>, Arc<dyn SessionLedger>) =
        match args.backend {
            Backend::Redis => {
                let (Some(url), Some(prefix)) = (&args.redis_url, &args.prefix) else {
                    return Err("the redis backend needs --redis-url and --prefix".into());
                };
                let redis = toolguard_redis::RedisStore::connect(url, prefix)
                    .await
                    .map_err(|e| e.to_string())?;
                let redis = Arc::new(redis);
                (redis.clone(), redis)
            }
            Backend::Postgres | Backend::Sqlite => (pg.clone(), pg.clone()),
        };
    let stores = Stores {
        idempotency,
        ledger,
        approvals: pg.clone(),
        operations: pg.clone(),
        audit: pg.audit_sink_anchored(anchor),
    };
    dispatcher(bank, &keys, stores, points)
}

/// The dispatcher over `stores`, with the crash points wrapped around them.
fn dispatcher<A: AuditSink>(
    bank: Bank,
    keys: &HostKeys,
    stores: Stores<A>,
    points: Arc<Points>,
) -> Result<Dispatcher<Bank>, String> {
    // The idempotency and approval stores behind the points; the ledger and the operation
    // store as they are (a PostgreSQL completion still writes its operation record with it).
    let pointed = Arc::new(Delegate {
        idempotency: stores.idempotency,
        ledger: stores.ledger.clone(),
        approvals: stores.approvals,
        operations: stores.operations.clone(),
        hook: StorePoints(points.clone()),
    });
    Dispatcher::builder(bank)
        .tool(Transfer)
        .policy(policy())
        .host_keys(keys.clone())
        .custom_stage(StagePoint::AfterPolicy, BeforeReserve(points.clone()))
        .idempotency_store(pointed.clone())
        .approval_store(pointed)
        .session_ledger(stores.ledger)
        .operation_store(stores.operations)
        .audit(CrashAudit {
            inner: stores.audit,
            points,
        })
        .build()
        .map_err(|e| e.to_string())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let run = async {
        let args = <Args as clap::Parser>::parse();
        let points = Arc::new(Points::from_env()?);
        let dispatcher = Arc::new(build(&args, points).await?);
        serve::run(dispatcher).await
    };
    if let Err(e) = run.await {
        eprintln!("crash_node: {e}");
        std::process::exit(2);
    }
}
