//! Compile-time behaviour of `#[tool]` and `#[toolset]`: the safety rules refuse unsafe
//! declarations with precise messages (`ui-tests/fail`), and every accepted form compiles
//! (`ui-tests/pass`).
//!
//! This suite belongs to `toolguard-macros`, whose dev-dependency on `toolguard` has no
//! features, so trybuild compiles the cases against the same crate graph under
//! `cargo test --workspace` and `cargo test --workspace --all-features`. (Trybuild gives the
//! cases' crate the features of the package that runs it; from the root package,
//! `--all-features` added the MCP, SQLite, Redis and PostgreSQL crates, and with them in the
//! graph rustc printed `std::string::String` where it otherwise printed `String`.)

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui-tests/fail/*.rs");
    t.pass("ui-tests/pass/*.rs");
}
