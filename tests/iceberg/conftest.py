"""Fixtures for the Iceberg mirror tests: the `logbook` CLI on a fresh
warehouse per test, with what the tests read of `metadata/` directly.

Run by scripts/iceberg-readers.sh, which sets LOGBOOK_BIN to the workspace's
debug build.
"""

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from readers_common import Logbook, logbook_bin  # noqa: E402,F401 (logbook_bin: a fixture)


class IcebergLogbook(Logbook):
    FORMAT = "iceberg"
    MIRROR_KEY = "iceberg_snapshot_id"

    # The Iceberg mirror's metadata, read directly.
    def metadata_dir(self, table) -> Path:
        return self.table_path(table) / "metadata"

    def hint(self, table) -> int:
        """What `version-hint.text` holds: a number N, no newline (`vN.metadata.json` is current)."""
        text = (self.metadata_dir(table) / "version-hint.text").read_text()
        assert text.isdigit(), f"version-hint.text holds {text!r}, not a bare number"
        return int(text)

    def metadata_file(self, table, n=None) -> Path:
        """`vN.metadata.json` (default: the one the hint names)."""
        return self.metadata_dir(table) / f"v{self.hint(table) if n is None else n}.metadata.json"

    def metadata(self, table, n=None):
        return json.loads(self.metadata_file(table, n).read_text())

    def metadata_versions(self, table):
        """The N of every `vN.metadata.json`, ascending."""
        found = (re.fullmatch(r"v(\d+)\.metadata\.json", p.name) for p in self.metadata_dir(table).iterdir())
        return sorted(int(m[1]) for m in found if m)

    def metadata_listing(self, table):
        return sorted(p.name for p in self.metadata_dir(table).iterdir())


@pytest.fixture
def lb(logbook_bin, tmp_path):
    return IcebergLogbook(logbook_bin, tmp_path / "warehouse", tmp_path)
