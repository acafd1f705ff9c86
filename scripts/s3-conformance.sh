#!/usr/bin/env bash
# Run the storage conformance suite against an S3-compatible server on
# loopback: moto's server (pinned), installed into a virtual environment,
# started here and stopped on exit.
# Usage: scripts/s3-conformance.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
MOTO_VERSION="5.1.18"
venv="${LOGBOOK_VENV_DIR:-${CARGO_TARGET_DIR:-target}/venv-moto}"
[ -x "$venv/bin/moto_server" ] || {
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "moto[server]==$MOTO_VERSION"
}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$venv/bin/moto_server" -H 127.0.0.1 -p "$port" > "${TMPDIR:-/tmp}/logbook-moto.log" 2>&1 &
moto=$!
trap 'kill $moto 2>/dev/null || true' EXIT
# Wait for the server, then create the bucket (moto accepts unsigned requests).
python3 - "$port" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/logbook-test"
for _ in range(100):
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=2)
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit("moto's server did not start")
PY
# --workspace: the same feature set as `cargo test --workspace`, so nothing is rebuilt.
LOGBOOK_TEST_S3_ENDPOINT="http://127.0.0.1:$port" \
  cargo test --workspace --locked --test it conformance -- --include-ignored
