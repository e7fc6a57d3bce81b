//! The `toolguard` command: toolguard's guard pipeline from the command line.
//!
//! ```text
//! cargo install toolguard-cli                          # sanitize, policy check, mcp-proxy (stdio)
//! cargo install toolguard-cli --features http          # + mcp-proxy --listen (Streamable HTTP)
//! cargo install toolguard-cli --features upstream-http # + --upstream-url (plain http://)
//! ```
//!
//! `toolguard --help` lists the subcommands, `toolguard help <subcommand>` (or
//! `toolguard <subcommand> --help`) describes one.
//!
//! # `toolguard sanitize --kind KIND [options]`
//! Judges values the way the dispatcher's sanitizer judges a string field of kind `KIND`
//! (`identifier`, `text`, `name`, `email`, `url`, `path`, `money`, `opaque`). Options:
//! `--root DIR` (confinement root of `path` values), `--allow-domain D` (e-mail recipient domain
//! allowlist, repeatable, `*.d` for sub-domains), `--allow-host H` (URL host allowlist,
//! repeatable, `*.h` for sub-domains), `--allow-scheme S` (URL schemes, repeatable; default
//! `https`, `http`), `--max-len N` (identifier length limit, default 128), `--allow-markup-links`
//! (`text`: allow markdown/HTML links to external URLs), `--allow-leading-dash` (`identifier`:
//! allow a leading `-`).
//!
//! Input: one JSON string per line on standard input (`"O'Brien"`, `"a\u200bb"`); with
//! `--kind money`, JSON numbers too (amounts in minor units: `1250` is clean, `-1` and `1.5` are
//! `money_invalid`). Output: one JSON object per input line on standard output, keys in this
//! order:
//!
//! ```text
//! {"verdict":"clean","reason":null,"value":"O'Brien"}
//! {"verdict":"stripped","reason":null,"value":"ab"}
//! {"verdict":"blocked","reason":"prompt_injection","value":null}
//! {"verdict":"error","reason":"not_a_json_string","value":null}
//! {"verdict":"clean","reason":null,"value":1250}
//! ```
//!
//! `value` is the value to pass on (the original, or the original minus what was stripped; for
//! `url`, the checked normalized serialization), `null` when blocked. Reason codes are those of
//! `toolguard::sanitize`.
//!
//! # `toolguard policy check FILE [--upstream-url URL | -- UPSTREAM_CMD...]`
//! Validates a policy file without serving anything: syntax, unknown keys, and the declaration
//! rules that need no schema. Given an upstream MCP server (a command after `--`, or with the
//! `upstream-http` feature a Streamable HTTP URL), it also connects to it, lists its tools and
//! checks every declaration against its schema, and that every tool the file names is offered.
//! Feature `policy` (on by default); checking against an upstream needs `mcp-proxy`.
//!
//! # `toolguard mcp-proxy --policy FILE [--listen ADDR] (--upstream-url URL | -- UPSTREAM_CMD...)`
//! Serves MCP on standard input and output in front of the upstream MCP server, every
//! `tools/call` through the guard pipeline the policy file declares (see `toolguard::gateway`), or
//! with `--listen 127.0.0.1:PORT` over Streamable HTTP at `http://ADDR/mcp` (feature `http`;
//! callers send bearer tokens). The upstream is a command after `--` (a child process over
//! stdio) or, with `--upstream-url`, a Streamable HTTP endpoint (feature `upstream-http`);
//! exactly one of the two. Feature `mcp-proxy` (on by default).
//!
//! # `toolguard keys generate PATH [--id ID] [--rotate]`
//! Writes a new host key file (one random 256-bit key, mode 0600; an existing file is never
//! overwritten), or with `--rotate` puts a new active key on the first line of an existing file
//! and keeps the others for verification. Format: `toolguard::keys::file`.
//!
//! # `toolguard audit verify | tail | show (--sqlite FILE | --postgres URL) [--keys FILE]`
//! `verify [--checkpoints FILE]` checks the whole chain (links, seals under the key file, the
//! checkpoints kept outside the store) and exits 1 naming the first broken entry, or the
//! anchored entry a truncated trail no longer reaches; it says whether the trail is anchored.
//! `tail [-n N]` prints the newest entries, `show SEQ` one entry, as JSON. Feature `audit` (on by
//! default; `--postgres` needs `audit-postgres`).
//!
//! # Exit status
//! - 0: success (`sanitize`: every line was read, whatever the verdicts; `policy check`: the file
//!   is valid; `mcp-proxy`: the session ended).
//! - 1: failure: an invalid policy file (the message names file and line), a proxy or upstream
//!   that cannot start, an I/O error.
//! - 2: usage error (unknown option, missing or invalid value, an option whose feature this build
//!   lacks); the message is followed by the usage.

#[cfg(feature = "audit")]
mod audit;
mod keys;
mod policy;
mod proxy;
#[cfg(feature = "mcp-proxy")]
mod review;
mod sanitize;
mod upstream;

use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand};

/// The exit statuses of every subcommand, at the end of `toolguard --help` (each subcommand's
/// `--help` says what they mean for it).
const EXIT_STATUS: &str = "\
Exit status:
  0  success
  1  failure: invalid policy file, cannot start, I/O error
  2  usage error";

/// Judge values, check policy files and guard MCP servers with toolguard.
#[derive(Debug, Parser)]
#[command(
    name = "toolguard",
    version,
    subcommand_required = true,
    arg_required_else_help = true,
    after_long_help = EXIT_STATUS
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    Sanitize(sanitize::SanitizeArgs),
    Policy(policy::PolicyArgs),
    McpProxy(proxy::ProxyArgs),
    Keys(keys::KeysArgs),
    #[cfg(feature = "audit")]
    Audit(audit::AuditArgs),
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Sanitize(args) => sanitize::run(&args),
        Command::Policy(args) => policy::run(args),
        Command::McpProxy(args) => proxy::run(args),
        Command::Keys(args) => keys::run(args),
        #[cfg(feature = "audit")]
        Command::Audit(args) => audit::run(args),
    }
}

/// Exit status 1: the command failed.
fn failure() -> ExitCode {
    ExitCode::from(1)
}

/// A usage error of the subcommand at `path` (`["policy", "check"]`): prints `message` with that
/// subcommand's usage to standard error and returns exit status 2, as clap does for the errors
/// it finds itself.
fn usage_error(path: &[&str], kind: ErrorKind, message: impl std::fmt::Display) -> ExitCode {
    let mut command = Cli::command();
    command.build();
    let mut sub = &mut command;
    for name in path {
        sub = sub
            .find_subcommand_mut(name)
            .expect("a subcommand of `toolguard`");
    }
    let error = sub.error(kind, message);
    // Nothing more can be said when standard error is closed.
    let _ = error.print();
    ExitCode::from(2)
}

/// The message of a usage error for an option that needs a feature this build lacks.
fn missing_feature(what: &str, feature: &str) -> String {
    format!(
        "{what} needs the `{feature}` feature, which this build lacks: \
         cargo install toolguard-cli --features {feature}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
