#!/usr/bin/env bash
# Production first (issue #38), measured on the release binary:
#
#   benches/compare/production_first.sh [PAIRS] [ROWS]
#
# A production `logbook run` of one date (ROWS rows in, grouped by
# customer), timed alone and then while a 30-date backfill of the same job
# on another table runs with --max-parallel 2, in alternating pairs; once
# with the mechanism on (production first, backfill commands at nice 19
# and I/O class idle) and once off (`production-first off`, --priority
# normal); `idle` is the mechanism with --priority idle (SCHED_IDLE) in
# place of nice 19. Also each backfill's own time, and the backfill alone with the
# mechanism on and off. Prints a table of medians and ratios for
# BENCHMARKS.md, with wall and CPU seconds and the alone-vs-alone spread
# (the noise floor).
set -euo pipefail
cd "$(dirname "$0")/../.."
PAIRS=${1:-15}
ROWS=${2:-2000000}
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/logbook-ci/target}"
cargo build --release --locked -q -p logbook-cli
BIN="$CARGO_TARGET_DIR/release/logbook"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
WH="$WORK/wh"
lb() { "$BIN" --warehouse "$WH" "$@"; }

SCHEMA="date:date,id:int64,customer:int64,amount:float64"
OUT="date:date,customer:int64,revenue:float64,orders:int64"
lb create src --schema "$SCHEMA" --partition-by date --schedule-start 2026-01-01 >/dev/null
lb create prod_out --schema "$OUT" --partition-by date --schedule-start 2026-01-01 >/dev/null
lb create bf_out --schema "$OUT" --partition-by date --schedule-start 2026-01-01 >/dev/null
for i in $(seq 0 30); do
  d=$(date -d "2026-01-01 + $i days" +%F)
  lb run src --date "$d" --run-id "gen-$d" --sql "SELECT logical_date() AS date, value AS id, value % 50000 AS customer, CAST(value * 7 % 10000 AS DOUBLE) / 100.0 AS amount FROM range(0, $ROWS)" >/dev/null
done
# A week of orders per run (7 x ROWS rows), grouped by customer.
JOB="SELECT logical_date() AS date, customer, sum(amount) AS revenue, count(*) AS orders FROM src WHERE date BETWEEN logical_date() - INTERVAL '6 days' AND logical_date() GROUP BY customer"
echo "$JOB" > "$WORK/job.sql"

# "wall cpu" seconds of a command.
timed() {
  local t0 t1 c0 c1 me=$BASHPID
  c0=$(awk '{print $14+$15+$16+$17}' /proc/$me/stat)
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s.%N)
  c1=$(awk '{print $14+$15+$16+$17}' /proc/$me/stat)
  echo "$(echo "$t1 - $t0" | bc) $(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)"
}
# Fresh run ids every time (each is a real recompute, never "already committed").
production() { lb run prod_out --date 2026-01-31 --run-id "p$(date +%s%N)" --sql "$JOB"; }
backfill() { # $1: priority
  local n
  n=$(date +%s%N)
  lb backfill bf_out --from 2026-01-01 --to 2026-01-30 --only all --max-parallel 2 --priority "$1" \
    --command "$BIN run bf_out --date {date} --run-id b$n-{date} --sql \"\$(cat $WORK/job.sql)\""
}

results="$WORK/results"
for mode in on idle off; do
  case $mode in
    on) prio=nice; lb warehouse set production-first on >/dev/null ;;
    idle) prio=idle; lb warehouse set production-first on >/dev/null ;;
    off) prio=normal; lb warehouse set production-first off >/dev/null ;;
  esac
  # The backfill alone.
  for _ in 1 2 3; do echo "$mode backfill-alone $(timed backfill $prio)" >> "$results"; done
  for _ in $(seq 1 "$PAIRS"); do
    echo "$mode alone $(timed production)" >> "$results"
    t0=$(date +%s.%N)
    backfill $prio > "$WORK/backfill.log" 2>&1 &
    bf=$!
    sleep 1.5
    echo "$mode contended $(timed production)" >> "$results"
    wait $bf || { cat "$WORK/backfill.log"; exit 1; }
    echo "$mode backfill-contended $(echo "$(date +%s.%N) - $t0" | bc) 0" >> "$results"
  done
done
# Two backfills, each --max-parallel 2, under max-backfill-runs 2: the
# writes live at once, sampled from both tables' intent markers.
lb create bf2_out --schema "$OUT" --partition-by date --schedule-start 2026-01-01 >/dev/null
lb warehouse set production-first on >/dev/null
lb warehouse set max-backfill-runs 2 >/dev/null
for t in bf_out bf2_out; do
  lb backfill $t --from 2026-01-01 --to 2026-01-10 --only all --max-parallel 2 \
    --command "$BIN run $t --date {date} --run-id s-$t-{date} --sql \"\$(cat $WORK/job.sql)\"" > "$WORK/$t.out" 2>&1 &
done
most=0
while [ -n "$(jobs -r)" ]; do
  live=$(find "$WH/bf_out/_logbook/running" "$WH/bf2_out/_logbook/running" -name '*.json' 2>/dev/null | wc -l || true)
  [ "$live" -gt "$most" ] && most=$live
  sleep 0.05
done
wait
done_lines=$(grep -h "^backfill of" "$WORK/bf_out.out" "$WORK/bf2_out.out")
echo "two backfills under max-backfill-runs 2: at most $most writes live at once (markers sampled every 50 ms); $done_lines" | tr '\n' ' '
echo
python3 - "$results" "$PAIRS" "$ROWS" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(mode, kind, i=2):
    return st.median(float(r[i]) for r in rows if r[0] == mode and r[1] == kind)
def spread(mode):
    alone = [float(r[2]) for r in rows if r[0] == mode and r[1] == "alone"]
    pairs = [max(a, b) / min(a, b) for a, b in zip(alone, alone[1:])]
    return st.median(pairs)
print(f"pairs {sys.argv[2]}, {int(sys.argv[3]):,} rows per date")
print("| mechanism | production alone (wall / cpu s) | during a 30-date backfill | ratio | alone-vs-alone spread | backfill alone | backfill with the production run | growth vs production alone |")
print("|---|---|---|---|---|---|---|---|")
for mode in ("on", "idle", "off"):
    a, ac = med(mode, "alone"), med(mode, "alone", 3)
    c, cc = med(mode, "contended"), med(mode, "contended", 3)
    b, bc_ = med(mode, "backfill-alone"), med(mode, "backfill-contended")
    print(f"| {mode} | {a:.2f} / {ac:.2f} | {c:.2f} / {cc:.2f} | **{c/a:.2f}x** | {spread(mode):.2f}x | {b:.2f} | {bc_:.2f} | {(bc_-b)/a:.2f}x |")
off = med("off", "backfill-alone")
for mode in ("on", "idle"):
    print(f"backfill alone, mechanism {mode} vs off: throughput {off / med(mode, 'backfill-alone'):.2f}x of off")
PY
