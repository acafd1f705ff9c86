#!/usr/bin/env bash
# Side by side: logbook (release build) and DuckDB on the same Parquet files,
# alternating A B A B, medians and ratios as a Markdown table.
# Usage: benches/compare/run.sh [ROUNDS]   (from the repository root)
set -euo pipefail
rounds="${1:-5}"
. "$(dirname "$0")/common.sh"
venv="$work/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q "duckdb==1.4.2"
cargo build --release --example asof_join
bin="$release/examples/asof_join"
data="$work/asof-data"
[ -f "$data/files.json" ] || { rm -rf "$data"; "$bin" prepare "$data"; }
results="$work/results.txt"; : > "$results"
for i in $(seq "$rounds"); do
  for which in one range; do
    echo "logbook $which $("$bin" query "$data" "$which")" >> "$results"
    echo "duckdb $which $("$venv/bin/python" "$here/duckdb_side.py" "$data" "$which")" >> "$results"
  done
done
"$venv/bin/python" - "$results" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    system, which, payload = line.split(" ", 2)
    runs.setdefault((which, system), []).append(json.loads(payload))
print("| query | system | median ms | ratio to duckdb | rows | checksum |")
print("|---|---|---|---|---|---|")
for which in ("one", "range"):
    duck = statistics.median(r["ms"] for r in runs[(which, "duckdb")])
    for system in ("logbook", "duckdb"):
        rs = runs[(which, system)]
        med = statistics.median(r["ms"] for r in rs)
        print(f"| {which} | {system} | {med:.1f} | {med / duck:.2f} | {rs[0]['rows']} | {rs[0]['checksum']} |")
PY
