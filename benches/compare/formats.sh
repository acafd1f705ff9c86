#!/usr/bin/env bash
# Side by side with Delta Lake (deltalake) and Iceberg (pyiceberg, SQLite
# catalog) on the same data in one run: replace one date of 200k rows in a
# 30 x 200k-row table, then read the version before the replaces (time
# travel), alternating A B C A B C, medians and ratios.
# Usage: benches/compare/formats.sh [ROUNDS]   (from the repository root)
set -euo pipefail
rounds="${1:-5}"
here="$(cd "$(dirname "$0")" && pwd)"
work="${LOGBOOK_BENCH_DIR:-$here/../../target/compare}"
venv="${LOGBOOK_FORMATS_VENV:-$work/venv-formats}"
mkdir -p "$work"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q "deltalake==1.2.1" "pyarrow==22.0.0" "pyiceberg[sql-sqlite,pyarrow]==0.10.0"
cargo build --release --example formats
bin="$here/../../target/release/examples/formats"
data="$work/formats"
rm -rf "$data" && mkdir -p "$data"
"$bin" generate "$data" > /dev/null
"$bin" prepare "$data"
"$venv/bin/python" "$here/formats_side.py" "$data" delta prepare
"$venv/bin/python" "$here/formats_side.py" "$data" iceberg prepare
results="$work/formats-results.txt"; : > "$results"
for i in $(seq "$rounds"); do
  echo "logbook $("$bin" replace "$data")" >> "$results"
  echo "raw-writer $("$bin" raw "$data")" >> "$results"
  echo "delta $("$venv/bin/python" "$here/formats_side.py" "$data" delta replace)" >> "$results"
  echo "iceberg $("$venv/bin/python" "$here/formats_side.py" "$data" iceberg replace)" >> "$results"
done
for i in $(seq "$rounds"); do
  echo "logbook-tt $("$bin" timetravel "$data")" >> "$results"
  echo "delta-tt $("$venv/bin/python" "$here/formats_side.py" "$data" delta timetravel)" >> "$results"
  echo "iceberg-tt $("$venv/bin/python" "$here/formats_side.py" "$data" iceberg timetravel)" >> "$results"
done
echo "logbook-verify $("$bin" verify "$data")" >> "$results"
echo "delta-verify $("$venv/bin/python" "$here/formats_side.py" "$data" delta verify)" >> "$results"
echo "iceberg-verify $("$venv/bin/python" "$here/formats_side.py" "$data" iceberg verify)" >> "$results"
"$venv/bin/python" - "$results" <<'PY'
import json, statistics, sys
runs, checks, travel = {}, {}, {}
for line in open(sys.argv[1]):
    system, payload = line.split(" ", 1)
    if system.endswith("-verify"):
        checks[system[:-7]] = json.loads(payload)
    elif system.endswith("-tt"):
        travel.setdefault(system[:-3], []).append(json.loads(payload))
    else:
        runs.setdefault(system, []).append(json.loads(payload)["ms"])
base = statistics.median(runs["logbook"])
print("| system | median ms (replace one date) | ratio to logbook | rows after | checksum after |")
print("|---|---|---|---|---|")
for system in ("logbook", "delta", "iceberg", "raw-writer"):
    med = statistics.median(runs[system])
    c = checks.get(system, {"rows": "-", "checksum": "- (one file, no table)"})
    print(f"| {system} | {med:.1f} | {med / base:.2f} | {c['rows']} | {c['checksum']} |")
same = len({(c["rows"], c["checksum"]) for c in checks.values()}) == 1
print("\nall systems hold the same rows" if same else "\nMISMATCH: the systems hold different rows")
print("\n| system | median ms (read the version before the replaces) | ratio to logbook | rows | checksum |")
print("|---|---|---|---|---|")
tbase = statistics.median(r["ms"] for r in travel["logbook"])
for system in ("logbook", "delta", "iceberg"):
    rs = travel[system]
    med = statistics.median(r["ms"] for r in rs)
    print(f"| {system} | {med:.1f} | {med / tbase:.2f} | {rs[0]['rows']} | {rs[0]['checksum']} |")
same = len({(r[0]["rows"], r[0]["checksum"]) for r in travel.values()}) == 1
print("\nall systems read the same old version" if same else "\nMISMATCH: the old versions differ")
PY
