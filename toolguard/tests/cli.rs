//! Runs the `toolguard sanitize` command (feature `cli`) over the shared corpus and a few
//! hand-written lines, checking the line protocol.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

fn corpus(side: &str, kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/corpus")
        .join(side)
        .join(format!("{kind}.txt"))
}

/// Runs the command with `args`, feeding `input`; returns (exit code, output lines as JSON).
fn run(args: &[&str], input: &str) -> (i32, Vec<Value>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolguard"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn toolguard");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("each output line is JSON"))
        .collect();
    (out.status.code().unwrap_or(-1), lines)
}

#[test]
fn line_protocol() {
    let input = "\"O'Brien\"\n\"a\\u200bb\"\n\"</system>\"\nnot json\n42\n\"$( id )\"\n";
    let (code, lines) = run(&["sanitize", "--kind", "text"], input);
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 6);
    assert_eq!(
        lines[0],
        serde_json::json!({"verdict": "clean", "reason": null, "value": "O'Brien"})
    );
    assert_eq!(
        lines[1],
        serde_json::json!({"verdict": "stripped", "reason": null, "value": "ab"})
    );
    assert_eq!(
        lines[2],
        serde_json::json!({"verdict": "blocked", "reason": "prompt_injection", "value": null})
    );
    let error =
        serde_json::json!({"verdict": "error", "reason": "not_a_json_string", "value": null});
    assert_eq!(lines[3], error);
    assert_eq!(lines[4], error);
    assert_eq!(lines[5]["reason"], "command_substitution");
}

#[test]
fn key_order_is_stable() {
    let out = Command::new(env!("CARGO_BIN_EXE_toolguard"))
        .args(["sanitize", "--kind", "identifier"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"\"acct_1\"\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "{\"verdict\":\"clean\",\"reason\":null,\"value\":\"acct_1\"}\n"
    );
}

/// Exit code of the command with `args` and no input.
fn status(args: &[&str]) -> i32 {
    Command::new(env!("CARGO_BIN_EXE_toolguard"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .code()
        .unwrap_or(-1)
}

#[test]
fn usage_errors() {
    assert_eq!(status(&[]), 2);
    assert_eq!(status(&["sanitize"]), 2);
    assert_eq!(status(&["sanitize", "--kind", "nope"]), 2);
    assert_eq!(status(&["sanitize", "--kind", "text", "--bogus"]), 2);
    assert_eq!(status(&["sanitize", "--kind"]), 2);
    assert_eq!(status(&["--help"]), 0);
    assert_eq!(status(&["sanitize", "--kind", "text"]), 0);
}

#[test]
fn options() {
    let (_, lines) = run(
        &[
            "sanitize",
            "--kind",
            "email",
            "--allow-domain",
            "example.com",
        ],
        "\"a@example.com\"\n\"a@evil.com\"\n",
    );
    assert_eq!(lines[0]["verdict"], "clean");
    assert_eq!(lines[1]["reason"], "email_domain_not_allowed");
    let (_, lines) = run(
        &["sanitize", "--kind", "url", "--allow-host=*.example.com"],
        "\"https://a.example.com/\"\n\"https://example.org/\"\n",
    );
    assert_eq!(lines[0]["verdict"], "clean");
    assert_eq!(lines[1]["reason"], "url_host_not_allowed");
    let (_, lines) = run(&["sanitize", "--kind", "path"], "\"a.txt\"\n");
    assert_eq!(lines[0]["reason"], "path_no_root");
    let root = std::env::temp_dir();
    let (_, lines) = run(
        &[
            "sanitize",
            "--kind",
            "path",
            "--root",
            root.to_str().unwrap(),
        ],
        "\"a.txt\"\n\"../a\"\n",
    );
    assert_eq!(lines[0]["verdict"], "clean");
    assert_eq!(lines[1]["reason"], "path_traversal");
}

#[path = "../../tests/corpus/root.rs"]
mod corpus_root;
use corpus_root::CorpusRoot;

#[test]
fn corpus_through_the_command() {
    let root = CorpusRoot::new("toolguard-cli-corpus");
    let root_arg = root.root.to_str().unwrap().to_string();
    let kinds: [(&str, Vec<&str>); 7] = [
        ("identifier", vec![]),
        ("text", vec![]),
        ("name", vec![]),
        (
            "email",
            vec![
                "--allow-domain",
                "example.com",
                "--allow-domain",
                "example.org",
                "--allow-domain",
                "example.net",
                "--allow-domain",
                "mail.example.co.uk",
            ],
        ),
        ("url", vec![]),
        ("path", vec!["--root", &root_arg]),
        ("money", vec![]),
    ];
    for (kind, extra) in kinds {
        let mut args = vec!["sanitize", "--kind", kind];
        args.extend(extra.iter().copied());
        let benign = std::fs::read_to_string(corpus("benign", kind)).unwrap();
        let (code, lines) = run(&args, &benign);
        assert_eq!(code, 0);
        assert_eq!(lines.len(), benign.lines().count());
        for (line, input) in lines.iter().zip(benign.lines()) {
            assert_eq!(line["verdict"], "clean", "{kind} {input}: {line}");
            assert_eq!(line["value"], serde_json::from_str::<Value>(input).unwrap());
        }
        let attack = std::fs::read_to_string(corpus("attack", kind)).unwrap();
        let expected =
            std::fs::read_to_string(corpus("attack", kind).with_extension("expect")).unwrap();
        assert_eq!(attack.lines().count(), expected.lines().count(), "{kind}");
        let (_, lines) = run(&args, &attack);
        assert_eq!(lines.len(), attack.lines().count());
        for ((line, input), want) in lines.iter().zip(attack.lines()).zip(expected.lines()) {
            assert_eq!(line["verdict"], want, "{kind} {input}: {line}");
            if line["verdict"] == "blocked" {
                assert!(line["value"].is_null());
            }
        }
    }
}

#[test]
fn money_accepts_amounts() {
    let (code, lines) = run(
        &["sanitize", "--kind", "money"],
        "1250\n0\n-1\n1.5\n\"USD\"\n\"XXX\"\n",
    );
    assert_eq!(code, 0);
    assert_eq!(
        lines[0],
        serde_json::json!({"verdict": "clean", "reason": null, "value": 1250})
    );
    assert_eq!(lines[1]["value"], 0);
    for line in &lines[2..4] {
        assert_eq!(
            *line,
            serde_json::json!({"verdict": "blocked", "reason": "money_invalid", "value": null})
        );
    }
    assert_eq!(lines[4]["verdict"], "clean");
    assert_eq!(lines[5]["reason"], "money_invalid");
    // Numbers are amounts only for `money`.
    let (_, lines) = run(&["sanitize", "--kind", "text"], "42\n");
    assert_eq!(lines[0]["reason"], "not_a_json_string");
}
