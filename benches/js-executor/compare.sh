#!/bin/sh
# The JavaScript executor of executor.mjs and toolguard's `dispatch` bench, one after the other
# in one sitting, then the ratios toolguard/js and toolguard/floor for the three calls.
# Run from anywhere; honours CARGO_TARGET_DIR. Needs node (v20 or later).
set -eu
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
mkdir -p "$target"
uptime
node benches/js-executor/bench.mjs | tee "$target/js-executor.json"
cargo bench -p toolguard-benches --bench dispatch -- --noplot --warm-up-time 2 \
    --measurement-time 5 'trail_emptied|fresh_stores|floor/(low_risk|high_risk|replay)$'
uptime
node benches/js-executor/ratios.mjs "$target/js-executor.json" "$target/criterion"
