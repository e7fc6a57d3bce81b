//! A run: options, the services, the rounds, the summary.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use toolguard::HostKeys;
use toolguard::audit::{AuditAnchor, AuditQuery};
use toolguard::store::{ApprovalStore, OperationStore};
use toolguard_postgres::{PgAuditSink, PgConfig, PgStore};
use toolguard_sqlite::{SqliteAuditSink, SqliteStore};

use super::checks::{self, Evidence, INVARIANTS, Violation};
use super::clients::{self, KeyResult};
use super::cluster::{Cluster, NodeCommand};
use super::protocol::{HOST_KEYS, SQLITE_FILE, read_effects};
use super::sever::{Names, Severer};
use super::stall::Staller;

/// The options of a run.
#[derive(Debug, Clone)]
struct Options {
    backend: String,
    rounds: u32,
    nodes: usize,
    clients: u32,
    keys: u32,
    round_ms: u64,
    drain_ms: u64,
    seed: u64,
    kill_ms: (u64, u64),
    sever_ms: Option<(u64, u64)>,
    stall_ms: Option<(u64, u64)>,
    stall_len_ms: (u64, u64),
    arm: u64,
    keep: bool,
    pg_url: Option<String>,
    redis_url: Option<String>,
}

/// The command line (see the binary's documentation).
#[derive(Debug, clap::Parser)]
#[command(
    name = "crash_harness",
    about = "Kills dispatcher replicas at any instant and checks the invariants"
)]
struct Args {
    /// `postgres`, `redis` or `sqlite`.
    #[arg(long, default_value = "postgres", value_parser = ["postgres", "redis", "sqlite"])]
    backend: String,
    /// Rounds to run.
    #[arg(long, default_value_t = 10)]
    rounds: u32,
    /// Dispatcher processes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    nodes: u32,
    /// Concurrent clients.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    clients: u32,
    /// Most keys per client and round.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,
    /// Milliseconds of load per round.
    #[arg(long, default_value_t = 2_000)]
    round_ms: u64,
    /// Milliseconds a key may take to reach a terminal answer after the load: two leases (a
    /// holder killed at the end of the load, then one aborting at a crash point it was armed
    /// with before the drain) and the status query.
    #[arg(long, default_value_t = 15_000)]
    drain_ms: u64,
    /// The run's seed (default: the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Gap between SIGKILLs in milliseconds, `LO-HI`.
    #[arg(long, default_value = "300-900", value_parser = kill_range)]
    kill_ms: (u64, u64),
    /// Gap between cuts of every process's store connections in milliseconds, `LO-HI` (no
    /// cuts unless given): their PostgreSQL sessions terminated and Redis connections closed
    /// by the servers, during the load of each round, as the kills (backends `postgres` and
    /// `redis`: a SQLite file has no connections to cut).
    #[arg(long, value_parser = kill_range)]
    sever_ms: Option<(u64, u64)>,
    /// Gap between stalls of the stores in milliseconds, `LO-HI` (none unless given): every
    /// write held for 1 to 3 s, around the processes' 2 s store deadline (PostgreSQL tables
    /// locked, Redis writes paused, the SQLite file's write lock held), during the load of
    /// each round.
    #[arg(long, value_parser = kill_range)]
    stall_ms: Option<(u64, u64)>,
    /// How long each stall holds the writes, in milliseconds, `LO-HI`: by default around the
    /// processes' 2 s store deadline; past 10 s, the SQLite store's busy timeout and the
    /// PostgreSQL audit writer's retries give up while the stall lasts.
    #[arg(long, default_value = "1000-3000", value_parser = kill_range)]
    stall_len_ms: (u64, u64),
    /// Percent of restarts armed with a crash point.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=100))]
    arm: u64,
    /// Keep the schema, the Redis keys and the run directory.
    #[arg(long)]
    keep: bool,
    /// The PostgreSQL URL (default: `TOOLGUARD_PG_URL`).
    #[arg(long)]
    pg_url: Option<String>,
    /// The Redis URL (default: `TOOLGUARD_REDIS_URL`).
    #[arg(long)]
    redis_url: Option<String>,
}

