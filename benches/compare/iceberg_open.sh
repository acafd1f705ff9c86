#!/usr/bin/env bash
# pyiceberg opening and planning a logbook table's Iceberg mirror at 3,000
# commits vs at 10. Each metadata version keeps the snapshots of the
# versions logbook retains, so before `expire` the metadata file grows with
# history (one snapshot per commit); after `expire --keep-last 10` and
# `vacuum` it holds 10 again, and the goal is at most 1.2x the 10-commit
# table. Planning reads one manifest list and one manifest per month.
# Both tables hold the same 10 dates, so only history differs. Times
# `StaticTable.from_metadata(newest) + scan().plan_files()` alternately.
# Usage: benches/compare/iceberg_open.sh [ROUNDS]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-15}"
target="${CARGO_TARGET_DIR:-target}"
. scripts/venv.sh
venv=$(iceberg_venv)
cargo build --workspace --locked
bin="$(cd "$target/debug" && pwd)/logbook"
work="$target/iceberg-open"
. benches/compare/mirror_history.sh
mirror_history "$work" iceberg "$bin"
"$venv/bin/python" - "$work" "$rounds" <<'PY'
import statistics, sys, time
from pyiceberg.table import StaticTable
work, rounds = sys.argv[1], int(sys.argv[2])
times = {"h10": [], "h3000": [], "h3000v": []}
for _ in range(rounds):
    for n in times:
        t0 = time.perf_counter()
        meta = f"{work}/{n}/t/metadata"
        hint = open(f"{meta}/version-hint.text").read()
        t = StaticTable.from_metadata(f"{meta}/v{hint}.metadata.json")
        assert len(list(t.scan().plan_files())) == 10
        times[n].append((time.perf_counter() - t0) * 1000)
base = statistics.median(times["h10"])
label = {"h10": "10", "h3000": "3,000", "h3000v": "3,000, then expire --keep-last 10 and vacuum"}
print("| commits | median open + plan ms | ratio to 10 |")
print("|---|---|---|")
for n, ts in times.items():
    print(f"| {label[n]} | {statistics.median(ts):.1f} | {statistics.median(ts) / base:.2f} |")
PY
