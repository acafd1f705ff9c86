"""Fixtures for the Delta Lake mirror tests: the `logbook` CLI on a fresh
warehouse per test, with what the tests read of `_delta_log/` directly.

Run by scripts/delta-readers.sh, which sets LOGBOOK_BIN to the workspace's
debug build.
"""

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from readers_common import Logbook, logbook_bin  # noqa: E402,F401 (logbook_bin: a fixture)


class DeltaLogbook(Logbook):
    FORMAT = "delta"
    MIRROR_KEY = "delta_version"

    # The Delta mirror's log, read directly.
    def delta_log(self, table) -> Path:
        return self.table_path(table) / "_delta_log"

    def commit_file(self, table, delta_version) -> Path:
        return self.delta_log(table) / f"{delta_version:020}.json"

    def commit_files(self, table):
        names = (p.name for p in self.delta_log(table).glob("*.json"))
        return sorted(n for n in names if re.fullmatch(r"\d{20}\.json", n))

    def delta_actions(self, table, delta_version):
        lines = self.commit_file(table, delta_version).read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def txn_version(self, table, delta_version):
        """The logbook version a Delta commit records in its `txn` action."""
        txns = [a["txn"] for a in self.delta_actions(table, delta_version) if "txn" in a]
        assert [t["appId"] for t in txns] == ["logbook"], f"Delta commit {delta_version}: txn {txns}"
        return txns[0]["version"]


@pytest.fixture
def lb(logbook_bin, tmp_path):
    return DeltaLogbook(logbook_bin, tmp_path / "warehouse", tmp_path)
