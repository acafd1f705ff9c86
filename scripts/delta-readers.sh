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
target="${CARGO_TARGET_DIR:-target}"
. scripts/venv.sh
venv=$(delta_venv)
# The workspace build (same features as `cargo test --workspace`): DataFusion
# is compiled once, and the binary is the one the other scripts use.
cargo build --workspace --locked
LOGBOOK_BIN="$(cd "$target/debug" && pwd)/logbook" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/delta "$@"
