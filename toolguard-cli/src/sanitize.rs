//! `toolguard sanitize`: values judged line by line as the sanitizer judges a field.

use std::io::{self, BufRead, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use serde::Serialize;
use serde_json::Value;
use toolguard::sanitize::{Sanitizer, Verdict};
use toolguard::spec::{FieldKind, FieldSpec, ToolSpec};

/// The exit statuses of `sanitize`, at the end of its `--help`.
const EXIT_STATUS: &str = "\
Exit status:
  0  every line was read, whatever the verdicts
  1  I/O error
  2  usage error";

/// The tool and field names the values are judged under.
const TOOL: &str = "cli";
const FIELD: &str = "value";

/// Judge values the way the dispatcher's sanitizer judges a field of one kind.
///
/// Reads one JSON string per line on standard input (with `--kind money`, JSON numbers too:
/// amounts in minor units) and writes one JSON object per line on standard output, keys in this
/// order: {"verdict":"clean|stripped|blocked|error","reason":...,"value":...}. `value` is the
/// value to pass on (the original, or the original minus what was stripped; for `url`, the
/// checked normalized serialization), null when blocked. A line that is not a JSON string is
/// answered {"verdict":"error","reason":"not_a_json_string","value":null}.
#[derive(Debug, Args)]
#[command(args_override_self = true, after_long_help = EXIT_STATUS)]
pub(crate) struct SanitizeArgs {
    /// The field kind the values are judged as.
    #[arg(long, value_enum, value_name = "KIND")]
    kind: Kind,
    /// Confinement root of `path` values.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// E-mail recipient domain allowlist (`*.d` for sub-domains); repeatable.
    #[arg(long = "allow-domain", value_name = "D")]
    domains: Vec<String>,
    /// URL host allowlist (`*.h` for sub-domains); repeatable.
    #[arg(long = "allow-host", value_name = "H")]
    hosts: Vec<String>,
    /// URL schemes (default https, http); repeatable.
    #[arg(long = "allow-scheme", value_name = "S")]
    schemes: Vec<String>,
    /// Identifier length limit [default: 128].
    #[arg(long, value_name = "N")]
    max_len: Option<usize>,
    /// `text`: allow markdown/HTML links to external URLs.
    #[arg(long)]
    allow_markup_links: bool,
    /// `identifier`: allow a leading `-`.
    #[arg(long)]
    allow_leading_dash: bool,
}

/// The field kinds a value can be judged as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Kind {
    Identifier,
    Text,
    Name,
    Email,
    Url,
    Path,
    Money,
    Opaque,
}

impl From<Kind> for FieldKind {
    fn from(kind: Kind) -> FieldKind {
        match kind {
            Kind::Identifier => FieldKind::Identifier,
            Kind::Text => FieldKind::Text,
            Kind::Name => FieldKind::Name,
            Kind::Email => FieldKind::Email,
            Kind::Url => FieldKind::Url,
            Kind::Path => FieldKind::Path,
            Kind::Money => FieldKind::Money,
            Kind::Opaque => FieldKind::Opaque,
        }
    }
}

/// One output line.
#[derive(Serialize)]
struct Line<'a> {
    verdict: &'a str,
    reason: Option<&'a str>,
    value: Option<Value>,
}

/// What every line is judged with.
struct Judge {
    field: FieldSpec,
    /// A tool with the one field, for amounts (judged as the dispatcher judges a whole call).
    money_spec: ToolSpec,
    sanitizer: Sanitizer,
}

/// Runs `toolguard sanitize`: 0 when every line was read, 1 on an I/O error.
pub(crate) fn run(args: &SanitizeArgs) -> ExitCode {
    match judge_lines(&Judge::new(args)) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader stopped reading (`| head`): not a failure of the command.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("toolguard: {e}");
            crate::failure()
        }
    }
}

impl Judge {
    fn new(args: &SanitizeArgs) -> Judge {
        let field = FieldSpec::new(FIELD).with_kind(args.kind.into());
        let mut money_spec = ToolSpec::new(
            TOOL,
            "sanitize",
            serde_json::json!({}),
            serde_json::json!({}),
        );
        money_spec.fields = vec![field.clone()];
        Judge {
            field,
            money_spec,
            sanitizer: sanitizer(args),
        }
    }

    /// Writes the judgement of one input line (without its line break) to `out`.
    fn line(&self, line: &[u8], out: &mut impl Write) -> io::Result<()> {
        let parsed = serde_json::from_slice::<Value>(line).ok();
        match parsed {
            Some(Value::String(s)) => {
                let judged = self.sanitizer.sanitize_str(TOOL, &self.field, &s);
                let value = match judged.verdict {
                    Verdict::Blocked => None,
                    _ => judged.value.clone().map(Value::String),
                };
                write_line(out, judged.verdict.as_str(), judged.reason, value)
            }
            // Amounts: judged as the dispatcher judges a number in a `money` field.
            Some(Value::Number(n)) if self.field.kind == FieldKind::Money => {
                let mut call = serde_json::json!({ FIELD: n });
                let report = self.sanitizer.sanitize(&self.money_spec, &mut call);
                let value = match report.verdict {
                    Verdict::Blocked => None,
                    _ => call.get(FIELD).cloned(),
                };
                write_line(
                    out,
                    report.verdict.as_str(),
                    report.reason.as_deref(),
                    value,
                )
            }
            _ => write_line(out, "error", Some("not_a_json_string"), None),
        }
    }
}

/// The sanitizer the options describe.
fn sanitizer(args: &SanitizeArgs) -> Sanitizer {
    let mut sanitizer = Sanitizer::new();
    if let Some(root) = &args.root {
        sanitizer = sanitizer.path_root(TOOL, FIELD, root.clone());
    }
    // One call per value: an allowlist exists only when a value is given.
    for domain in &args.domains {
        sanitizer = sanitizer.allow_email_domains(TOOL, FIELD, [domain.as_str()]);
    }
    for host in &args.hosts {
        sanitizer = sanitizer.allow_url_hosts(TOOL, FIELD, [host.as_str()]);
    }
    for scheme in &args.schemes {
        sanitizer = sanitizer.allow_url_schemes(TOOL, FIELD, [scheme.as_str()]);
    }
    if args.allow_markup_links {
        sanitizer = sanitizer.allow_markup_links(TOOL, FIELD);
    }
    if args.allow_leading_dash {
        sanitizer = sanitizer.allow_leading_dash(TOOL, FIELD);
    }
    if let Some(max) = args.max_len {
        sanitizer = sanitizer.identifier_max_len(max);
    }
    sanitizer
}

/// Judges every line of standard input (`\n` or `\r\n` line breaks) onto standard output.
fn judge_lines(judge: &Judge) -> io::Result<()> {
    let stdin = io::stdin().lock();
    let mut out = BufWriter::new(io::stdout().lock());
    for line in stdin.split(b'\n') {
        let mut line = line?;
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        judge.line(&line, &mut out)?;
    }
    out.flush()
}

fn write_line(
    out: &mut impl Write,
    verdict: &str,
    reason: Option<&str>,
    value: Option<Value>,
) -> io::Result<()> {
    let record = Line {
        verdict,
        reason,
        value,
    };
    serde_json::to_writer(&mut *out, &record)?;
    out.write_all(b"\n")
}
