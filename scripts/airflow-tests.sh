#!/usr/bin/env bash
# pylogbook.airflow with Airflow 3: installs Airflow (every package pinned
# in scripts/airflow-requirements.txt) into a virtual environment with the
# pylogbook wheel from the workspace build (as scripts/python-tests.sh),
# makes Airflow's SQLite metadata database in a temporary AIRFLOW_HOME, and
# runs crates/logbook-python/tests/airflow: DAG runs with `dag.test()`,
# backfills created by the `airflow` CLI. No Airflow server is started.
# Usage: scripts/airflow-tests.sh [PYTEST ARGS]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
venv="${LOGBOOK_AIRFLOW_VENV_DIR:-$target/venv-airflow}"
. scripts/venv.sh
ensure_venv "$venv" "$(grep -v '^#' scripts/airflow-requirements.txt | tr '\n' ' ') wheel==0.48.0"
cargo build --workspace --locked
install_pylogbook "$target/debug/lib_native.so" "$venv"
AIRFLOW_HOME=$(mktemp -d)
trap 'rm -rf "$AIRFLOW_HOME"' EXIT
# The tests run only against a database carrying this mark.
touch "$AIRFLOW_HOME/.logbook-airflow-tests"
export AIRFLOW_HOME
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/crates/logbook-python/tests/airflow/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export PATH="$(cd "$venv/bin" && pwd):$PATH"
airflow db migrate > "$AIRFLOW_HOME/migrate.log" 2>&1 || { cat "$AIRFLOW_HOME/migrate.log" >&2; exit 1; }
cd crates/logbook-python/tests
python -m pytest -q -p no:cacheprovider airflow "$@"
