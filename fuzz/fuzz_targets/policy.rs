//! cargo-fuzz target `policy`: see `fuzz/common/targets.rs` for what it asserts.
#![no_main]

#[path = "../common/targets.rs"]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::policy(data));
