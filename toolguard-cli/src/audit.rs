//! `toolguard audit verify | tail | show`: reading a SQLite or PostgreSQL audit trail.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand};
use toolguard::HostKeys;
use toolguard::audit::{
    AuditAnchor, AuditEntry, AuditQuery, FileCheckpoints, VerifyError, VerifyReport,
};

/// The exit statuses of `audit`, at the end of its `--help`.
const EXIT_STATUS: &str = "\
Exit status:
  0  success (`verify`: the chain holds; an unanchored trail is reported, not refused)
  1  `verify`: the chain is broken or truncated (the message names the entry); any command: the
     trail, key file or checkpoints cannot be read
  2  usage error";

/// Verify and read an audit trail kept in SQLite or PostgreSQL.
#[derive(Debug, Args)]
#[command(after_long_help = EXIT_STATUS)]
pub(crate) struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    Verify(VerifyArgs),
    Tail(TailArgs),
    Show(ShowArgs),
}

/// Where the trail is and how to check it.
#[derive(Debug, Args)]
struct Trail {
    /// The SQLite file holding the trail (`[proxy] store` of a policy file).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "postgres",
        required_unless_present = "postgres"
    )]
    sqlite: Option<PathBuf>,
    /// The PostgreSQL database holding the trail, e.g. postgres://user@host/db (feature
    /// `audit-postgres`).
    #[arg(long, value_name = "URL")]
    postgres: Option<String>,
    /// PostgreSQL schema of the toolguard tables (default `public`).
    #[arg(long, value_name = "SCHEMA", requires = "postgres")]
    schema: Option<String>,
    /// The host key file the trail is sealed under (needed for a sealed trail).
    #[arg(long, value_name = "FILE", conflicts_with = "keys_env")]
    keys: Option<PathBuf>,
    /// The environment variable holding the host keys, instead of `--keys`.
    #[arg(long, value_name = "VAR")]
    keys_env: Option<String>,
}

/// Verify the whole chain: every link and seal, and every checkpoint kept outside the store.
///
/// Prints the number of entries, the head and whether the trail is anchored (sealed under host
/// keys and checked against checkpoints). A broken chain, an entry not sealed under the keys, a
/// checkpoint that does not match or a trail that ends before its newest checkpoint exits with
/// status 1, naming the entry.
#[derive(Debug, Args)]
struct VerifyArgs {
    #[command(flatten)]
    trail: Trail,
    /// The checkpoints file (one JSON checkpoint a line, as the proxy writes them).
    #[arg(long, value_name = "FILE")]
    checkpoints: Option<PathBuf>,
}

/// Print the newest entries, oldest first, one JSON object a line.
#[derive(Debug, Args)]
struct TailArgs {
    #[command(flatten)]
    trail: Trail,
    /// How many entries.
    #[arg(short = 'n', long, default_value_t = 20, value_name = "N")]
    lines: usize,
}

/// Print one entry as JSON.
#[derive(Debug, Args)]
struct ShowArgs {
    #[command(flatten)]
    trail: Trail,
    /// Its sequence number.
    #[arg(value_name = "SEQ")]
    seq: u64,
}

/// Runs `toolguard audit ...`.
pub(crate) fn run(args: AuditArgs) -> ExitCode {
    let done = crate::upstream::runtime().and_then(|rt| {
        rt.block_on(async {
            match args.command {
                AuditCommand::Verify(a) => verify(a).await,
                AuditCommand::Tail(a) => tail(a).await,
                AuditCommand::Show(a) => show(a).await,
            }
        })
    });
    match done {
        Ok(code) => code,
        Err(e) => {
            eprintln!("toolguard: {e}");
            crate::failure()
        }
    }
}

/// An opened trail: what verification and reading need.
enum Sink {
    Sqlite(toolguard::sqlite::SqliteAuditSink),
    #[cfg(feature = "audit-postgres")]
    Postgres(toolguard::postgres::PgAuditSink),
}

impl Sink {
    fn query(&self) -> &dyn AuditQuery {
        match self {
            Sink::Sqlite(s) => s,
            #[cfg(feature = "audit-postgres")]
            Sink::Postgres(s) => s,
        }
    }

    async fn len(&self) -> Result<u64, String> {
        let n = match self {
            Sink::Sqlite(s) => s.len().await,
            #[cfg(feature = "audit-postgres")]
            Sink::Postgres(s) => s.len().await,
        };
        n.map_err(|e| e.to_string())
    }

    async fn get(&self, seq: u64) -> Result<Option<AuditEntry>, String> {
        let e = match self {
            Sink::Sqlite(s) => s.get(seq).await,
            #[cfg(feature = "audit-postgres")]
            Sink::Postgres(s) => s.get(seq).await,
        };
        e.map_err(|e| e.to_string())
    }
}

