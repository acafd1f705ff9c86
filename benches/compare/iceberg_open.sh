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
. benches/compare/mirror_history.sh
mirror_open_setup iceberg
"$venv/bin/python" - "$work" "$rounds" <<'PY'
import sys
sys.path.insert(0, "benches/compare")
from mirror_open import report
from pyiceberg.table import StaticTable


def open_and_plan(table):
    meta = f"{table}/metadata"
    hint = open(f"{meta}/version-hint.text").read()
    t = StaticTable.from_metadata(f"{meta}/v{hint}.metadata.json")
    assert len(list(t.scan().plan_files())) == 10


report(sys.argv[1], int(sys.argv[2]), "open + plan", open_and_plan)
PY
