#!/usr/bin/env bash
# Issue 42's setup of the analyst workload: whole processes, the release
# `logbook sql` against the DuckDB CLI (the duckdb-cli package, pinned) on
# the same live Parquet files, alternating A B A B with each machine's
# default threads and memory settings; medians of wall time, CPU time and
# peak resident memory per process (the kernel's, through GNU time: see
# analyst_cli.py) and, from one more sampled run each, how much of it was
# allocated and how much mapped from the program's file; rows and
# checksums compared, as a Markdown table.
# Usage: benches/compare/analyst_cli.sh [ROUNDS] [ORDERS DAYS KEYS] [QUERY...]
# (from the repository root; default 5 rounds of 9M orders over 90 days
# with 200k customers, every query). The warehouse is written once per
# size under target/compare/analyst-ORDERS-DAYS-KEYS.
set -euo pipefail
rounds="${1:-5}"; orders="${2:-9000000}"; days="${3:-90}"; keys="${4:-200000}"
shift $(( $# < 4 ? $# : 4 ))
. "$(dirname "$0")/common.sh"
need_gnu_time
duckdb=$(duckdb_cli)
cargo build --release -p logbook-cli
cargo build --release --example asof_join
data="$work/analyst-$orders-$days-$keys"
[ -f "$data/files.json" ] || { rm -rf "$data"; "$release/examples/asof_join" prepare "$data" "$orders" "$days" "$keys"; }
results="$work/analyst-cli-results.txt"
python3 "$here/analyst_cli.py" "$data" "$release/logbook" "$duckdb" "$rounds" "$@" > "$results"
echo "logbook $(git rev-parse --short HEAD), DuckDB CLI $("$duckdb" -version | cut -d' ' -f1), $orders orders over $days days, $keys customers, $rounds rounds"
python3 - "$results" <<'PY'
import json, statistics, sys
runs, split = {}, {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if "split" in r:
        split[(r["query"], r["system"])] = r["split"]
    else:
        runs.setdefault((r["query"], r["system"]), []).append(r)
print("| query | logbook ms | duckdb ms | ratio | cpu ms (l/d) | peak MiB (l/d) | memory ratio | allocated MiB (l/d) | mapped from the binary MiB (l/d) | rows | same answer |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
same = lambda a, b: a["rows"] == b["rows"] and abs(a["checksum"] - b["checksum"]) <= 1e-9 * max(1.0, abs(b["checksum"])) + 0.01
med = lambda rs, k: statistics.median(r[k] for r in rs)
for q in dict.fromkeys(q for q, _ in runs):
    l, d = runs[(q, "logbook")], runs[(q, "duckdb")]
    ok = "yes" if same(l[0], d[0]) else f"NO ({l[0]['rows']}/{d[0]['rows']} rows, {l[0]['checksum']}/{d[0]['checksum']})"
    lp, dp = med(l, "peak_mib"), med(d, "peak_mib")
    sl, sd = split[(q, "logbook")], split[(q, "duckdb")]
    print(f"| {q} | {med(l, 'ms'):.1f} | {med(d, 'ms'):.1f} | {med(l, 'ms') / med(d, 'ms'):.2f} | {med(l, 'cpu_ms'):.0f}/{med(d, 'cpu_ms'):.0f} | {lp:.0f}/{dp:.0f} | {lp / dp:.2f} | {sl['anon_mib']}/{sd['anon_mib']} | {sl['file_mib']}/{sd['file_mib']} | {l[0]['rows']} | {ok} |")
PY
