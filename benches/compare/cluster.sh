#!/usr/bin/env bash
# Issue 39: logbook SQL on an Apache Ballista cluster, on this machine,
# release build, processes on loopback:
# - a scan-heavy query on ORDERS orders over DAYS days with 2 executors
#   (one task at a time each: a core each) against 1 executor;
# - a small query on the cluster against `logbook sql` in one process;
# - each executor's peak memory (VmHWM) over the as-of range join with
#   a 200,000-key dimension (66,000 moves), executors started fresh.
# Every cluster answer is checked against the one-process answer.
# Medians over ROUNDS, alternating the compared sides; ratios as Markdown.
# Usage: benches/compare/cluster.sh [ROUNDS] [ORDERS] [DAYS]   (from the repository root)
set -euo pipefail
rounds="${1:-5}"; orders="${2:-20000000}"; days="${3:-20}"
here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../target}"
work="${LOGBOOK_BENCH_DIR:-$target/compare}"
mkdir -p "$work"
cargo build --release -p logbook-cli --locked
bin="$(realpath "$target")/release/logbook"
wh="$work/cluster-$orders-$days"
per_day=$((orders / days))
lb() { "$bin" --warehouse "$wh" "$@"; }
if [ ! -f "$wh/.complete" ]; then
  rm -rf "$wh"
  lb create orders --schema date:date,order_id:int64,customer:int64,amount:int64 --partition-by date >/dev/null
  for i in $(seq 0 $((days - 1))); do
    d=$(date -u -d "2026-01-01 + $i days" +%F)
    lb run orders --date "$d" --sql "SELECT logical_date() AS date, value + $((i * per_day)) AS order_id, (value * 7919) % 200000 AS customer, (value * 7) % 10000 AS amount FROM range(0, $per_day)" >/dev/null
  done
  lb create customers --schema customer:int64,region:string --scd2 --key customer >/dev/null
  python3 -c "
import sys
r = ['Berlin', 'Hamburg', 'Munich', 'Cologne', 'Leipzig']
with open(sys.argv[1], 'w') as f:
    f.write('customer,region\n')
    for c in range(200000): f.write(f'{c},{r[c % 5]}\n')
with open(sys.argv[2], 'w') as f:
    f.write('customer,region\n')
    for c in range(0, 200000, 3): f.write(f'{c},{r[(c + 1) % 5]}\n')
" "$work/customers-1.csv" "$work/customers-2.csv"
  lb apply customers --effective 2026-01-01 "$work/customers-1.csv" >/dev/null
  lb apply customers --effective "$(date -u -d "2026-01-01 + $((days / 2)) days" +%F)" "$work/customers-2.csv" >/dev/null
  touch "$wh/.complete"
fi

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
logs="$work/cluster-logs"; rm -rf "$logs"; mkdir -p "$logs"
scheduler="127.0.0.1:$(port)"
"$bin" --warehouse "$wh" cluster scheduler --bind "$scheduler" --executor-timeout 5s 2>"$logs/scheduler.log" & pids+=($!)
until grep -qs listening "$logs/scheduler.log"; do sleep 0.1; done
executors=()
start_executors() {  # N: start N executors, one task at a time each
  executors=()
  for i in $(seq 1 "$1"); do
    local name="executor-$RANDOM"
    # The binary itself in the background (not a shell function): $! is
    # the executor's pid, which is killed and whose memory is read.
    "$bin" --warehouse "$wh" cluster executor --scheduler "$scheduler" --bind "127.0.0.1:$(port)" \
      --grpc-port "$(port)" --concurrent-tasks 1 --heartbeat 1s 2>"$logs/$name.log" & pids+=($!); executors+=($!)
    until grep -qs "registration succeed" "$logs/$name.log"; do sleep 0.1; done
  done
}
# Killed executors are forgotten by the scheduler after its executor
# timeout; until then it may hand them tasks, which it then gives to the
# others (that retry is not what is measured): wait it out.
stop_executors() { for p in "${executors[@]}"; do kill -INT "$p"; wait "$p" 2>/dev/null || true; done; sleep 7; }
ms() {  # ms QUERY [ARGS...]: wall time of one `logbook sql`, its answer checked
  local q="$1"; shift
  local t0 t1; t0=$(date +%s%N)
  lb sql "$q" --format csv "$@" > "$work/cluster-out.csv"
  t1=$(date +%s%N)
  sort "$work/cluster-out.csv" | cmp -s - "$work/cluster-want-$(echo "$q" | md5sum | cut -c1-8).csv" \
    || { echo "wrong answer for: $q $*" >&2; exit 1; }
  echo $(((t1 - t0) / 1000000))
}
want() { lb sql "$1" --format csv | sort > "$work/cluster-want-$(echo "$1" | md5sum | cut -c1-8).csv"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

url="df://$scheduler"
scan="SELECT date, count(*) AS n, sum(amount) AS revenue, max(customer) AS top FROM orders WHERE amount % 7 <> 3 GROUP BY date"
small="SELECT count(*) AS n FROM orders WHERE date = DATE '2026-01-05' AND order_id < $((4 * per_day + 1000))"
join="SELECT o.date, c.region, sum(o.amount) AS revenue, count(*) AS n FROM orders o JOIN customers c ON o.customer = c.customer AND o.date >= c.valid_from AND (c.valid_to IS NULL OR o.date < c.valid_to) GROUP BY o.date, c.region"
for q in "$scan" "$small" "$join"; do want "$q"; done

one=(); two=(); local_small=(); cluster_small=()
for r in $(seq "$rounds"); do
  start_executors 1; ms "$scan" --cluster "$url" >/dev/null   # warm
  one+=("$(ms "$scan" --cluster "$url")"); stop_executors
  start_executors 2; ms "$scan" --cluster "$url" >/dev/null
  two+=("$(ms "$scan" --cluster "$url")")
  local_small+=("$(ms "$small")"); cluster_small+=("$(ms "$small" --cluster "$url")")
  stop_executors
done
start_executors 2
join_ms=$(ms "$join" --cluster "$url")
hwm=$(for p in "${executors[@]}"; do awk '/VmHWM/ {printf "%d ", $2 / 1024}' "/proc/$p/status"; done)
stop_executors
m1=$(printf '%s\n' "${one[@]}" | median); m2=$(printf '%s\n' "${two[@]}" | median)
ls_=$(printf '%s\n' "${local_small[@]}" | median); cs=$(printf '%s\n' "${cluster_small[@]}" | median)
echo "orders: $orders over $days days; $rounds rounds; every cluster answer equal to one process's"
echo "| measure | value | ratio |"
echo "|---|---|---|"
echo "| scan-heavy query, 1 executor (ms) | $m1 | |"
echo "| scan-heavy query, 2 executors (ms) | $m2 | $(python3 -c "print(f'{$m2 / $m1:.2f}')") of 1 executor |"
echo "| small query, one process (ms) | $ls_ | |"
echo "| small query, cluster (ms) | $cs | $(python3 -c "print(f'{$cs / max($ls_, 1):.2f}')") of one process |"
echo "| as-of range join, 2 executors (ms) | $join_ms | |"
echo "| as-of range join: peak memory per executor (MiB) | $hwm | |"