/// `LO-HI`, two numbers of milliseconds.
fn kill_range(value: &str) -> Result<(u64, u64), String> {
    let (lo, hi) = value.split_once('-').ok_or("takes LO-HI, like 300-900")?;
    let num = |v: &str| v.trim().parse::<u64>().map_err(|e| format!("`{v}`: {e}"));
    let (lo, hi) = (num(lo)?, num(hi)?);
    Ok((lo, hi.max(lo)))
}

fn options(args: Vec<String>) -> Result<Options, String> {
    let args = match <Args as clap::Parser>::try_parse_from(
        std::iter::once("crash_harness".to_owned()).chain(args),
    ) {
        Ok(args) => args,
        // `--help` prints and exits 0; a mistake is reported by the caller.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => return Err(e.to_string()),
    };
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos() as u64
    });
    let pg_url = args
        .pg_url
        .or_else(|| std::env::var("TOOLGUARD_PG_URL").ok())
        .filter(|u| !u.is_empty());
    if args.backend == "sqlite" {
        if args.sever_ms.is_some() {
            return Err(
                "--sever-ms cuts PostgreSQL and Redis connections; the sqlite backend \
                        has none (its processes share one file)"
                    .into(),
            );
        }
    } else if pg_url.is_none() {
        return Err(format!(
            "set TOOLGUARD_PG_URL (or --pg-url) for the {} backend",
            args.backend
        ));
    }
    let redis_url = args
        .redis_url
        .or_else(|| std::env::var("TOOLGUARD_REDIS_URL").ok())
        .filter(|u| !u.is_empty());
    if args.backend == "redis" && redis_url.is_none() {
        return Err("set TOOLGUARD_REDIS_URL (or --redis-url) for the redis backend".into());
    }
    Ok(Options {
        backend: args.backend,
        rounds: args.rounds,
        nodes: args.nodes as usize,
        clients: args.clients,
        keys: args.keys,
        round_ms: args.round_ms,
        drain_ms: args.drain_ms,
        seed,
        kill_ms: args.kill_ms,
        sever_ms: args.sever_ms,
        stall_ms: args.stall_ms,
        stall_len_ms: args.stall_len_ms,
        arm: args.arm,
        keep: args.keep,
        pg_url,
        redis_url,
    })
}

/// What a run found, printed as the last line (JSON).
#[derive(Debug, Serialize)]
pub(crate) struct Summary {
    backend: String,
    seed: u64,
    rounds: u32,
    /// SIGKILLs sent by the controller.
    kills: u64,
    /// Processes that aborted at a crash point.
    crash_point_aborts: u64,
    /// The processes' PostgreSQL sessions terminated by the server (`--sever-ms`).
    pg_sessions_cut: u64,
    /// The processes' Redis connections closed by the server (`--sever-ms`).
    redis_connections_cut: u64,
    /// Stalls of the stores (`--stall-ms`).
    stalls: u64,
    /// Keys sent (each driven to a terminal answer).
    calls: u64,
    /// Requests sent for them (retries included).
    attempts: u64,
    /// Terminal answers by status.
    answers: BTreeMap<String, u64>,
    /// `outcome_unknown` answers seen.
    outcome_unknown: u64,
    /// Operations reconciled by a status query.
    reconciled: u64,
    /// Executed transfers (side-effect log lines).
    effects: u64,
    /// Approval requests the calls waited for.
    approvals: u64,
    /// Approval decisions sent.
    decisions: u64,
    /// Violations by invariant (target: all 0).
    pub(crate) violations: BTreeMap<String, u64>,
    /// Seconds the run took.
    seconds: f64,
}

fn node_program() -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let path = me.with_file_name(format!("crash_node{}", std::env::consts::EXE_SUFFIX));
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} not found: build it (`cargo build -p toolguard-tests --bin crash_node`)",
            path.display()
        ))
    }
}

