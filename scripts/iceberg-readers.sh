#!/usr/bin/env bash
# The Iceberg mirror read by engines nobody here wrote: installs pyiceberg,
# DuckDB with the iceberg and avro extensions of the `duckdb-ext-iceberg` and
# `duckdb-ext-avro` packages (LOADed from their files: nothing is downloaded
# at run time) and polars, pinned, into a virtual environment, builds
# `logbook`, and runs tests/iceberg with pytest: each test builds a warehouse
# with the CLI and compares what every engine reads with `logbook sql`.
# Usage: scripts/iceberg-readers.sh [PYTEST ARGS]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
. scripts/venv.sh
venv=$(iceberg_venv)
# The workspace build (same features as `cargo test --workspace`): DataFusion
# is compiled once, and the binary is the one the other scripts use.
cargo build --workspace --locked
LOGBOOK_BIN="$(cd "$target/debug" && pwd)/logbook" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/iceberg "$@"
