#!/usr/bin/env bash
# Issue 42's analyst workload on S3, side by side: logbook (release build,
# object_store) and DuckDB (its httpfs extension from the duckdb-ext-httpfs
# package) reading the same objects from moto's S3 server on loopback,
# through a proxy that adds a fixed latency to every request
# (benches/compare/s3_proxy.py) and logs it. 2 threads each, alternating
# A B A B; medians, ratios, and per query the requests and bytes each made
# (from the proxy's log), as a Markdown table.
# Usage: benches/compare/analyst_s3.sh [ROUNDS] [LATENCY_MS] [ORDERS DAYS]
# (from the repository root). The warehouse is the one analyst.sh writes
# (target/compare/analyst-ORDERS-DAYS), copied into the bucket once per run.
set -euo pipefail
rounds="${1:-3}"; latency="${2:-20}"; orders="${3:-2000000}"; days="${4:-90}"
. "$(dirname "$0")/common.sh"
venv="$work/venv-s3"
ensure_venv "$venv" "duckdb==1.4.4 duckdb-ext-httpfs==1.4.4.20260205 pyarrow==26.0.1"
cargo build --release --example asof_join
bin="$release/examples/asof_join"
data="$work/analyst-$orders-$days"
[ -f "$data/files.json" ] || { rm -rf "$data"; "$bin" prepare "$data" "$orders" "$days"; }

start_moto
proxy_log="$work/s3-proxy.log"; : > "$proxy_log"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 "$here/s3_proxy.py" "${MOTO_ENDPOINT##*:}" "$port" "$latency" "$proxy_log" > "$work/s3-proxy.out" 2>&1 &
proxy_pid=$!
trap 'kill "$MOTO_PID" "$proxy_pid" 2>/dev/null || true' EXIT
# The bucket's copy, written to moto directly (no latency, not counted).
moto_python="${LOGBOOK_MOTO_VENV_DIR:-${CARGO_TARGET_DIR:-$root/target}/venv-moto}/bin/python"
"$moto_python" - "$MOTO_ENDPOINT" "$data" <<'PY'
import sys
from pathlib import Path
import boto3
s3 = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id="testing",
                  aws_secret_access_key="testing", region_name="us-east-1")
root = Path(sys.argv[2])
for path in root.rglob("*"):
    if path.is_file():
        s3.upload_file(str(path), "logbook-test", f"analyst/{path.relative_to(root)}")
PY
for _ in $(seq 50); do grep -q listening "$work/s3-proxy.out" && break; sleep 0.1; done
grep -q listening "$work/s3-proxy.out" || { echo "the S3 proxy did not start" >&2; cat "$work/s3-proxy.out" >&2; exit 1; }
endpoint="http://127.0.0.1:$port"
uri="s3://logbook-test/analyst"
export AWS_ENDPOINT="$endpoint" AWS_ALLOW_HTTP=true AWS_ACCESS_KEY_ID=testing \
  AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1

queries=$("$venv/bin/python" -c "import json,sys; print(' '.join(k for k in json.load(open(sys.argv[1])) if not k.startswith('_')))" "$here/analyst_queries.json")
results="$work/analyst-s3-results.txt"; : > "$results"
threads="SET datafusion.execution.target_partitions = 2"
# run SYSTEM QUERY CMD...: one line "SYSTEM QUERY REQUESTS BYTES JSON".
run() {
  local system="$1" q="$2" before out
  shift 2
  before=$(wc -l < "$proxy_log")
  out=$("$@")
  echo "$system $q $(tail -n +"$((before + 1))" "$proxy_log" | awk '{n++; b+=$4} END {print n+0, b+0}') $out" >> "$results"
}
for i in $(seq "$rounds"); do
  for q in $queries; do
    run logbook "$q" "$bin" analyst-at "$uri" "$data" "$q" "$threads"
    run duckdb "$q" "$venv/bin/python" "$here/analyst_side.py" "$data" "$q" 2 --s3 "$endpoint" "$uri"
  done
done
"$venv/bin/python" - "$results" "$latency" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    system, which, requests, size, payload = line.split(" ", 4)
    run = json.loads(payload)
    run.update(requests=int(requests), read=int(size))
    runs.setdefault((which, system), []).append(run)
print(f"{sys.argv[2]} ms per request")
print("| query | logbook ms | duckdb ms | ratio | requests (l/d) | MiB read (l/d) | same answer |")
print("|---|---|---|---|---|---|---|")
same = lambda a, b: a["rows"] == b["rows"] and abs(a["checksum"] - b["checksum"]) <= 1e-9 * max(1.0, abs(b["checksum"])) + 0.01
for which in dict.fromkeys(w for w, _ in runs):
    l, d = runs[(which, "logbook")], runs[(which, "duckdb")]
    lm, dm = statistics.median(r["ms"] for r in l), statistics.median(r["ms"] for r in d)
    ok = "yes" if same(l[0], d[0]) else f"NO ({l[0]['rows']}/{d[0]['rows']} rows)"
    print(f"| {which} | {lm:.0f} | {dm:.0f} | {lm / dm:.2f} | {l[-1]['requests']}/{d[-1]['requests']} "
          f"| {l[-1]['read'] / 2**20:.1f}/{d[-1]['read'] / 2**20:.1f} | {ok} |")
PY
