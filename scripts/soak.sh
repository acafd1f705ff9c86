#!/usr/bin/env bash
# The multi-process soak of multi-table publishes (tests/soak/soak.py) on
# moto's S3 server, behind a proxy answering a share of requests with 503
# before or after they take effect (tests/soak/fault_proxy.py): four
# workers of `logbook` processes, random SIGKILLs, every read checked
# against a model of the history. CI runs it for 120 s; RELIABILITY.md
# records a longer run.
# Usage: scripts/soak.sh [SECONDS] [FAULT_RATE] [SEED]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}" rate="${2:-0.02}" seed="${3:-$RANDOM}"
target="${CARGO_TARGET_DIR:-target}"
. scripts/venv.sh
# --workspace: the same feature set as `cargo test --workspace`, so nothing is rebuilt.
cargo build --workspace --locked
start_moto
proxy_out=$(mktemp)
python3 tests/soak/fault_proxy.py "${MOTO_ENDPOINT##*:}" "$rate" "$seed" > "$proxy_out" &
PROXY_PID=$!
trap 'kill "$MOTO_PID" "$PROXY_PID" 2>/dev/null || true; rm -f "$proxy_out"' EXIT
for _ in $(seq 50); do [ -s "$proxy_out" ] && break; sleep 0.1; done
proxy_port=$(head -n 1 "$proxy_out")
export AWS_ENDPOINT="http://127.0.0.1:$proxy_port" AWS_ALLOW_HTTP=true AWS_REGION=us-east-1 \
  AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_VIRTUAL_HOSTED_STYLE_REQUEST=false
echo "soak: ${seconds}s, 503 on ${rate} of requests, seed $seed"
python3 tests/soak/soak.py "$(realpath "$target")/debug/logbook" "s3://logbook-test/soak-$seed" \
  "$seconds" "$seed" "$target/soak-report.json"