impl Trail {
    fn keys(&self) -> Result<Option<HostKeys>, String> {
        let keys = match (&self.keys, &self.keys_env) {
            (Some(file), _) => HostKeys::from_file(file),
            (None, Some(var)) => HostKeys::from_env(var),
            (None, None) => return Ok(None),
        };
        keys.map(Some).map_err(|e| e.to_string())
    }

    /// Opens the trail, sealed under the keys when given.
    async fn open(&self) -> Result<(Sink, bool), String> {
        let anchor = self.keys()?.map(|k| AuditAnchor::new(Arc::new(k)));
        let keyed = anchor.is_some();
        if let Some(path) = &self.sqlite {
            if !path.is_file() {
                return Err(format!("{}: no such SQLite file", path.display()));
            }
            use toolguard::sqlite::{Durability, SqliteAuditSink};
            let sink = match anchor {
                Some(a) => SqliteAuditSink::open_anchored(path, Durability::Full, a),
                None => SqliteAuditSink::open(path),
            };
            return sink
                .map(|s| (Sink::Sqlite(s), keyed))
                .map_err(|e| format!("{}: {e}", path.display()));
        }
        self.open_postgres(anchor, keyed).await
    }

    #[cfg(feature = "audit-postgres")]
    async fn open_postgres(
        &self,
        anchor: Option<AuditAnchor>,
        keyed: bool,
    ) -> Result<(Sink, bool), String> {
        use toolguard::postgres::{PgAuditSink, PgConfig};
        let Some(url) = &self.postgres else {
            return Err("give the trail as --sqlite FILE or --postgres URL".to_owned());
        };
        let mut config = PgConfig::new(url.clone()).pool_size(1);
        if let Some(schema) = &self.schema {
            config = config.schema(schema.clone());
        }
        let sink = match anchor {
            Some(a) => PgAuditSink::connect_anchored(&config, a).await,
            None => PgAuditSink::connect(&config).await,
        };
        sink.map(|s| (Sink::Postgres(s), keyed))
            .map_err(|e| e.to_string())
    }

    #[cfg(not(feature = "audit-postgres"))]
    async fn open_postgres(&self, _: Option<AuditAnchor>, _: bool) -> Result<(Sink, bool), String> {
        Err(crate::missing_feature("`--postgres`", "audit-postgres"))
    }
}

async fn verify(args: VerifyArgs) -> Result<ExitCode, String> {
    let checkpoints = match &args.checkpoints {
        Some(path) => {
            if !path.is_file() {
                return Err(format!("{}: no such checkpoints file", path.display()));
            }
            FileCheckpoints::read(path).map_err(|e| e.0)?
        }
        None => Vec::new(),
    };
    let (sink, keyed) = args.trail.open().await?;
    let first = if keyed { None } else { sink.get(1).await? };
    if let Some((id, _)) = first.as_ref().and_then(|e| e.hash.split_once(':')) {
        return Err(format!(
            "the trail is sealed with host key `{id}`: give the key file with --keys FILE"
        ));
    }
    match sink.query().verify_against(&checkpoints).await {
        Ok(report) => {
            print_report(&report);
            Ok(ExitCode::SUCCESS)
        }
        Err(VerifyError::Broken(b)) => {
            println!("broken at entry {}: {b}", b.seq());
            Ok(crate::failure())
        }
        Err(e) => Err(e.to_string()),
    }
}

fn print_report(report: &VerifyReport) {
    println!("verified: {} entries, head {}", report.entries, report.head);
    if report.anchored() {
        println!(
            "anchored: sealed under the host keys, checked against {} checkpoint(s)",
            report.checkpoints
        );
        return;
    }
    if !report.sealed {
        println!(
            "UNANCHORED: plain SHA-256 links (the host opted out of host keys): rewriting an \
             entry and re-sealing the chain, or deleting the newest entries, would still verify"
        );
    } else {
        println!(
            "UNANCHORED: sealed under the host keys, but no checkpoint was given \
             (--checkpoints FILE): deleting the newest entries would still verify"
        );
    }
}

async fn tail(args: TailArgs) -> Result<ExitCode, String> {
    let (sink, _) = args.trail.open().await?;
    let last = sink.len().await?;
    let first = last.saturating_sub(args.lines as u64) + 1;
    for seq in first..=last {
        if let Some(entry) = sink.get(seq).await? {
            println!(
                "{}",
                serde_json::to_string(&entry).map_err(|e| e.to_string())?
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(args: ShowArgs) -> Result<ExitCode, String> {
    let (sink, _) = args.trail.open().await?;
    match sink.get(args.seq).await? {
        Some(entry) => {
            let text = serde_json::to_string_pretty(&entry).map_err(|e| e.to_string())?;
            println!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        None => Err(format!("no audit entry {}", args.seq)),
    }
}
