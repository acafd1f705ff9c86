#!/usr/bin/env bash
# How much of the machine one large replace keeps busy (issue #42 item 5):
# the release `logbook write` of one date of ROWS rows from a Parquet file
# (made once by the pinned DuckDB CLI), ROUNDS times under GNU time: wall
# time against user + system time of the whole process. Then one run under
# `perf record` (2,000 samples a second per thread), summarised as cores
# busy per 25 ms and by thread: where the run is on one core.
# Usage: benches/compare/replace_cores.sh [ROUNDS] [ROWS]   (from the repository root)
set -euo pipefail
rounds="${1:-5}"; rows="${2:-4000000}"
. "$(dirname "$0")/common.sh"
need_gnu_time
command -v perf >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q linux-perf >/dev/null; }
duckdb=$(duckdb_cli)
cargo build --release --locked -p logbook-cli
logbook="$release/logbook"
data="$work/replace-cores-$rows"
input="$data/rows.parquet"
if [ ! -f "$input" ]; then
  rm -rf "$data" && mkdir -p "$data"
  "$duckdb" -batch -init /dev/null :memory: -c "COPY (SELECT DATE '2026-03-15' AS date, i::BIGINT AS order_id, 'c-' || ((i * 7919) % 100000)::VARCHAR AS customer, ((i * 31) % 10000) / 100.0 AS amount, TIMESTAMP '2026-03-15 00:00:00' + to_microseconds(i * 20) AS placed_at FROM range($rows) t(i)) TO '$input' (FORMAT parquet)"
fi
rm -rf "$data/wh"
"$logbook" --warehouse "$data/wh" create orders --schema "$input" --partition-by date >/dev/null
echo "logbook $(git rev-parse --short HEAD), one date of $rows rows, $rounds rounds"
echo "| round | wall s | cpu s (user + system) | wall/cpu | peak MiB |"
echo "|---|---|---|---|---|"
for i in $(seq "$rounds"); do
  /usr/bin/time -f "%e %U %S %M" -o "$data/time.txt" "$logbook" --warehouse "$data/wh" write orders --date 2026-03-15 "$input" >/dev/null
  read -r wall user sys peak < "$data/time.txt"
  python3 -c "import sys; w, u, s, p = map(float, sys.argv[1:]); print(f'| $i | {w:.2f} | {u + s:.2f} | {w / (u + s):.2f} | {p / 1024:.0f} |')" "$wall" "$user" "$sys" "$peak"
done
perf record -q -F 2000 -o "$data/perf.data" -- "$logbook" --warehouse "$data/wh" write orders --date 2026-03-15 "$input" >/dev/null 2>&1
perf script -i "$data/perf.data" -F comm,time 2>/dev/null | python3 -c '
import collections, sys
samples = []
for line in sys.stdin:
    parts = line.split()
    if len(parts) >= 2:
        samples.append((float(parts[-1].rstrip(":")), " ".join(parts[:-1])))
start = min(t for t, _ in samples)
window, rate = 0.025, 2000
bins = collections.defaultdict(collections.Counter)
for t, thread in samples:
    bins[int((t - start) / window)][thread] += 1
print("\n| from ms | cores busy | by thread (cores) |\n|---|---|---|")
for b in sorted(bins):
    c = bins[b]
    per = lambda n: n / (window * rate)
    print(f"| {b * window * 1000:.0f} | {per(sum(c.values())):.2f} | " + ", ".join(f"{k} {per(v):.2f}" for k, v in c.most_common()) + " |")
'
