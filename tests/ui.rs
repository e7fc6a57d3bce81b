//! Compile-time behaviour of `#[tool]` and `#[toolset]`: the safety rules refuse unsafe
//! declarations with precise messages (`ui-tests/fail`), and every accepted form compiles
//! (`ui-tests/pass`).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("ui-tests/fail/*.rs");
    t.pass("ui-tests/pass/*.rs");
}
