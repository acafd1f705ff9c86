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
# The Delta log before the checkpoint the oldest kept version needs is
# trimmed by the vacuum of h3000v.
. benches/compare/mirror_history.sh
mirror_open_setup delta
"$venv/bin/python" - "$work" "$rounds" <<'PY'
import sys
sys.path.insert(0, "benches/compare")
from deltalake import DeltaTable
from mirror_open import report


def open_table(table):
    assert len(DeltaTable(table).file_uris()) == 10


report(sys.argv[1], int(sys.argv[2]), "open", open_table)
PY
