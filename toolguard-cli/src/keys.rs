//! `toolguard keys generate PATH`: a new host key file, or a rotated one.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

/// Make and rotate host key files (HMAC keys that seal approvals and anchor the audit trail).
///
/// A key file holds one key per line, `<id>:<hex secret>`, the first one active and the others
/// accepted for verification (see `toolguard::keys::file`). Name it in the policy file
/// (`[keys] file = "..."`) or pass it with `mcp-proxy --keys FILE`.
#[derive(Debug, Args)]
pub(crate) struct KeysArgs {
    #[command(subcommand)]
    command: KeysCommand,
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    Generate(GenerateArgs),
}

/// Write a new key file with one random 256-bit key (mode 0600), or rotate an existing one.
///
/// Without `--rotate` the file must not exist (keys are never overwritten). With `--rotate` a
/// new key becomes active on the first line and every key already in the file stays accepted,
/// so records tagged before the rotation keep verifying; delete an old key's line once the
/// longest-lived record it tagged (idempotency TTL, approval expiry, audit retention) is gone.
#[derive(Debug, Args)]
struct GenerateArgs {
    /// The key file to write.
    #[arg(value_name = "PATH")]
    path: PathBuf,
    /// Id of the new key (1 to 32 ASCII letters, digits, `-`, `_`; default: `k` and eight
    /// random hex digits).
    #[arg(long, value_name = "ID")]
    id: Option<String>,
    /// Add a new active key to an existing file, keeping the others for verification.
    #[arg(long)]
    rotate: bool,
}

/// Runs `toolguard keys ...`.
pub(crate) fn run(args: KeysArgs) -> ExitCode {
    let KeysCommand::Generate(args) = args.command;
    let id = args.id.unwrap_or_else(default_id);
    let written = if args.rotate {
        toolguard::keys::rotate_key_file(&args.path, &id)
    } else {
        toolguard::keys::generate_key_file(&args.path, &id)
    };
    match written {
        Ok(()) => {
            let what = if args.rotate { "rotated" } else { "wrote" };
            eprintln!(
                "toolguard: {what} {} (active key `{id}`, mode 0600); keep it secret and \
                 identical on every replica",
                args.path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("toolguard: {e}");
            crate::failure()
        }
    }
}

/// `k` and eight random hex digits: unique enough to tell keys apart in tags.
fn default_id() -> String {
    let random = uuid::Uuid::new_v4().simple().to_string();
    format!("k{}", &random[..8])
}
