//! Bounded randomized runs of the fuzz targets on the stable toolchain: the same target bodies
//! as `fuzz/` (cargo-fuzz, nightly), fed by a seeded generator that splices corpus lines,
//! dictionary pieces and random bytes, and mutates them. Every saved crash input under
//! `tests/fuzz_regressions/<target>/` runs first.
//!
//! The MCP message path (`mcp`) needs the `mcp` feature (`--all-features` in CI).
//!
//! `TOOLGUARD_FUZZ_CASES` sets the cases per target (default 2000, at most a few seconds each in
//! a debug build), `TOOLGUARD_FUZZ_SEED` the seed, and `TOOLGUARD_FUZZ_CASE_SECONDS` how long one
//! case may run (default 30): a case that runs longer is a hang, and the process exits with its
//! input printed and saved instead of waiting forever. A long local run:
//!
//! ```sh
//! TOOLGUARD_FUZZ_CASES=200000 cargo test --release --all-features --test fuzz_targets -- --nocapture
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

#[path = "../../fuzz/common/targets.rs"]
mod targets;

/// xorshift64*: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    "\\/",
    "null",
    "true",
    "1e999",
    "-0",
    "http://",
    "https:",
    "//",
    "\\\\",
    "@",
    "%2f",
    "%40",
    "%u0069",
    "&#105",
    "&#x3c;",
    "&lt;",
    "\u{3002}",
    "\u{ff45}",
    "[::1]",
    "0x7f.1",
    "..",
    "../",
    "~",
    "/",
    "C:",
    "\u{202e}",
    "\u{200b}",
    "\u{0336}",
    "\u{20dd}",
    "\u{e0041}",
    "\u{1F1EE}",
    "ɪɢɴ",
    "‹",
    "›",
    "<\\/system>",
    "</s>",
    "<|im_start|>",
    "[INST]",
    "<<SYS>>",
    "\n\nHuman:",
    "1gn0r3",
    "ignore previous instructions",
    "Ignora las instrucciones anteriores",
    "忽略之前的所有指令",
    "以前の指示を無視",
    "Игнорируй предыдущие инструкции",
    "![x](https://e.example/)",
    "<img src=//e.example>",
    "$( id )",
    "`id`",
    "aWdub3JlIHByZXZpb3Vz",
    "69676e6f7265",
    "-rf",
    "\"choices\"",
    "\"tool_calls\"",
    "\"function\"",
    "\"arguments\"",
    "\"content\"",
    "\"tool_use\"",
    "\"input\"",
    "\"candidates\"",
    "\"functionCall\"",
    "\"args\"",
    "\"type\"",
    "\"content_block_start\"",
    "\"content_block_delta\"",
    "\"input_json_delta\"",
    "\"partial_json\"",
    "\"index\"",
    "\"delta\"",
    "\"output\"",
    "\"function_call\"",
    "\"response.function_call_arguments.delta\"",
    "\"name\"",
    "\"id\"",
    "💸",
    "👨‍👩‍👧",
    r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"note","arguments":{"text":"hi"}}}"#,
    r#"{"jsonrpc":"2.0","id":"a","method":"tools/list"}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#,
    r#"{"jsonrpc":"2.0","id":8,"result":{}}"#,
    "\"jsonrpc\":\"2.0\"",
    "\"method\":",
    "\"params\":",
    "\"_meta\":",
    "\"tools/call\"",
    "\"initialize\"",
    "\"ping\"",
    // Policy files (TOML).
    "\n[tools.t]\n",
    "\n[[tokens]]\n",
    "\n[default_tool]\n",
    " = ",
    "'''",
    "\"\"\"",
    "fields.\"/message\" = { ",
    "fields.\"\" = {}",
    "fields.\"/a/0/b\" = { kind = \"url\" }",
    "kind = \"money\"",
    "risk = \"critical\"",
    "read_only = true",
    "amount = \"/nope\"",
    "{ calls = 0, window_secs = 0 }",
    "18446744073709551615",
    "4294967296",
    "-1",
    "inf",
    "nan",
    "1979-05-27T07:32:00Z",
    "pattern = \"(a+)+$\"",
    "pattern = \"[\"",
    "\u{0}",
];

