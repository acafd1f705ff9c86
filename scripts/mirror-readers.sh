#!/usr/bin/env bash
# A mirror read by engines nobody here wrote: installs the pinned readers of
# FORMAT into a virtual environment (scripts/venv.sh: `delta_venv`, or
# `iceberg_venv`), builds `logbook`, and runs tests/FORMAT with pytest: each
# test builds a warehouse with the CLI and compares what every engine reads
# with `logbook sql`. DuckDB's extensions come from the `duckdb-ext-*`
# packages and are LOADed from their files: nothing is downloaded at run time.
# Usage: scripts/mirror-readers.sh delta|iceberg [PYTEST ARGS]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
format="${1:?usage: scripts/mirror-readers.sh delta|iceberg [PYTEST ARGS]}"
shift
case "$format" in
  delta|iceberg) ;;
  *) echo "scripts/mirror-readers.sh: unknown mirror format '$format' (delta or iceberg)" >&2; exit 2 ;;
esac
target="${CARGO_TARGET_DIR:-target}"
. scripts/venv.sh
venv=$("${format}_venv")
# The workspace build (same features as `cargo test --workspace`): DataFusion
# is compiled once, and the binary is the one the other scripts use.
cargo build --workspace --locked
LOGBOOK_BIN="$(cd "$target/debug" && pwd)/logbook" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "tests/$format" "$@"
