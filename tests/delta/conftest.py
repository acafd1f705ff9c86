"""Fixtures for the Delta Lake mirror tests: the `logbook` CLI on a fresh
warehouse per test.

Run by scripts/delta-readers.sh, which sets LOGBOOK_BIN to the workspace's
debug build.
"""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def logbook_bin():
    path = os.environ.get("LOGBOOK_BIN")
    if not path or not os.access(path, os.X_OK):
        raise pytest.UsageError(
            f"LOGBOOK_BIN={path!r}: set it to a built `logbook` binary (scripts/delta-readers.sh does)"
        )
    return path


class Logbook:
    """The CLI on one warehouse. Every call's stderr is echoed to the test's
    captured stderr (pytest prints it when the test fails); a failing call
    fails the test with its command line, stdout and stderr."""

    def __init__(self, binary, warehouse: Path, cwd: Path):
        self.binary = binary
        self.warehouse = warehouse
        self.cwd = cwd
        # Hermetic: no warehouse, stage or expected version from the caller.
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LOGBOOK_")}
        self.env["RUST_BACKTRACE"] = "1"

    def __call__(self, *args) -> str:
        argv = [self.binary, "--warehouse", str(self.warehouse), *map(str, args)]
        proc = subprocess.run(
            argv, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=300
        )
        shown = shlex.join(["logbook", *map(str, args)])
        sys.stderr.write(f"$ {shown}  (exit {proc.returncode})\n{proc.stderr}")
        if proc.returncode != 0:
            pytest.fail(
                f"`{shown}` exited {proc.returncode}\n"
                f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}",
                pytrace=False,
            )
        return proc.stdout

    def json(self, *args):
        out = self(*args)
        try:
            return json.loads(out)
        except json.JSONDecodeError as e:
            pytest.fail(f"`logbook {shlex.join(map(str, args))}` printed no JSON ({e}):\n{out}")

    def table_path(self, table) -> Path:
        return self.warehouse / table

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

    def sql(self, query, versions=None):
        """Rows as dicts (SQL nulls are absent keys, as arrow's JSON writer omits them)."""
        pins = [a for t, v in (versions or {}).items() for a in ("--version", f"{t}={v}")]
        return self.json("sql", query, "--format", "json", *pins)

    def schema(self, table, version=None):
        """[(name, type)] at the latest or a given version."""
        extra = ["--version", version] if version is not None else []
        doc = self.json("schema", table, "--json", *extra)
        return [(c["name"], c["type"]) for c in doc["columns"]]

    def log(self, table):
        return self.json("log", table, "--json")

    def mirrored(self, table):
        """Log entries that have a Delta version (every entry must say, null or not)."""
        entries = self.log(table)
        assert all("delta_version" in e for e in entries), "a `logbook log --json` entry has no delta_version"
        return [e for e in entries if e["delta_version"] is not None]

    def mirror_status(self, table):
        return self.json("mirror", table, "--status", "--json")


@pytest.fixture
def lb(logbook_bin, tmp_path):
    return Logbook(logbook_bin, tmp_path / "warehouse", tmp_path)

