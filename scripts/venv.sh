# Sourced by the scripts that test with Python packages.
# ensure_venv DIR "PINS": a virtual environment at DIR holding exactly the
# pinned packages; rebuilt only when the pins change.
ensure_venv() {
  local venv="$1" pins="$2"
  [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "$pins" ] && return 0
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  (set -f; "$venv/bin/pip" install -q $pins)
  echo "$pins" > "$venv/.pins"
}

# The Delta readers' environment, shared by scripts/delta-readers.sh and
# benches/compare/delta_open.sh: deltalake, DuckDB with its Delta extension
# as a file (duckdb-ext-delta; nothing downloaded at run time), polars.
DELTA_PINS="pyarrow==26.0.1 pytest==9.2.0 deltalake==1.6.6 duckdb==1.4.4 duckdb-ext-delta==1.4.4.20260205 polars==2.1.0"
delta_venv() {
  local venv="${LOGBOOK_DELTA_VENV_DIR:-${CARGO_TARGET_DIR:-target}/venv-delta}"
  ensure_venv "$venv" "$DELTA_PINS" >&2
  echo "$venv"
}

# The Iceberg readers' environment (scripts/iceberg-readers.sh): pyiceberg,
# DuckDB with its iceberg and avro extensions as files (duckdb-ext-iceberg,
# duckdb-ext-avro; nothing downloaded at run time), polars.
ICEBERG_PINS="pyarrow==26.0.1 pytest==9.2.0 pyiceberg==0.12.0 duckdb==1.4.4 duckdb-ext-iceberg==1.4.4.20260205 duckdb-ext-avro==1.4.4.20260205 polars==2.1.0"
iceberg_venv() {
  local venv="${LOGBOOK_ICEBERG_VENV_DIR:-${CARGO_TARGET_DIR:-target}/venv-iceberg}"
  ensure_venv "$venv" "$ICEBERG_PINS" >&2
  echo "$venv"
}

# install_pylogbook SO VENV: pack the native module SO (a cargo build of
# crates/logbook-python) with the Python package as pylogbook's abi3 wheel
# (`wheel pack`; releases use `maturin build --release`) and install it
# into VENV, which needs the `wheel` package. Run from the repository root.
install_pylogbook() (
  set -e
  so="$1" venv="$2"
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  unpacked="$work/pylogbook-$version"
  mkdir -p "$unpacked/pylogbook" "$unpacked/pylogbook-$version.dist-info" "$work/dist"
  cp crates/logbook-python/python/pylogbook/*.py crates/logbook-python/python/pylogbook/*.pyi \
    crates/logbook-python/python/pylogbook/py.typed "$unpacked/pylogbook/"
  # Debug info is most of a debug build's size; the wheel does not need it.
  objcopy --strip-debug "$so" "$unpacked/pylogbook/_native.abi3.so"
  printf 'Metadata-Version: 2.1\nName: pylogbook\nVersion: %s\nRequires-Python: >=3.9\n' "$version" \
    > "$unpacked/pylogbook-$version.dist-info/METADATA"
  printf 'Wheel-Version: 1.0\nGenerator: logbook scripts/venv.sh\nRoot-Is-Purelib: false\nTag: cp39-abi3-linux_%s\n' "$(uname -m)" \
    > "$unpacked/pylogbook-$version.dist-info/WHEEL"
  "$venv/bin/python" -m wheel pack "$unpacked" -d "$work/dist" > /dev/null
  "$venv/bin/pip" install -q --force-reinstall --no-deps "$work"/dist/pylogbook-*.whl
)

# start_moto: moto's S3 server (pinned) on a free loopback port with the
# bucket `logbook-test`; sets MOTO_ENDPOINT and MOTO_PID (the caller stops
# it: `trap 'kill $MOTO_PID' EXIT`). Its environment is
# LOGBOOK_MOTO_VENV_DIR, else venv-moto in the cargo target directory.
start_moto() {
  local venv="${LOGBOOK_MOTO_VENV_DIR:-${CARGO_TARGET_DIR:-target}/venv-moto}" port log
  ensure_venv "$venv" "moto[server]==5.1.18"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  log="${TMPDIR:-/tmp}/logbook-moto.log"
  "$venv/bin/moto_server" -H 127.0.0.1 -p "$port" > "$log" 2>&1 &
  MOTO_PID=$!
  # Wait for the server, then create the bucket (moto accepts unsigned requests).
  python3 - "$port" "$MOTO_PID" <<'PY' || { cat "$log" >&2; return 1; }
import os, sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/logbook-test"
for _ in range(100):
    try:
        os.kill(int(sys.argv[2]), 0)
    except OSError:
        sys.exit("moto's server exited")
    try:
        urllib.request.urlopen(urllib.request.Request(url, method="PUT"), timeout=2)
        sys.exit(0)
    except OSError:
        time.sleep(0.2)
sys.exit("moto's server did not start")
PY
  MOTO_ENDPOINT="http://127.0.0.1:$port"
}

# start_listening WORK NAME CMD...: run CMD (a logbook server) in the
# background with stdout in WORK/NAME.out and stderr in WORK/NAME.log, wait
# for its "listening on" line, and set SERVER_PID and SERVER_URL (what
# follows "listening on "). The caller stops it.
start_listening() {
  local work="$1" name="$2"
  shift 2
  "$@" > "$work/$name.out" 2> "$work/$name.log" &
  SERVER_PID=$!
  for _ in $(seq 100); do
    grep -q "listening on" "$work/$name.out" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$work/$name.log" >&2; return 1; }
    sleep 0.1
  done
  SERVER_URL=$(sed -n 's/^listening on //p' "$work/$name.out")
  [ -n "$SERVER_URL" ] || { echo "$* did not start listening within 10 s" >&2; cat "$work/$name.log" >&2; return 1; }
}
