#!/usr/bin/env bash
# Runs every cargo-fuzz target for a fixed time. Usage: run-all.sh TOOLCHAIN SECONDS
# Prints a visible skip line (and succeeds) when no such toolchain is installed.
set -euo pipefail
toolchain=${1:-nightly}
seconds=${2:-30}
cd "$(dirname "$0")/.."

if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1; then
  echo "SKIP fuzz: no $toolchain toolchain installed (rustup toolchain install $toolchain)"
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "installing cargo-fuzz"
  cargo install --locked cargo-fuzz
fi
targets=$(cargo "+$toolchain" fuzz list)
if [ -z "$targets" ]; then
  echo "no fuzz targets"; exit 0
fi
for t in $targets; do
  mkdir -p "fuzz/corpus/$t"
  echo "== fuzz $t for ${seconds}s"
  cargo "+$toolchain" fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$seconds" -print_final_stats=1
done
