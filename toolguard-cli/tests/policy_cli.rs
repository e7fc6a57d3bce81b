//! `toolguard policy check FILE` (feature `policy`): exit status and messages.

use std::path::{Path, PathBuf};
use std::process::Command;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/policies")
        .join(name)
}

/// Runs `toolguard` with `args`: exit code, stdout, stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_toolguard"))
        .args(args)
        .output()
        .expect("run toolguard");
    (
        out.status.code().expect("exit code"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn temp_policy(text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "tg-policy-cli-{}-{}.toml",
        std::process::id(),
        text.len()
    ));
    std::fs::write(&path, text).expect("write policy");
    path
}

#[test]
fn a_valid_file_passes_with_its_revision_and_tools() {
    let file = example("filesystem.toml");
    let (code, out, err) = run(&["policy", "check", file.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("valid, revision "), "{out}");
    assert!(
        out.contains("write_file") && out.contains("read_text_file"),
        "{out}"
    );
}

#[test]
fn an_invalid_file_fails_naming_file_and_line() {
    let text = "[principal]\ntenant = \"a\"\nsubject = \"b\"\n\n[tools.pay]\nrisk = \"high\"\nread_only = false\n";
    let file = temp_policy(text);
    let (code, out, err) = run(&["policy", "check", file.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, 1, "{out}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains(&format!("{}:5: ", file.display())), "{err}");
    assert!(err.contains("idempotent = true"), "{err}");
}

#[test]
fn a_missing_file_fails_and_usage_errors_exit_2() {
    let (code, _, err) = run(&["policy", "check", "/nonexistent/policy.toml"]);
    assert_eq!(code, 1);
    assert!(err.contains("cannot read the policy file"), "{err}");
    let (code, _, err) = run(&["policy", "lint", "x.toml"]);
    assert_eq!(code, 2);
    assert!(err.contains("unrecognized subcommand 'lint'"), "{err}");
    assert!(err.contains("Usage: toolguard policy <COMMAND>"), "{err}");
    let (code, _, err) = run(&["policy"]);
    assert_eq!(code, 2);
    assert!(err.contains("Usage: toolguard policy <COMMAND>"), "{err}");
    assert!(err.contains("check"), "{err}");
    let (code, _, err) = run(&["policy", "check"]);
    assert_eq!(code, 2);
    assert!(err.contains("<FILE>"), "{err}");
    let (code, _, err) = run(&[
        "policy",
        "check",
        "x.toml",
        "--upstream-url",
        "http://127.0.0.1:1/mcp",
        "--",
        "node",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not both"), "{err}");
}