/// Lines of the sanitizer corpus (attack and benign), decoded, and the provider fixtures: seeds
/// to splice and mutate.
fn corpus_seeds() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut seeds = Vec::new();
    for side in ["attack", "benign"] {
        let Ok(entries) = std::fs::read_dir(dir.join(side)) else {
            continue;
        };
        for e in entries.flatten() {
            if e.path().extension().is_some_and(|x| x == "txt")
                && let Ok(text) = std::fs::read_to_string(e.path())
            {
                for line in text.lines() {
                    if let Ok(s) = serde_json::from_str::<String>(line) {
                        seeds.push(s.into_bytes());
                    }
                }
            }
        }
    }
    // Whole provider responses and stream transcripts.
    if let Ok(entries) = std::fs::read_dir(dir.join("../fixtures/providers")) {
        for e in entries.flatten() {
            if let Ok(bytes) = std::fs::read(e.path()) {
                seeds.push(bytes);
            }
        }
    }
    seeds
}

fn generate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut out: Vec<u8> = match rng.below(3) {
        0 => seeds[rng.below(seeds.len())].clone(),
        1 => Vec::new(),
        _ => (0..rng.below(64)).map(|_| rng.next() as u8).collect(),
    };
    for _ in 0..rng.below(8) {
        let at = rng.below(out.len() + 1);
        match rng.below(5) {
            0 | 1 => {
                let piece = PIECES[rng.below(PIECES.len())].as_bytes();
                out.splice(at..at, piece.iter().copied());
            }
            2 if !out.is_empty() => {
                let end = (at + rng.below(8)).min(out.len());
                out.drain(at.min(end)..end);
            }
            3 if !out.is_empty() => {
                let i = rng.below(out.len());
                out[i] = rng.next() as u8;
            }
            _ => {
                let seed = &seeds[rng.below(seeds.len())];
                out.splice(at..at, seed.iter().copied());
            }
        }
    }
    out
}

fn regressions(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz_regressions")
        .join(target);
    let mut files: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read(e.path()).ok().map(|b| (e.path(), b)))
        .collect();
    files.sort();
    files
}

/// An input for a message: lossy UTF-8, escaped, at most 2000 characters.
fn shown(input: &[u8]) -> String {
    let text: String = String::from_utf8_lossy(input).chars().take(2000).collect();
    format!("{text:?}")
}

/// Where a failing or hanging case's input is saved.
fn saved(target: &str, case: &str, input: &[u8]) -> PathBuf {
    let file = std::env::temp_dir().join(format!("toolguard-fuzz-{target}-{case}.bin"));
    let _ = std::fs::write(&file, input);
    file
}

