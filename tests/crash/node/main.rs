//! `crash_node`: one dispatcher process of the crash harness. It serves a high-risk `transfer`
//! tool over the harness's line protocol (`crash/protocol.rs`) on 127.0.0.1, against PostgreSQL
//! (every store and the audit trail) or Redis (idempotency and session ledger; approvals,
//! operations and the audit trail in PostgreSQL), and appends every executed transfer to a
//! side-effect log. `TOOLGUARD_CRASH_POINT` / `TOOLGUARD_CRASH_AT` make it abort at a named
//! point (see `points.rs`).
//!
//! ```text
//! crash_node --node 1 --backend postgres --pg-url URL --schema NAME --dir DIR
//!            [--redis-url URL --prefix P]
//! ```
//! It prints `listening PORT` on stdout once it accepts requests.

mod bank;
mod points;
#[path = "../protocol.rs"]
#[allow(dead_code)]
mod protocol;
mod serve;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use toolguard::audit::{AuditAnchor, CheckpointPolicy, FileCheckpoints};
use toolguard::store::{ApprovalStore, IdempotencyStore, OperationStore, SessionLedger};
use toolguard::{Dispatcher, HostKeys, OnExceed, RiskPolicy, StagePoint};
use toolguard_postgres::{PgConfig, PgStore};

use bank::{Bank, Transfer};
use points::{BeforeReserve, CrashApprovals, CrashAudit, CrashIdempotency, Points};

/// The command line, as `--name value` pairs.
struct Args(HashMap<String, String>);

impl Args {
    fn parse() -> Result<Self, String> {
        let mut map = HashMap::new();
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            let name = flag
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument `{flag}`"))?;
            let value = it.next().ok_or_else(|| format!("`{flag}` needs a value"))?;
            map.insert(name.to_owned(), value);
        }
        Ok(Args(map))
    }

    fn get(&self, name: &str) -> Result<&str, String> {
        self.0
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| format!("missing `--{name}`"))
    }
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

async fn build(args: &Args, points: Arc<Points>) -> Result<Dispatcher<Bank>, String> {
    let node: u32 = args
        .get("node")?
        .parse()
        .map_err(|e| format!("--node: {e}"))?;
    let dir = PathBuf::from(args.get("dir")?);
    let bank = Bank::open(node, &dir.join("effects.log"), points.clone())
        .map_err(|e| format!("side-effect log: {e}"))?;
    let config = PgConfig::new(args.get("pg-url")?)
        .schema(args.get("schema")?)
        .pool_size(4);
    let pg = Arc::new(PgStore::connect(&config).await.map_err(|e| e.to_string())?);
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
    let (idempotency, ledger): (Arc<dyn IdempotencyStore>, Arc<dyn SessionLedger>) = match args
        .get("backend")?
    {
        "postgres" => (pg.clone(), pg.clone()),
        "redis" => {
            let redis =
                toolguard_redis::RedisStore::connect(args.get("redis-url")?, args.get("prefix")?)
                    .await
                    .map_err(|e| e.to_string())?;
            let redis = Arc::new(redis);
            (redis.clone(), redis)
        }
        other => return Err(format!("unknown backend `{other}`")),
    };
    let approvals: Arc<dyn ApprovalStore> = pg.clone();
    let operations: Arc<dyn OperationStore> = pg.clone();
    Dispatcher::builder(bank)
        .tool(Transfer)
        .policy(policy())
        .host_keys((*keys).clone())
        .custom_stage(StagePoint::AfterPolicy, BeforeReserve(points.clone()))
        .idempotency_store(Arc::new(CrashIdempotency {
            inner: idempotency,
            points: points.clone(),
        }))
        .approval_store(Arc::new(CrashApprovals {
            inner: approvals,
            points: points.clone(),
        }))
        .session_ledger(ledger)
        .operation_store(operations)
        .audit(CrashAudit {
            inner: pg.audit_sink_anchored(anchor),
            points,
        })
        .build()
        .map_err(|e| e.to_string())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let run = async {
        let args = Args::parse()?;
        let points = Arc::new(Points::from_env()?);
        let dispatcher = Arc::new(build(&args, points).await?);
        serve::run(dispatcher).await
    };
    if let Err(e) = run.await {
        eprintln!("crash_node: {e}");
        std::process::exit(2);
    }
}
