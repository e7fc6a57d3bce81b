//! `toolguard policy check`: a policy file validated without serving anything.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Args, Subcommand};

use crate::upstream::{Upstream, UpstreamArgs};

/// The exit statuses of `policy check`, at the end of its `--help`.
const EXIT_STATUS: &str = "\
Exit status:
  0  the file is valid (against the upstream: no tool would be refused)
  1  it is not (the message names file and line), a tool of the upstream would be refused
     (each reason is listed with the policy lines that fix it), or the upstream cannot be
     reached
  2  usage error";

/// Work with policy files.
#[derive(Debug, Args)]
#[command(
    subcommand_required = true,
    arg_required_else_help = true,
    after_long_help = crate::EXIT_STATUS
)]
pub(crate) struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Debug, Subcommand)]
enum PolicyCommand {
    Check(CheckArgs),
}

/// Validate a policy file without serving anything.
///
/// Checks the syntax, unknown keys, and the declaration rules that need no schema. Given an
/// upstream MCP server (a command after `--`, or `--upstream-url`), also connects to it, lists
/// its tools and checks every declaration against its schema, and that every tool the file names
/// is offered: every tool the proxy would refuse is listed with each reason and the policy lines
/// that fix it, then a table of what guards each tool (risk, egress, approval) and each field
/// (kind, role, bounds, protection).
#[derive(Debug, Args)]
#[command(after_long_help = EXIT_STATUS)]
struct CheckArgs {
    /// The policy file (TOML).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    upstream: UpstreamArgs,
}

/// Runs `toolguard policy ...`.
pub(crate) fn run(args: PolicyArgs) -> ExitCode {
    let PolicyCommand::Check(args) = args.command;
    match args.upstream.target() {
        Ok(target) => check(&args.file, target),
        Err(message) => usage(ErrorKind::ArgumentConflict, message),
    }
}

/// A usage error of `policy check`: exit status 2.
fn usage(kind: ErrorKind, message: String) -> ExitCode {
    crate::usage_error(&["policy", "check"], kind, message)
}

/// Loads the policy file and checks it, against the upstream when there is one.
#[cfg(feature = "policy")]
fn check(file: &std::path::Path, target: Option<Upstream>) -> ExitCode {
    use toolguard::policy::Policy;
    // Against an upstream, every tool is reviewed with its schema, all its errors at once.
    let loaded = match target {
        Some(_) => Policy::load_for_review(file),
        None => Policy::load(file),
    };
    let policy = match loaded {
        Ok(policy) => policy,
        Err(e) => {
            eprintln!("{e}");
            return crate::failure();
        }
    };
    match target {
        Some(target) => check_against_upstream(&policy, target),
        None => {
            let names: Vec<&str> = policy.tool_names().collect();
            println!(
                "{}: valid, revision {}, declares {} tool(s): {}",
                file.display(),
                policy.revision(),
                names.len(),
                names.join(", ")
            );
            ExitCode::SUCCESS
        }
    }
}

#[cfg(not(feature = "policy"))]
fn check(_: &std::path::Path, _: Option<Upstream>) -> ExitCode {
    usage(
        ErrorKind::InvalidSubcommand,
        crate::missing_feature("`policy check`", "policy"),
    )
}

/// Connects to the upstream, lists its tools and reviews them with the policy: every tool it
/// would refuse at load with the lines that fix it, and what guards each tool and field.
#[cfg(feature = "mcp-proxy")]
fn check_against_upstream(policy: &toolguard::policy::Policy, target: Upstream) -> ExitCode {
    use toolguard::gateway::{self, ProxyError, UpstreamTarget};
    let target = UpstreamTarget::from(target);
    let list = async {
        let upstream = gateway::Upstream::open(&target, policy).await?;
        let offered: Result<_, ProxyError> = upstream.offered().await;
        upstream.close().await;
        offered
    };
    let listed =
        crate::upstream::runtime().and_then(|rt| rt.block_on(list).map_err(|e| e.to_string()));
    match listed {
        Ok(offered) => {
            let review = policy.review_offered(&offered);
            if crate::review::print(policy, &review) {
                crate::failure()
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("{e}");
            crate::failure()
        }
    }
}

#[cfg(all(feature = "policy", not(feature = "mcp-proxy")))]
fn check_against_upstream(_: &toolguard::policy::Policy, _: Upstream) -> ExitCode {
    usage(
        ErrorKind::InvalidValue,
        crate::missing_feature("checking against an upstream", "mcp-proxy"),
    )
}