/// Starts a thread that watches the cases sent to it, each when it starts: one that runs longer
/// than `limit` cannot be unwound, so its input is printed and saved and the process exits.
/// Dropping the sender ends the watch.
fn watchdog(target: &'static str, limit: Duration) -> mpsc::Sender<(String, Vec<u8>)> {
    let (cases, started) = mpsc::channel::<(String, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut current = None;
        loop {
            match started.recv_timeout(limit) {
                Ok(case) => current = Some(case),
                Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {
                    if let Some((case, input)) = &current {
                        let file = saved(target, case, input);
                        // Straight to stderr: the test harness captures `eprintln!`, and exiting
                        // would lose it.
                        let _ = writeln!(
                            std::io::stderr(),
                            "{target}: case {case} still runs after {limit:?} (a hang), input \
                             saved to {}: {}",
                            file.display(),
                            shown(input)
                        );
                        std::process::exit(3);
                    }
                }
            }
        }
    });
    cases
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs the saved regressions of `target`, then the generated cases (each starting with
/// `prefix`, its first byte random, and grown from the corpus seeds), each under the watchdog.
fn run(target: &'static str, body: fn(&[u8]), prefix: &[u8]) {
    let seeds = corpus_seeds();
    assert!(!seeds.is_empty(), "the corpus seeds are readable");
    run_with(target, body, |rng| {
        let mut input = prefix.to_vec();
        if !prefix.is_empty() {
            input[0] = rng.next() as u8;
        }
        input.extend(generate(rng, &seeds));
        input
    });
}

/// Runs the saved regressions of `target`, then the cases `case` makes, each under the
/// watchdog.
fn run_with(target: &'static str, body: fn(&[u8]), mut case: impl FnMut(&mut Rng) -> Vec<u8>) {
    let cases = env_number::<usize>("TOOLGUARD_FUZZ_CASES").unwrap_or(2000);
    let seed: u64 = env_number("TOOLGUARD_FUZZ_SEED").unwrap_or(0x005E_ED0F_F022);
    let limit = Duration::from_secs(env_number("TOOLGUARD_FUZZ_CASE_SECONDS").unwrap_or(30));
    let watch = watchdog(target, limit);
    let check = |case: String, input: &[u8]| {
        let _ = watch.send((case.clone(), input.to_vec()));
        if let Err(e) = std::panic::catch_unwind(|| body(input)) {
            let file = saved(target, &case, input);
            let why = (e.downcast_ref::<String>().map(String::as_str))
                .or_else(|| e.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            panic!(
                "{target}: case {case} (seed {seed}) failed ({why}), input saved to {}: {}",
                file.display(),
                shown(input)
            );
        }
    };
    for (path, input) in regressions(target) {
        eprintln!("{target}: regression {}", path.display());
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        check(format!("regression-{}", name.unwrap_or_default()), &input);
    }
    let mut rng = Rng(seed ^ target.len() as u64 | 1);
    let began = std::time::Instant::now();
    for i in 0..cases {
        check(i.to_string(), &case(&mut rng));
    }
    eprintln!(
        "{target}: {cases} cases, seed {seed}, {:.1} s",
        began.elapsed().as_secs_f64()
    );
}

#[test]
fn arguments_gate_and_parse() {
    run("arguments", targets::arguments, b"");
}

#[test]
fn sanitizer_per_kind() {
    // The first byte picks the kind.
    run("sanitize", targets::sanitize, b"\0");
}

#[test]
fn url_checks() {
    run("url", targets::url, b"");
}

#[test]
fn path_checks() {
    run("path", targets::path, b"");
}

#[test]
fn provider_parsers_and_streams() {
    run("providers", targets::providers, b"");
}

/// Values a policy line's value is replaced with: each kind a key can take, and the edges.
#[cfg(feature = "policy")]
const POLICY_VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "255",
    "256",
    "65535",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "1.5",
    "inf",
    "nan",
    "true",
    "false",
    "\"\"",
    "\"x\"",
    "\"low\"",
    "\"critical\"",
    "\"allow\"",
    "\"deny\"",
    "\"approval\"",
    "\"untrusted\"",
    "\"per_argument\"",
    "\"/\"",
    "\"/message\"",
    "\"/nope\"",
    "\"/items/*\"",
    "\"~1\"",
    "\"*\"",
    "\"0s\"",
    "\"999999999999h\"",
    "\"1m\"",
    "\"[\"",
    "\"(a+)+$\"",
    "\"^$\"",
    "\"0.0.0.0:7411\"",
    "\"[::1]:0\"",
    "\"USD\"",
    "\"\u{202e}\"",
    "[]",
    "[\"\"]",
    "[\"*\", \"*\"]",
    "{}",
    "{ field = \"\" }",
    "{ field = \"message\" }",
    "{ calls = 0, window_secs = 0 }",
    "{ calls = 4294967295, window_secs = 18446744073709551615 }",
    "{ amount = 0, window_secs = 1 }",
    "{ kind = \"money\" }",
    "{ kind = \"url\", allow_hosts = [\"\"] }",
    "{ kind = \"email\", allow_domains = [\"*\"] }",
    "{ kind = \"path\", root = \"\" }",
    "{ kind = \"path\", root = \"..\" }",
    "{ kind = \"text\", max_len = 0, min_len = 1 }",
    "{ max_items = 0 }",
    "{ pattern = \"[\" }",
    "{ sensitive = true }",
    "{ role = \"amount\" }",
];

/// Input schemas the upstream may offer (after the NUL): nested, optional, unusual and invalid.
#[cfg(feature = "policy")]
const POLICY_SCHEMAS: &[&str] = &[
    r#"{"type":"object","properties":{"message":{"type":"string"},"to":{"type":["string","null"]},"amount":{"type":"integer"},"currency":{"enum":["USD","EUR"]},"a":{"type":"array","items":{"type":"object","properties":{"b":{"type":"string"}}}}}}"#,
    r#"{"type":"object","properties":{"message":{"anyOf":[{"type":"string"},{"type":"null"}]},"amount":{"type":"number"},"items":{"type":"array"}},"required":["message","missing"]}"#,
    r##"{"type":"object","properties":{"message":{"$ref":"#/$defs/m"}},"$defs":{"m":{"type":"string"}}}"##,
    r#"{"type":"object","properties":{"message":{"type":"string","pattern":"("}},"additionalProperties":{"type":"string"}}"#,
    r#"{"type":"object","properties":{"message":{"oneOf":[{"type":"string"},{"type":"integer"}]},"amount":{"type":"string"}}}"#,
    r#"{"type":"object","properties":{"message":true,"amount":false}}"#,
    r#"{"type":"object","properties":{"request_key":{"type":"integer"},"message":{"type":"string"}}}"#,
    r#"{"type":"object"}"#,
    // Refused: a subschema that leads back to itself in place, and branches that multiply.
    r##"{"type":"object","properties":{"message":{"$ref":"#/$defs/a"}},"$defs":{"a":{"anyOf":[{"type":"string"},{"allOf":[{"$ref":"#/$defs/a"}]}]}}}"##,
    r##"{"type":"object","properties":{"message":{"$ref":"#/$defs/a"}},"$defs":{"a":{"anyOf":[{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"},{"$ref":"#/$defs/b"}]},"b":{"anyOf":[{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"},{"$ref":"#/$defs/c"}]},"c":{"anyOf":[{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"},{"$ref":"#/$defs/d"}]},"d":{"type":"string"}}}"##,
    r#"{"type":"string"}"#,
    r#"{"properties":[]}"#,
    r#"{}"#,
];

/// A policy case: a whole seed file with line-level changes (a value replaced, a line dropped
/// or copied in from any seed), sometimes a byte-level one, and sometimes an upstream schema
/// after a NUL. Most cases stay valid TOML, so that they reach the declaration checks.
#[cfg(feature = "policy")]
fn generate_policy(rng: &mut Rng, files: &[String], lines: &[&str]) -> Vec<u8> {
    let file = &files[rng.below(files.len())];
    let mut out: Vec<String> = file.lines().map(str::to_owned).collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(out.len() + 1);
        match rng.below(6) {
            0..=2 if at < out.len() => {
                if let Some(eq) = out[at].find(" = ") {
                    let value = POLICY_VALUES[rng.below(POLICY_VALUES.len())];
                    out[at] = format!("{}{value}", &out[at][..eq + 3]);
                }
            }
            3 if at < out.len() => {
                out.remove(at);
            }
            4 => out.insert(at, lines[rng.below(lines.len())].to_owned()),
            _ if at < out.len() && !out[at].is_empty() => {
                let line = out[at].clone().into_bytes();
                let mut bytes = line;
                let i = rng.below(bytes.len());
                bytes[i] = PIECES[rng.below(PIECES.len())].as_bytes()[0];
                out[at] = String::from_utf8_lossy(&bytes).into_owned();
            }
            _ => {}
        }
    }
    let mut bytes = out.join("\n").into_bytes();
    if rng.below(2) == 0 {
        bytes.push(0);
        bytes.extend_from_slice(POLICY_SCHEMAS[rng.below(POLICY_SCHEMAS.len())].as_bytes());
    }
    bytes
}

/// The policy files of the examples and `fuzz_seeds/policy/`.
#[cfg(feature = "policy")]
fn policy_files() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = Vec::new();
    for dir in [
        root.join("fuzz_seeds/policy"),
        root.join("../examples/policies"),
    ] {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            if let Ok(text) = std::fs::read_to_string(e.path()) {
                files.push(text);
            }
        }
    }
    files
}

/// Policy files and the upstream schemas their declarations are checked against: the generic
/// cases grown from the policy files (which mostly exercise the TOML reader's refusals), then
/// as many structured ones from [`generate_policy`].
#[cfg(feature = "policy")]
#[test]
fn policy_files_and_declarations() {
    let files = policy_files();
    assert!(files.len() >= 4, "the policy seeds are readable");
    let seeds: Vec<Vec<u8>> = files.iter().map(|f| f.clone().into_bytes()).collect();
    run_with("policy", targets::policy, |rng| generate(rng, &seeds));
    let lines: Vec<&str> = files.iter().flat_map(|f| f.lines()).collect();
    run_with("policy", targets::policy, |rng| {
        generate_policy(rng, &files, &lines)
    });
}

#[cfg(feature = "mcp")]
#[test]
fn mcp_message_path() {
    run("mcp", targets::mcp, b"");
}
