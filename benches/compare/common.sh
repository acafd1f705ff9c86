# Sourced by the scripts in benches/compare, after `set -euo pipefail`.
# Sets here (this folder), root (the repository, also made the working
# directory: the scripts and scripts/venv.sh name paths from it), release
# (the release build's folder, under CARGO_TARGET_DIR or target/), work
# (where warehouses and results go: LOGBOOK_BENCH_DIR, or target/compare;
# created), and defines ensure_venv and the pinned environments
# (scripts/venv.sh).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"
release="${CARGO_TARGET_DIR:-$root/target}/release"
work="${LOGBOOK_BENCH_DIR:-$root/target/compare}"
mkdir -p "$work"
# shellcheck source=../../scripts/venv.sh
. "$root/scripts/venv.sh"
