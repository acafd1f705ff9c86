#!/usr/bin/env bash
# pylogbook as users install it, checked end to end (not in CI: a release
# build of DataFusion took about 25 minutes cold on 2 cores before the release
# profile's fat LTO, which adds a long link (not measured for the wheel); run it before
# a release, and after changing the Python package's build):
# 1. `maturin build --release` of crates/logbook-python (maturin pinned),
#    sharing the release build of `cargo build --release` and the benches
#    (same target directory, same features: scripts/check-features.sh);
#    prints the wheel's size and the build's time;
# 2. the Python tests (scripts/python-tests.sh) against that wheel, in a
#    fresh virtual environment;
# 3. `pip install ./crates/logbook-python` from a clean clone of HEAD in
#    another fresh environment (pip fetches maturin itself and builds), then
#    a write and a read through the installed package.
# Usage: scripts/python-release.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
target="$(mkdir -p "${CARGO_TARGET_DIR:-target}" && realpath "${CARGO_TARGET_DIR:-target}")"
export CARGO_TARGET_DIR="$target"
. scripts/venv.sh
tools="$target/venv-maturin"
ensure_venv "$tools" "maturin==1.16.0"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== 1. the release wheel (maturin build --release)"
start=$(date +%s)
(cd crates/logbook-python && "$tools/bin/maturin" build --release --locked --out "$work/dist" --quiet)
wheel=$(ls "$work"/dist/pylogbook-*.whl)
echo "built $(basename "$wheel") in $(( $(date +%s) - start )) s: $(du -k "$wheel" | cut -f1) KiB ($(python3 -c "import zipfile,sys; print(sum(i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist()) // 1024)" "$wheel") KiB unpacked)"

echo "== 2. the Python tests against the release wheel"
LOGBOOK_PYTHON_VENV_DIR="$work/venv-tests" scripts/python-tests.sh --wheel "$wheel"

echo "== 3. pip install ./crates/logbook-python from a clean clone"
git clone -q "$root" "$work/src"
python3 -m venv "$work/venv-pip"
start=$(date +%s)
"$work/venv-pip/bin/pip" install -q "$work/src/crates/logbook-python" "pyarrow==26.0.1"
echo "pip install took $(( $(date +%s) - start )) s"
"$work/venv-pip/bin/python" - "$work/wh" <<'PY'
import datetime as dt, sys
import pyarrow as pa
import pylogbook as lb
wh = lb.Warehouse(sys.argv[1])
t = wh.create_table("orders", schema=pa.schema([("date", pa.date32()), ("n", pa.int64())]), partition_by="date")
info = t.replace_partition("2026-03-15", pa.table({"date": [dt.date(2026, 3, 15)] * 3, "n": [1, 2, 3]}))
total = pa.table(wh.sql("SELECT sum(n) AS s FROM orders")).column("s").to_pylist()
assert (info.version, total) == (1, [6]), (info, total)
print(f"pylogbook {lb.__version__} from pip install: wrote version {info.version}, read back sum {total[0]}")
PY
echo "python-release passed"
