#!/usr/bin/env bash
# Side by side with Delta Lake (deltalake) and Iceberg (pyiceberg, SQLite
# catalog) on the same data in one run, alternating A B C A B C, medians and
# ratios, and the rows each system holds afterwards:
#   1. replace one date of 200k rows in a 30 x 200k-row table (+ raw writer)
#   4. read the version before the replaces (time travel)
#   2. replace 90 dates of a 365 x 20k-row table, 1 and 2 writers
#   3. open time and commit latency at 10, 300, 1,000, 3,000 commits
#   6. compact 30 dates of 100 small files each
#   5. as-of joins against DuckDB: run.sh (called at the end)
# Usage: benches/compare/formats.sh [ROUNDS] ["HISTORY SIZES"]   (from the repository root)
set -euo pipefail
rounds="${1:-5}"
history_sizes="${2:-10 300 1000 3000}"
# pyiceberg's overwrite grows with history (727 ms per commit at 100 commits,
# 2 s per date of the backfill), so Iceberg runs the backfill once and the
# history only up to this size; the report says how many samples it has.
iceberg_max_history=300
. "$(dirname "$0")/common.sh"
venv="${LOGBOOK_FORMATS_VENV:-$work/venv-formats}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install -q "deltalake==1.2.1" "pyarrow==22.0.0" "pyiceberg[sql-sqlite,pyarrow]==0.10.0"
cargo build --release --example formats
bin="$release/examples/formats"
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

py() { "$venv/bin/python" "$here/workloads_side.py" "$@"; }
# Workload 2: the same 90 fixes each round (new run ids, so every round commits).
"$bin" backfill-prepare "$data"
py "$data" delta backfill-prepare
py "$data" iceberg backfill-prepare
for i in $(seq "$rounds"); do
  for writers in 1 2; do
    echo "logbook-bf$writers $("$bin" backfill "$data" "$writers")" >> "$results"
    echo "delta-bf$writers $(py "$data" delta backfill "$writers")" >> "$results"
    # Two pyiceberg writers contend for the GIL and retry on each other's
    # commits; a run that has not finished in 10 minutes is reported as such.
    [ "$i" -eq 1 ] && echo "iceberg-bf$writers $(timeout 600 "$venv/bin/python" "$here/workloads_side.py" "$data" iceberg backfill "$writers" || true)" >> "$results"
  done
done
# Workload 3: each system grows its own table to each size, then is timed.
for n in $history_sizes; do
  echo "logbook-h $("$bin" history "$data" "$n")" >> "$results"
  echo "delta-h $(py "$data" delta history "$n")" >> "$results"
  [ "$n" -le "$iceberg_max_history" ] && echo "iceberg-h $(py "$data" iceberg history "$n")" >> "$results"
done
# Workload 6: every round compacts a fresh copy of the same small files.
rm -rf "$data/compaction" "$data/compaction-template"
"$bin" compaction-prepare "$data"
py "$data" delta compaction-prepare
mv "$data/compaction" "$data/compaction-template"
for i in $(seq "$rounds"); do
  rm -rf "$data/compaction" && cp -r "$data/compaction-template" "$data/compaction"
  echo "logbook-cp $("$bin" compaction "$data")" >> "$results"
  echo "delta-cp $(py "$data" delta compaction)" >> "$results"
done
echo "iceberg-cp $(py "$data" iceberg compaction)" >> "$results"
echo "logbook-verify $("$bin" verify "$data")" >> "$results"
echo "delta-verify $("$venv/bin/python" "$here/formats_side.py" "$data" delta verify)" >> "$results"
echo "iceberg-verify $("$venv/bin/python" "$here/formats_side.py" "$data" iceberg verify)" >> "$results"
"$venv/bin/python" "$here/formats_report.py" "$results"
# Workload 5: the as-of joins against DuckDB, on their own data.
"$here/run.sh" "$rounds"
