# Sourced by the scripts in benches/compare, after `set -euo pipefail`.
# Sets here (this folder), root (the repository, also made the working
# directory: the scripts and scripts/venv.sh name paths from it), release
# (the release build's folder, under CARGO_TARGET_DIR or target/), work
# (where warehouses and results go: LOGBOOK_BENCH_DIR, or target/compare;
# created), and defines ensure_venv and the pinned environments
# (scripts/venv.sh), need_gnu_time and duckdb_cli.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
release="${CARGO_TARGET_DIR:-$root/target}/release"
work="${LOGBOOK_BENCH_DIR:-$root/target/compare}"
mkdir -p "$work"
# shellcheck source=../../scripts/venv.sh
. "$root/scripts/venv.sh"

# GNU time (Debian's `time`): a program's own peak memory (`%M`).
need_gnu_time() {
  [ -x /usr/bin/time ] || { apt-get update -q >/dev/null && apt-get install -y -q time >/dev/null; }
}

# The DuckDB CLI program from the pinned `duckdb-cli` package (the program
# itself, not the Python script the package puts on PATH, which would add
# an interpreter's start to every run); prints its path.
duckdb_cli() {
  local venv="$work/venv-cli" program
  ensure_venv "$venv" "duckdb-cli==1.5.6" >&2
  program=$("$venv/bin/python" -c "import importlib.metadata as m; print(next(f.locate().resolve() for f in m.files('duckdb-cli') if str(f) == 'duckdb_cli/duckdb'))")
  chmod +x "$program"
  echo "$program"
}
