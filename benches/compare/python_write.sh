#!/usr/bin/env bash
# Writing one date of 2,000,000 rows from Python (issue #16): pylogbook
# (release build of the native module) vs deltalake's write_deltalake with a
# predicate overwrite of that date vs the same write from Rust (release
# example `python_write`), alternately A B C A B C, medians and ratios.
# Usage: benches/compare/python_write.sh [ROUNDS]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-5}"
target="${CARGO_TARGET_DIR:-target}"
. scripts/venv.sh
venv="$target/venv-python-write"
ensure_venv "$venv" "pyarrow==26.0.1 deltalake==1.6.6 wheel==0.48.0"
# One invocation, so the module and the example share one release DataFusion.
cargo build --release --locked -p logbook-python -p logbook --lib --example python_write
install_pylogbook "$target/release/lib_native.so" "$venv"
work="$target/python-write"
rm -rf "$work" && mkdir -p "$work"
py() { "$venv/bin/python" benches/compare/python_write.py "$work" "$@"; }
py prepare
results="$work/results.txt"; : > "$results"
for i in $(seq "$rounds"); do
  echo "pylogbook $(py pylogbook)" >> "$results"
  echo "deltalake $(py delta)" >> "$results"
  echo "rust $("$target/release/examples/python_write" "$work/wh/orders" "$work/rows.parquet" 2026-03-15)" >> "$results"
done
"$venv/bin/python" - "$results" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    system, payload = line.split(" ", 1)
    runs.setdefault(system, []).append(json.loads(payload)["ms"])
base = statistics.median(runs["pylogbook"])
print("| system | median ms (min) | pylogbook's time as a ratio of it |")
print("|---|---|---|")
for system, ms in runs.items():
    m = statistics.median(ms)
    print(f"| {system} | {m:.1f} ({min(ms):.1f}) | {base / m:.2f} |")
PY
