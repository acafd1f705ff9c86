#!/usr/bin/env bash
# pylogbook's tests: build the native module with the workspace's own build
# (the same features as `cargo test --workspace`, so DataFusion is compiled
# once), pack it with the Python package as an abi3 wheel (`wheel pack`;
# releases use `maturin build --release` in crates/logbook-python), install
# the wheel and the pinned test packages into a virtual environment, and run
# crates/logbook-python/tests with pytest (pyarrow, polars, pandas, DuckDB,
# and Dagster as the orchestrator).
# With --wheel PATH, that wheel (a release build: scripts/python-release.sh)
# is tested instead of the workspace's debug build.
# Usage: scripts/python-tests.sh [--wheel PATH]   (from the repository root)
set -euo pipefail
wheel=""
if [ "${1:-}" = "--wheel" ]; then wheel="$(realpath "${2:?--wheel needs a path}")"; fi
cd "$(dirname "$0")/.."
PINS="pyarrow==26.0.1 pytest==9.2.0 pandas==3.1.1 polars==2.1.0 duckdb==2.0.1 dagster==1.13.29 wheel==0.48.0 datafusion==55.0.0"
target="${CARGO_TARGET_DIR:-target}"
venv="${LOGBOOK_PYTHON_VENV_DIR:-$target/venv-python}"
. scripts/venv.sh
ensure_venv "$venv" "$PINS"
cargo build --workspace --locked
# The CLI, for what pylogbook does not expose (schema changes).
cli="$(realpath "$target")/debug/logbook"
if [ -n "$wheel" ]; then
  "$venv/bin/pip" install -q --force-reinstall --no-deps "$wheel"
else
  install_pylogbook "$target/debug/lib_native.so" "$venv"
fi
# An S3-compatible server for the tests of tables on S3.
start_moto
trap 'kill "$MOTO_PID" 2>/dev/null || true' EXIT
cd crates/logbook-python/tests
LOGBOOK_BIN="$cli" LOGBOOK_TEST_S3_ENDPOINT="$MOTO_ENDPOINT" "$venv/bin/python" -m pytest -q -p no:cacheprovider --ignore=airflow .
