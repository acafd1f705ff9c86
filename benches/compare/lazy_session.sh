#!/usr/bin/env bash
# A session opens only the tables a query names (issue #18 goal: `logbook
# sql "SELECT 1"` and a one-table query on a warehouse of 1,000 tables
# within 1.2x of the same on a warehouse of 1 table). Whole process each,
# alternating, medians. Local disk; the CLI as built by `cargo build`.
# Usage: benches/compare/lazy_session.sh [ROUNDS] [TABLES]   (repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-15}"
tables="${2:-1000}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --locked -q -p logbook-cli
bin="$target/debug/logbook"
work="$target/lazy-session"
rm -rf "$work" && mkdir -p "$work/one" "$work/many"
make_table() { "$bin" --warehouse "$1" create "$2" --schema date:date,n:int64 --partition-by date >/dev/null; }
make_table "$work/one" t0
for i in $(seq 0 $((tables - 1))); do make_table "$work/many" "t$i"; done
"$bin" --warehouse "$work/one" write t0 --date 2026-03-15 fixtures/lazy-session.csv >/dev/null
"$bin" --warehouse "$work/many" write t0 --date 2026-03-15 fixtures/lazy-session.csv >/dev/null
ms() { local s e; s=$(date +%s%N); "$bin" --warehouse "$1" sql "$2" >/dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
results="$work/results.txt"; : > "$results"
for i in $(seq "$rounds"); do
  for q in "SELECT 1" "SELECT sum(n) FROM t0"; do
    echo "one|$q|$(ms "$work/one" "$q")" >> "$results"
    echo "many|$q|$(ms "$work/many" "$q")" >> "$results"
  done
done
python3 - "$results" "$tables" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    wh, q, ms = line.rstrip("\n").split("|")
    runs.setdefault((q, wh), []).append(int(ms))
print(f"| query | 1 table, median ms | {sys.argv[2]} tables, median ms | ratio |")
print("|---|---|---|---|")
for q in dict.fromkeys(q for q, _ in runs):
    one, many = statistics.median(runs[(q, "one")]), statistics.median(runs[(q, "many")])
    print(f"| `{q}` | {one:.0f} | {many:.0f} | {many / one:.2f} |")
PY
