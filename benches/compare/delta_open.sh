#!/usr/bin/env bash
# deltalake opening a mirrored logbook table at 3,000 commits vs at 10: with
# a Delta checkpoint every 100 commits, the open reads one checkpoint and
# fewer than 100 JSON entries, so its cost should stay flat.
# Both tables hold the same 10 dates (the 3,000 commits rewrite them), so
# only history differs. Builds the two tables with the workspace's `logbook` CLI (one process per
# commit), then times `DeltaTable(path).file_uris()` alternately A B A B.
# Usage: benches/compare/delta_open.sh [ROUNDS]   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds="${1:-15}"
target="${CARGO_TARGET_DIR:-target}"
. scripts/venv.sh
venv=$(delta_venv)
cargo build --workspace --locked
bin="$(cd "$target/debug" && pwd)/logbook"
work="$target/delta-open"
# The Delta log before the checkpoint the oldest kept version needs is
# trimmed by the vacuum of h3000v.
. benches/compare/mirror_history.sh
mirror_history "$work" delta "$bin"
"$venv/bin/python" - "$work" "$rounds" <<'PY'
import statistics, sys, time
from deltalake import DeltaTable
work, rounds = sys.argv[1], int(sys.argv[2])
times = {"h10": [], "h3000": [], "h3000v": []}
for _ in range(rounds):
    for n in times:
        t0 = time.perf_counter()
        t = DeltaTable(f"{work}/{n}/t")
        assert len(t.file_uris()) == 10
        times[n].append((time.perf_counter() - t0) * 1000)
base = statistics.median(times["h10"])
label = {"h10": "10", "h3000": "3,000", "h3000v": "3,000, then expire --keep-last 10 and vacuum"}
print("| commits | median open ms | ratio to 10 |")
print("|---|---|---|")
for n, ts in times.items():
    print(f"| {label[n]} | {statistics.median(ts):.1f} | {statistics.median(ts) / base:.2f} |")
PY
