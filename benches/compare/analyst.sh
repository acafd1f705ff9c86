#!/usr/bin/env bash
# Issue 18's analyst workload, side by side: logbook (release build) and
# DuckDB on the same Parquet files, 2 threads each, alternating A B A B,
# each collecting its result as Arrow;
# medians, ratios, rows, checksums, bytes logbook's scans read, and peak
# memory, as a Markdown table.
# Usage: benches/compare/analyst.sh [ROUNDS] [ORDERS DAYS]   (from the repository root)
# The warehouse is written once per size under target/compare/analyst-ORDERS-DAYS.
set -euo pipefail
rounds="${1:-5}"; orders="${2:-2000000}"; days="${3:-90}"
. "$(dirname "$0")/common.sh"
venv="$work/venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q "duckdb==1.4.2" "pyarrow==26.0.1"
cargo build --release --example asof_join
bin="$release/examples/asof_join"
data="$work/analyst-$orders-$days"
[ -f "$data/files.json" ] || { rm -rf "$data"; "$bin" prepare "$data" "$orders" "$days"; }
queries=$("$venv/bin/python" -c "import json,sys; print(' '.join(k for k in json.load(open(sys.argv[1])) if not k.startswith('_')))" "$here/analyst_queries.json")
results="$work/analyst-results.txt"; : > "$results"
threads="SET datafusion.execution.target_partitions = 2"
for i in $(seq "$rounds"); do
  for q in $queries; do
    echo "logbook $q $("$bin" analyst "$data" "$q" "$threads")" >> "$results"
    echo "duckdb $q $("$venv/bin/python" "$here/analyst_side.py" "$data" "$q" 2)" >> "$results"
  done
  # Query 6 again with a 512 MiB memory pool (logbook) and memory limit (DuckDB).
  echo "logbook 6_asof_range_512MiB $("$bin" analyst "$data" 6_asof_range "$threads" "SET datafusion.runtime.memory_limit = '512M'")" >> "$results"
  echo "duckdb 6_asof_range_512MiB $("$venv/bin/python" "$here/analyst_side.py" "$data" 6_asof_range 2 512MB)" >> "$results"
done
size=$(du -sb "$data/orders" | cut -f1)
"$venv/bin/python" - "$results" "$size" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    system, which, payload = line.split(" ", 2)
    runs.setdefault((which, system), []).append(json.loads(payload))
print(f"orders table: {int(sys.argv[2]) / 2**20:.0f} MiB on disk")
print("| query | logbook ms | duckdb ms | ratio | rows | checksum | same answer | logbook bytes read | peak MiB (l/d) |")
print("|---|---|---|---|---|---|---|---|---|")
same = lambda a, b: a["rows"] == b["rows"] and abs(a["checksum"] - b["checksum"]) <= 1e-9 * max(1.0, abs(b["checksum"])) + 0.01
for which in dict.fromkeys(w for w, _ in runs):
    l, d = runs[(which, "logbook")], runs[(which, "duckdb")]
    lm, dm = statistics.median(r["ms"] for r in l), statistics.median(r["ms"] for r in d)
    ok = "yes" if same(l[0], d[0]) else f"NO ({l[0]['rows']}/{d[0]['rows']} rows, {l[0]['checksum']}/{d[0]['checksum']})"
    print(f"| {which} | {lm:.1f} | {dm:.1f} | {lm / dm:.2f} | {l[0]['rows']} | {l[0]['checksum']} | {ok} | {l[0]['bytes'] / 2**20:.1f} MiB | {max(r['peak_mib'] for r in l)}/{max(r['peak_mib'] for r in d)} |")
PY
