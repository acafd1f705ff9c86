#!/usr/bin/env bash
# The Delta Lake mirror read by engines nobody here wrote: installs deltalake
# (delta-rs), DuckDB with the Delta extension of the `duckdb-ext-delta`
# package (LOADed from its file: nothing is downloaded at run time) and polars,
# pinned, into a virtual environment, builds `logbook`, and runs tests/delta
# with pytest: each test builds a warehouse with the CLI and compares what
# every engine reads with `logbook sql`.
# Usage: scripts/delta-readers.sh [PYTEST ARGS]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
PINS="pyarrow==26.0.1 pytest==9.2.0 deltalake==1.6.6 duckdb==1.4.4 duckdb-ext-delta==1.4.4.20260205 polars==2.1.0"
target="${CARGO_TARGET_DIR:-target}"
venv="${LOGBOOK_DELTA_VENV_DIR:-$target/venv-delta}"
. scripts/venv.sh
ensure_venv "$venv" "$PINS"
# The workspace build (same features as `cargo test --workspace`): DataFusion
# is compiled once, and the binary is the one the other scripts use.
cargo build --workspace --locked
LOGBOOK_BIN="$(cd "$target/debug" && pwd)/logbook" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/delta "$@"
