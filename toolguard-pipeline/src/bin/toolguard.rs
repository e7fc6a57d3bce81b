//! The `toolguard` command.
//!
//! Built with the `cli` feature:
//! `cargo run -p toolguard-rs --features cli -- sanitize --kind <kind> [options]`.
//!
//! `toolguard policy check` and `toolguard mcp-proxy` (features `policy`, `mcp-proxy`) are
//! described in `src/cli/proxy.rs`.
//!
//! # `toolguard sanitize`
//! Judges values the way the dispatcher's sanitizer judges a string field of that kind.
//!
//! ```text
//! toolguard sanitize --kind <identifier|text|name|email|url|path|money|opaque>
//!                    [--root DIR]            confinement root of `path` values
//!                    [--allow-domain D]...   e-mail recipient domain allowlist (`*.d` for sub-domains)
//!                    [--allow-host H]...     URL host allowlist (`*.h` for sub-domains)
//!                    [--allow-scheme S]...   URL schemes (default https, http)
//!                    [--max-len N]           identifier length limit (default 128)
//!                    [--allow-markup-links]  `text`: allow markdown/HTML links to external URLs
//!                    [--allow-leading-dash]  `identifier`: allow a leading `-`
//! ```
//!
//! Input: one JSON string per line on standard input (`"O'Brien"`, `"a\u200bb"`); with
//! `--kind money`, JSON numbers too (amounts in minor units: `1250` is clean, `-1` and `1.5` are
//! `money_invalid`).
//! Output: one JSON object per input line on standard output, keys in this order:
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
//! `url`, the checked normalized serialization), `null` when blocked. Reason codes are those of `toolguard::sanitize`. Exit status: 0 when every line
//! was read (whatever the verdicts), 2 on a usage error, 1 on an I/O error.

#[path = "../cli/proxy.rs"]
mod proxy_cli;

use std::io::{self, BufRead, BufWriter, Write};
use std::process::ExitCode;

use serde::Serialize;
use serde_json::Value;
use toolguard::sanitize::{Sanitizer, Verdict};
use toolguard::spec::{FieldKind, FieldSpec, ToolSpec};

const USAGE: &str = "usage: toolguard sanitize --kind <identifier|text|name|email|url|path|money|opaque> \
[--root DIR] [--allow-domain D]... [--allow-host H]... [--allow-scheme S]... [--max-len N] \
[--allow-markup-links] [--allow-leading-dash]
reads one JSON string per line on stdin, writes {\"verdict\",\"reason\",\"value\"} per line on stdout";

const TOOL: &str = "cli";
const FIELD: &str = "value";

#[derive(Serialize)]
struct Line<'a> {
    verdict: &'a str,
    reason: Option<&'a str>,
    value: Option<Value>,
}

struct Options {
    kind: FieldKind,
    sanitizer: Sanitizer,
}

fn parse_kind(s: &str) -> Option<FieldKind> {
    Some(match s {
        "identifier" => FieldKind::Identifier,
        "text" => FieldKind::Text,
        "name" => FieldKind::Name,
        "email" => FieldKind::Email,
        "url" => FieldKind::Url,
        "path" => FieldKind::Path,
        "money" => FieldKind::Money,
        "opaque" => FieldKind::Opaque,
        _ => return None,
    })
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("sanitize") => {}
        Some("-h" | "--help") => return Err(String::new()),
        None => return Err("missing command".to_string()),
        Some(other) => return Err(format!("unknown command `{other}`")),
    }
    let mut kind = None;
    let mut sanitizer = Sanitizer::new();
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (flag.as_str(), None),
        };
        let mut value = || -> Result<String, String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("`{name}` needs a value")),
            }
        };
        match name {
            "--kind" => {
                let v = value()?;
                kind = Some(parse_kind(&v).ok_or_else(|| format!("unknown kind `{v}`"))?);
            }
            "--root" => sanitizer = sanitizer.path_root(TOOL, FIELD, value()?),
            "--allow-domain" => sanitizer = sanitizer.allow_email_domains(TOOL, FIELD, [value()?]),
            "--allow-host" => sanitizer = sanitizer.allow_url_hosts(TOOL, FIELD, [value()?]),
            "--allow-scheme" => sanitizer = sanitizer.allow_url_schemes(TOOL, FIELD, [value()?]),
            "--allow-markup-links" => sanitizer = sanitizer.allow_markup_links(TOOL, FIELD),
            "--allow-leading-dash" => sanitizer = sanitizer.allow_leading_dash(TOOL, FIELD),
            "--max-len" => {
                let v = value()?;
                let n = v
                    .parse::<usize>()
                    .map_err(|_| format!("`--max-len` needs a number, not `{v}`"))?;
                sanitizer = sanitizer.identifier_max_len(n);
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    let kind = kind.ok_or_else(|| "`--kind` is required".to_string())?;
    Ok(Options { kind, sanitizer })
}

fn run(opts: &Options) -> io::Result<()> {
    let field = FieldSpec {
        name: FIELD.to_string(),
        kind: opts.kind,
        ..FieldSpec::default()
    };
    let mut money_spec = ToolSpec::new(
        TOOL,
        "sanitize",
        serde_json::json!({}),
        serde_json::json!({}),
    );
    money_spec.fields = vec![field.clone()];
    let stdin = io::stdin().lock();
    let mut out = BufWriter::new(io::stdout().lock());
    for line in stdin.split(b'\n') {
        let mut line = line?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        let parsed = serde_json::from_slice::<Value>(&line).ok();
        let judged;
        let reason;
        let record = match parsed {
            Some(Value::String(s)) => {
                judged = opts.sanitizer.sanitize_str(TOOL, &field, &s);
                Line {
                    verdict: judged.verdict.as_str(),
                    reason: judged.reason,
                    value: match judged.verdict {
                        Verdict::Blocked => None,
                        _ => judged.value.clone().map(Value::String),
                    },
                }
            }
            // Amounts: judged as the dispatcher judges a number in a `money` field.
            Some(Value::Number(n)) if opts.kind == FieldKind::Money => {
                let mut args = serde_json::json!({ FIELD: n });
                let report = opts.sanitizer.sanitize(&money_spec, &mut args);
                reason = report.reason;
                Line {
                    verdict: report.verdict.as_str(),
                    reason: reason.as_deref(),
                    value: match report.verdict {
                        Verdict::Blocked => None,
                        _ => args.get(FIELD).cloned(),
                    },
                }
            }
            _ => Line {
                verdict: "error",
                reason: Some("not_a_json_string"),
                value: None,
            },
        };
        serde_json::to_writer(&mut out, &record)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(code) = proxy_cli::run(&args) {
        return code;
    }
    let opts = match parse_args(&args) {
        Ok(o) => o,
        Err(msg) => {
            if msg.is_empty() {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            eprintln!("toolguard: {msg}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolguard: {e}");
            ExitCode::from(1)
        }
    }
}
