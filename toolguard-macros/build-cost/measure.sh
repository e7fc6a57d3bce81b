#!/bin/bash
# Build cost of #[tool]: 100 generated tools vs the same 100 tools written by hand.
# Usage: CARGO_TARGET_DIR=... toolguard-macros/build-cost/measure.sh [OUT_DIR]
# Generates both crates under OUT_DIR (default /tmp/tgbench), builds their dependencies once,
# then takes 3 cold builds of just each crate (`cargo clean -p <crate>`, non-incremental) and
# prints wall and CPU (user+sys of cargo and rustc) seconds with their medians.
set -euo pipefail
out="${1:-/tmp/tgbench}"
python3 "$(dirname "$0")/gen.py" "$out"
export CARGO_INCREMENTAL=0
for c in bench_macro bench_hand; do
  (cd "$out/$c" && cargo build -q)
  walls=(); cpus=()
  for _ in 1 2 3; do
    (cd "$out/$c" && cargo clean -q -p "$c")
    s=$(date +%s.%N)
    t0=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
    (cd "$out/$c" && cargo build -q)
    e=$(date +%s.%N)
    t1=$(awk '{print $14+$15+$16+$17}' /proc/$$/stat)
    walls+=("$(echo "$e - $s" | bc)")
    cpus+=("$(echo "scale=2; ($t1 - $t0) / $(getconf CLK_TCK)" | bc)")
  done
  mw=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n 2p)
  mc=$(printf '%s\n' "${cpus[@]}" | sort -n | sed -n 2p)
  echo "$c: wall ${walls[*]} -> median $mw s; cpu ${cpus[*]} -> median $mc s"
done