/// Runs the harness with the command-line `args`.
pub(crate) async fn main(args: Vec<String>) -> Result<Summary, String> {
    let o = options(args)?;
    let started = Instant::now();
    let tag = format!("crash_{}_{:x}", std::process::id(), o.seed & 0xffff_ffff);
    let dir = std::env::temp_dir().join(format!("toolguard-{tag}-{}", o.backend));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let keys =
        Arc::new(HostKeys::new(HOST_KEYS.0, HOST_KEYS.1.to_vec()).map_err(|e| e.to_string())?);
    let anchor = AuditAnchor::new(keys);
    let mut args = vec![
        "--backend".into(),
        o.backend.clone(),
        "--dir".into(),
        dir.display().to_string(),
    ];
    let mut severer = None;
    let mut staller = None;
    let stores = match &o.pg_url {
        Some(pg_url) if o.backend != "sqlite" => {
            let config = PgConfig::new(pg_url.clone())
                .schema(tag.clone())
                .pool_size(2);
            let pg = PgStore::connect(&config).await.map_err(|e| e.to_string())?;
            let audit = PgAuditSink::connect_anchored(&config, anchor)
                .await
                .map_err(|e| e.to_string())?;
            // With cuts, the processes connect under names of their own, which only their
            // connections carry.
            let names = o.sever_ms.map(|_| Names::of(&tag));
            if let Some(names) = &names {
                severer = Some(Arc::new(
                    Severer::connect(names.clone(), pg_url, o.redis_url.as_deref()).await?,
                ));
            }
            if o.stall_ms.is_some() {
                let redis_url = o.redis_url.as_deref().filter(|_| o.backend == "redis");
                staller = Some(Staller::postgres(pg_url, &tag, redis_url, o.stall_len_ms).await?);
            }
            let node_pg_url = names
                .as_ref()
                .map_or_else(|| pg_url.clone(), |n| n.pg_url(pg_url));
            args.extend([
                "--pg-url".into(),
                node_pg_url,
                "--schema".into(),
                tag.clone(),
            ]);
            let node_redis_url = match (&names, &o.redis_url) {
                (Some(n), Some(url)) => Some(n.redis_url(url)?),
                (_, url) => url.clone(),
            };
            if let (Some(url), "redis") = (&node_redis_url, o.backend.as_str()) {
                args.extend([
                    "--redis-url".into(),
                    url.clone(),
                    "--prefix".into(),
                    tag.clone(),
                ]);
            }
            Stores::Postgres { pg, audit }
        }
        _ => {
            // Opened (and its tables made) before any process opens it.
            let store = SqliteStore::open(dir.join(SQLITE_FILE)).map_err(|e| e.to_string())?;
            if o.stall_ms.is_some() {
                let own = SqliteStore::open(dir.join(SQLITE_FILE)).map_err(|e| e.to_string())?;
                staller = Some(Staller::sqlite(Arc::new(own), o.stall_len_ms));
            }
            let audit = store
                .audit_sink_anchored(anchor)
                .map_err(|e| e.to_string())?;
            Stores::Sqlite { store, audit }
        }
    };
    let command = NodeCommand {
        program: node_program()?,
        args,
        dir: dir.clone(),
    };
    let cluster = Cluster::start(command, o.nodes, o.arm).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let supervisor = tokio::spawn(cluster.clone().supervise(
        o.seed ^ 0x5eed,
        o.kill_ms,
        stop.clone(),
    ));
    let stalls = staller.as_ref().map(|s| s.stalls.clone());
    let stalling = match (staller, o.stall_ms) {
        (Some(staller), Some(gap)) => Some(tokio::spawn(staller.run(
            cluster.clone(),
            o.seed ^ 0x57a1,
            gap,
            stop.clone(),
        ))),
        _ => None,
    };
    let cutter = match (&severer, o.sever_ms) {
        (Some(severer), Some(gap)) => Some(tokio::spawn(severer.clone().run(
            cluster.clone(),
            o.seed ^ 0xc07,
            gap,
            stop.clone(),
        ))),
        _ => None,
    };
    let mut summary = Summary {
        backend: o.backend.clone(),
        seed: o.seed,
        rounds: 0,
        kills: 0,
        crash_point_aborts: 0,
        pg_sessions_cut: 0,
        redis_connections_cut: 0,
        stalls: 0,
        calls: 0,
        attempts: 0,
        answers: BTreeMap::new(),
        outcome_unknown: 0,
        reconciled: 0,
        effects: 0,
        approvals: 0,
        decisions: 0,
        violations: INVARIANTS
            .iter()
            .chain(["terminal_answer"].iter())
            .map(|n| (n.to_string(), 0))
            .collect(),
        seconds: 0.0,
    };
    let ctx = Round {
        o: &o,
        cluster: &cluster,
        stores: &stores,
        dir: &dir,
    };
    let mut failure = None;
    for round in 0..o.rounds {
        match ctx.run(round, &mut summary).await {
            Ok(found) => {
                for v in &found {
                    eprintln!("round {round}: VIOLATION {}: {}", v.invariant, v.detail);
                    *summary
                        .violations
                        .entry(v.invariant.to_string())
                        .or_default() += 1;
                }
                // The totals so far, so that an interrupted run still reports.
                let cut = severer.as_ref().map_or((0, 0), |s| {
                    (
                        s.pg_sessions.load(Ordering::SeqCst),
                        s.redis_connections.load(Ordering::SeqCst),
                    )
                });
                eprintln!(
                    "after round {round}: calls {}, effects {}, kills {}, aborts {}, \
                     connections cut {} (PostgreSQL) {} (Redis), stalls {}, outcome_unknown {}, \
                     reconciled {}, violations {:?}",
                    summary.calls,
                    summary.effects,
                    cluster.deaths.kills.load(Ordering::SeqCst),
                    cluster.deaths.aborts.load(Ordering::SeqCst),
                    cut.0,
                    cut.1,
                    stalls.as_ref().map_or(0, |s| s.load(Ordering::SeqCst)),
                    summary.outcome_unknown,
                    summary.reconciled,
                    summary.violations
                );
            }
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        summary.rounds = round + 1;
    }
    stop.store(true, Ordering::SeqCst);
    let supervised = supervisor.await;
    let cut = match cutter {
        Some(cutter) => cutter.await.map_err(|e| e.to_string()).and_then(|r| r),
        None => Ok(()),
    };
    let stalled = match stalling {
        Some(stalling) => stalling.await.map_err(|e| e.to_string()).and_then(|r| r),
        None => Ok(()),
    };
    summary.stalls = stalls.map_or(0, |s| s.load(Ordering::SeqCst));
    cluster.shutdown().await;
    summary.kills = cluster.deaths.kills.load(Ordering::SeqCst);
    summary.crash_point_aborts = cluster.deaths.aborts.load(Ordering::SeqCst);
    if let Some(severer) = &severer {
        summary.pg_sessions_cut = severer.pg_sessions.load(Ordering::SeqCst);
        summary.redis_connections_cut = severer.redis_connections.load(Ordering::SeqCst);
        severer.remove_user().await;
    }
    summary.seconds = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    if !o.keep {
        if o.backend == "redis"
            && let Some(url) = &o.redis_url
            && let Ok(redis) = toolguard_redis::RedisStore::connect(url, tag.clone()).await
        {
            let _ = redis.clear().await;
        }
        if let Stores::Postgres { pg, .. } = &stores {
            let _ = pg.drop_schema().await;
        }
        drop(stores);
        let _ = std::fs::remove_dir_all(&dir);
    } else if o.backend == "sqlite" {
        eprintln!("kept {}", dir.display());
    } else {
        eprintln!("kept schema {tag} and {}", dir.display());
    }
    if let Some(e) = failure {
        return Err(e);
    }
    cut.map_err(|e| format!("cutting connections: {e}"))?;
    stalled.map_err(|e| format!("stalling the stores: {e}"))?;
    match supervised {
        Ok(Ok(())) => Ok(summary),
        Ok(Err(e)) => Err(format!("supervisor: {e}")),
        Err(e) => Err(format!("supervisor: {e}")),
    }
}

/// The harness's own handles on the stores the processes share: what the checks read.
enum Stores {
    /// Approvals, operations and the audit trail in PostgreSQL (backends `postgres`, `redis`).
    Postgres { pg: PgStore, audit: PgAuditSink },
    /// Everything in the run's SQLite file.
    Sqlite {
        store: SqliteStore,
        audit: SqliteAuditSink,
    },
}

impl Stores {
    fn approvals(&self) -> &dyn ApprovalStore {
        match self {
            Stores::Postgres { pg, .. } => pg,
            Stores::Sqlite { store, .. } => store,
        }
    }

    fn operations(&self) -> &dyn OperationStore {
        match self {
            Stores::Postgres { pg, .. } => pg,
            Stores::Sqlite { store, .. } => store,
        }
    }

    fn audit(&self) -> &dyn AuditQuery {
        match self {
            Stores::Postgres { audit, .. } => audit,
            Stores::Sqlite { audit, .. } => audit,
        }
    }
}

/// What every round shares.
struct Round<'a> {
    o: &'a Options,
    cluster: &'a Arc<Cluster>,
    stores: &'a Stores,
    dir: &'a PathBuf,
}

