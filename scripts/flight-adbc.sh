#!/usr/bin/env bash
# Query `logbook serve` with the official ADBC Flight SQL driver from Python
# (pinned, installed into a virtual environment): builds the demo warehouse,
# starts the server with a token on a free loopback port, runs
# tests/flight/test_adbc.py, then stops the server with SIGTERM and checks
# that it exits cleanly and logged a line per query.
# Usage: scripts/flight-adbc.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
PINS="adbc-driver-flightsql==1.13.0 adbc-driver-manager==1.13.0 pyarrow==26.0.1"
target="${CARGO_TARGET_DIR:-target}"
venv="${LOGBOOK_VENV_DIR:-$target/venv-adbc}"
. scripts/venv.sh
ensure_venv "$venv" "$PINS"
# The same features as `cargo test --workspace`, so nothing is rebuilt.
cargo build --workspace --locked --bin logbook
bin="$target/debug/logbook"

work=$(mktemp -d)
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
"$bin" --warehouse "$work/wh" demo > "$work/demo.log"
python3 -c 'import secrets; print(secrets.token_hex(16))' > "$work/token"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_listening "$work" serve "$bin" --warehouse "$work/wh" serve --listen "127.0.0.1:$port" --token-file "$work/token"
server=$SERVER_PID

# The same warehouse over TLS: a certificate for 127.0.0.1 made here (and
# another, self-signed, that a refused client trusts instead).
tls() {  # tls NAME: NAME.pem and NAME.key, self-signed for 127.0.0.1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj "/CN=logbook-test-$1" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$work/$1.key" -out "$work/$1.pem" 2>/dev/null
}
tls server; tls other
tls_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start_listening "$work" serve-tls "$bin" --warehouse "$work/wh" serve --listen "127.0.0.1:$tls_port" \
  --token-file "$work/token" --tls-cert "$work/server.pem" --tls-key "$work/server.key"
tls_server=$SERVER_PID
[ "$SERVER_URL" = "grpc+tls://127.0.0.1:$tls_port" ] || { echo "serve --tls-cert said $SERVER_URL"; exit 1; }

"$venv/bin/python" tests/flight/test_adbc.py --uri "grpc://127.0.0.1:$port" \
  --token "$(cat "$work/token")" --server-pid "$server" \
  --tls-uri "grpc+tls://127.0.0.1:$tls_port" --ca "$work/server.pem" --wrong-ca "$work/other.pem"
kill -TERM "$tls_server"; wait "$tls_server" || true

kill -TERM "$server"
status=0
wait "$server" || status=$?
server=""
[ "$status" -eq 0 ] || { echo "logbook serve exited with $status on SIGTERM"; cat "$work/serve.log"; exit 1; }
grep -q "rows=10000000" "$work/serve.log" || { echo "no log line for the 10M-row query"; cat "$work/serve.log"; exit 1; }
echo "ADBC Flight SQL tests passed; the server stopped cleanly and logged $(grep -c ' query ' "$work/serve.log") queries"
