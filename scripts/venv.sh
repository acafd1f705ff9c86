# Sourced by the scripts that test with Python packages.
# ensure_venv DIR "PINS": a virtual environment at DIR holding exactly the
# pinned packages; rebuilt only when the pins change.
ensure_venv() {
  local venv="$1" pins="$2"
  [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "$pins" ] && return 0
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q $pins
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