impl Round<'_> {
    /// One round: load with kills, then the checks.
    async fn run(&self, round: u32, summary: &mut Summary) -> Result<Vec<Violation>, String> {
        let since_ms = now_ms().saturating_sub(1_000);
        let seed = self
            .o
            .seed
            .wrapping_add(u64::from(round).wrapping_mul(0x9E37_79B9));
        let window = clients::Window {
            load_until: Instant::now() + Duration::from_millis(self.o.round_ms),
            max_keys: self.o.keys,
            deadline: Instant::now() + Duration::from_millis(self.o.round_ms + self.o.drain_ms),
        };
        self.cluster.killing.store(true, Ordering::SeqCst);
        let stop = Arc::new(AtomicBool::new(false));
        let tellers = tokio::spawn(clients::tellers(
            self.cluster.clone(),
            seed ^ 7,
            stop.clone(),
        ));
        let mut tasks = Vec::new();
        for c in 0..self.o.clients {
            let cluster = self.cluster.clone();
            let s = seed.wrapping_add(u64::from(c) * 7919);
            tasks.push(tokio::spawn(clients::client(cluster, round, c, window, s)));
        }
        // Processes die while keys start; the keys still open then are driven home in peace.
        let killing = self.cluster.clone();
        let load = Duration::from_millis(self.o.round_ms);
        let stop_killing = tokio::spawn(async move {
            tokio::time::sleep(load).await;
            killing.killing.store(false, Ordering::SeqCst);
        });
        let mut keys: Vec<KeyResult> = Vec::new();
        for t in tasks {
            keys.extend(t.await.map_err(|e| e.to_string())?);
        }
        stop_killing.abort();
        self.cluster.killing.store(false, Ordering::SeqCst);
        stop.store(true, Ordering::SeqCst);
        summary.decisions += tellers.await.map_err(|e| e.to_string())?;
        let prefix = format!("r{round}-");
        let all = read_effects(&self.dir.join("effects.log")).map_err(|e| e.to_string())?;
        let effects: Vec<_> = all
            .iter()
            .filter(|e| e.reference.starts_with(&prefix))
            .collect();
        summary.effects += effects.len() as u64;
        for k in &keys {
            summary.calls += 1;
            summary.attempts += u64::from(k.attempts);
            summary.outcome_unknown += u64::from(k.unknowns);
            summary.reconciled += u64::from(k.reconciled);
            summary.approvals += u64::from(k.approval.is_some());
            let answer = k.terminal.clone().unwrap_or_else(|| "none".into());
            *summary.answers.entry(answer).or_default() += 1;
        }
        let evidence = Evidence {
            keys: &keys,
            effects,
            approvals: self.stores.approvals(),
            operations: self.stores.operations(),
            audit: self.stores.audit(),
            checkpoints: (0..self.o.nodes)
                .map(|i| self.dir.join(format!("checkpoints-{i}.jsonl")))
                .collect(),
            since_ms,
        };
        let found = checks::round(&evidence).await;
        eprintln!(
            "round {round}: {} keys, {} effects, kills {}, aborts {}, violations {}",
            keys.len(),
            evidence.effects.len(),
            self.cluster.deaths.kills.load(Ordering::SeqCst),
            self.cluster.deaths.aborts.load(Ordering::SeqCst),
            found.len()
        );
        Ok(found)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
