#!/usr/bin/env bash
# `logbook ui` in a real browser: Debian's Chromium and ChromeDriver
# (installed through apt when missing), driven by Selenium (PyPI, pinned).
# Builds the demo warehouse, rewrites one orders date so that a revenue
# date is stale, starts the UI on a free loopback port and runs
# tests/ui/test_browser.py, which leaves screenshots in
# $CARGO_TARGET_DIR/ui-screenshots.
# Usage: scripts/ui-browser.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
PINS="selenium==4.38.0"
target="${CARGO_TARGET_DIR:-target}"
venv="${LOGBOOK_VENV_DIR:-$target/venv-ui}"
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
fi
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
start_listening "$work" ui "$bin" --warehouse "$work/wh" ui --listen 127.0.0.1:0
server=$SERVER_PID
url=$SERVER_URL
mkdir -p "$target/ui-screenshots"
"$venv/bin/python" tests/ui/test_browser.py --url "$url" --logbook "$bin" \
  --warehouse "$work/wh" --screenshots "$target/ui-screenshots"
