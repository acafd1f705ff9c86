"""What the mirror reader suites (tests/delta, tests/iceberg) share: the
`logbook` CLI on a fresh warehouse, the `orders` history they build, and the
exact comparison of what an engine reads with `logbook sql`.

Each suite's conftest puts this directory on sys.path and subclasses
`Logbook` with what it reads of its own mirror's files.
"""

import csv
import json
import os
import random
import shlex
import subprocess
import sys
from collections import Counter
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pytest


@pytest.fixture(scope="session")
def logbook_bin():
    path = os.environ.get("LOGBOOK_BIN")
    if not path or not os.access(path, os.X_OK):
        raise pytest.UsageError(
            f"LOGBOOK_BIN={path!r}: set it to a built `logbook` binary "
            "(scripts/delta-readers.sh and scripts/iceberg-readers.sh do)"
        )
    return path


class Logbook:
    """The CLI on one warehouse. Every call's stderr is echoed to the test's
    captured stderr (pytest prints it when the test fails); a failing call
    fails the test with its command line, stdout and stderr.

    Subclasses name their mirror: FORMAT (`--mirror` and the status's
    `format`) and MIRROR_KEY (what `logbook log --json` calls an entry's
    place in the mirror)."""

    FORMAT = None
    MIRROR_KEY = None

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
        """Log entries that have a place in this mirror (every entry must say, null or not)."""
        key = self.MIRROR_KEY
        entries = self.log(table)
        assert all(key in e for e in entries), f"a `logbook log --json` entry has no {key}"
        return [e for e in entries if e[key] is not None]

    def mirror_statuses(self, table):
        """`logbook mirror --status --json`: one status per mirror that is on or left a log."""
        return self.json("mirror", table, "--status", "--json")

    def mirror_status(self, table, format=None):
        """Where the mirror in `format` (default: this suite's) stands."""
        format = format or self.FORMAT
        statuses = self.mirror_statuses(table)
        found = [s for s in statuses if s["format"] == format]
        assert found, f"no {format} mirror in {statuses}"
        return found[0]


def assert_caught_up(lb, table, format=None):
    status = lb.mirror_status(table, format)
    assert status["enabled"] is True and status["behind"] == 0, status
    assert status["mirrored_version"] == status["logbook_version"], status


# ------------------------------------------------------------------ data

ORDERS = "date:date,order_id:int64,customer:string,amount:float64,placed_at:timestamptz"
DAYS = [date(2026, 3, 1) + timedelta(days=i) for i in range(6)]
UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NAIVE_EPOCH = datetime(1970, 1, 1)


def order_rows(day, batch, n, amount="amount"):
    """n rows of `day`, different for each batch (ids, amounts, customers), so
    that a stale or missing file changes counts and sums; some nulls."""
    rng = random.Random(f"{day}/{batch}")
    start = datetime.combine(day, time(), UTC)
    rows = []
    for i in range(n):
        placed = start + timedelta(seconds=rng.randrange(86_400), microseconds=rng.randrange(10**6))
        rows.append({
            "date": day.isoformat(),
            "order_id": order_id(day, batch, i),
            "customer": f"c-{rng.randrange(40):02}",
            amount: None if i % 7 == 3 else round(rng.uniform(1, 500), 2),
            "placed_at": None if i % 11 == 5 else placed.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        })
    return rows


def order_id(day, batch, i):
    """The id of `order_rows(day, batch, n)[i]`: each date's ids lie in a range of their own."""
    return day.toordinal() * 10_000 + batch * 1_000 + i


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)  # None becomes an empty field: a null
    return path


def replace(lb, day, batch, n, *flags, amount="amount"):
    """`logbook write orders --date DAY` from a fresh CSV."""
    path = write_csv(lb.cwd / f"orders-{day}-{batch}.csv", order_rows(day, batch, n, amount))
    lb("write", "orders", "--date", day, path, *flags)


def create_orders(lb, *flags):
    lb("create", "orders", "--schema", ORDERS, "--partition-by", "date", *flags)


def build_history(lb, check=lambda step: None, mirror=None):
    """A mirrored `orders` (`--mirror MIRROR`, default the suite's own): replaces
    of 3 dates, a re-run of one date with other rows, a staged publish of 3
    dates (one replaced, two new), a date written in small files and
    compacted; `check(step)` after each step."""
    create_orders(lb, "--mirror", mirror or lb.FORMAT)
    check("create")
    for day in DAYS[:3]:
        replace(lb, day, 1, 20)
    check("replaces")
    replace(lb, DAYS[1], 2, 13)
    check("re-run")
    for day in (DAYS[0], DAYS[3], DAYS[4]):
        replace(lb, day, 3, 9, "--stage", "restate")
    lb("stage", "publish", "orders", "restate")
    check("publish")
    replace(lb, DAYS[5], 4, 17, "--max-rows-per-file", "4")
    lb("compact", "orders")
    assert lb.log("orders")[-1]["operation"] == "compact", "nothing was compacted"
    check("compact")


def where(day):
    """A SQL filter on the date column (none without a day)."""
    return f" WHERE date = DATE '{day}'" if day else ""


# ------------------------------------------------------------ comparison


def _is_timestamp(tz_ok):
    return lambda t: pa.types.is_timestamp(t) and t.unit == "us" and tz_ok(t.tz)


ARROW_TYPES = {
    "int32": pa.types.is_int32,
    "int64": pa.types.is_int64,
    "float64": pa.types.is_float64,
    "string": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t),
    "date": pa.types.is_date32,
    "timestamp": _is_timestamp(lambda tz: tz is None),
    "timestamptz": _is_timestamp(lambda tz: tz in ("UTC", "Etc/UTC")),
}
NUMERIC = ("int32", "int64", "float64")


def from_json(value, ty):
    """A value of `logbook sql --format json` in comparable form."""
    if value is not None and ty == "timestamptz":
        return (datetime.fromisoformat(value) - EPOCH) // timedelta(microseconds=1)
    if value is not None and ty == "timestamp":
        return (datetime.fromisoformat(value) - NAIVE_EPOCH) // timedelta(microseconds=1)
    return value


def from_arrow(value, ty):
    """A reader's value in the same form; a wrong kind of value never compares equal."""
    if value is None:
        return None
    if ty == "date":
        return value.isoformat() if type(value) is date else f"{value!r} is not a date"
    if ty == "timestamptz":  # UTC-adjusted: an aware datetime
        if not isinstance(value, datetime) or value.tzinfo is None:
            return f"{value!r} is not a {ty}"
        return (value - EPOCH) // timedelta(microseconds=1)
    if ty == "timestamp":  # local: a naive datetime
        if not isinstance(value, datetime) or value.tzinfo is not None:
            return f"{value!r} is not a {ty}"
        return (value - NAIVE_EPOCH) // timedelta(microseconds=1)
    return value


def normalised(rows, schema, convert):
    return sorted((tuple(convert(r.get(n), ty) for n, ty in schema) for r in rows), key=repr)


def checksums(schema, rows):
    """Per value of the first date column: rows and the sum of each numeric column."""
    key = next((i for i, (_, ty) in enumerate(schema) if ty == "date"), None)
    nums = [i for i, (_, ty) in enumerate(schema) if ty in NUMERIC]
    sums = {}
    for r in rows:
        s = sums.setdefault(None if key is None else r[key], [0] * (1 + len(nums)))
        s[0] += 1
        for j, i in enumerate(nums, 1):
            s[j] += r[i] if isinstance(r[i], (int, float)) else 0
    return {k: tuple(round(x, 6) for x in v) for k, v in sorted(sums.items(), key=repr)}


def assert_rows_equal(lb, table, got, reader, what, version=None, day=None):
    """`got` (the arrow table `reader` read, described by `what`) holds exactly
    the columns, types and rows of `logbook sql` on `table` at logbook's
    `version` (default: latest), optionally of one date."""
    schema = lb.schema(table, version)
    want = lb.sql(f"SELECT * FROM {table}{where(day)}", None if version is None else {table: version})
    names = [n for n, _ in schema]
    assert got.column_names == names, f"{what}: columns {got.column_names}, logbook's {names}"
    types = {n: got.schema.field(n).type for n in names}
    wrong = [f"{n}: {types[n]} for {ty}" for n, ty in schema if not ARROW_TYPES[ty](types[n])]
    assert not wrong, f"{what}: column types {wrong}"
    want_rows = normalised(want, schema, from_json)
    got_rows = normalised(got.to_pylist(), schema, from_arrow)
    if got_rows != want_rows:
        only_logbook = list((Counter(want_rows) - Counter(got_rows)).elements())[:5]
        only_reader = list((Counter(got_rows) - Counter(want_rows)).elements())[:5]
        raise AssertionError(
            f"{what}: {len(got_rows)} rows, logbook {len(want_rows)} ({names})\n"
            f"  checksums (rows, numeric sums) logbook: {checksums(schema, want_rows)}\n"
            f"  checksums (rows, numeric sums) {reader}: {checksums(schema, got_rows)}\n"
            f"  rows only logbook has: {only_logbook}\n  rows only {reader} has: {only_reader}"
        )


def assert_read_matches(lb, table, reader, read, at=None, version=None, day=None, note=""):
    """`read(place, day)` (`reader`'s arrow table of the mirror at `place` in
    it, its latest for None) returns the rows of `logbook sql`: both at the
    log entry `at` (its version and its place, `lb.MIRROR_KEY`), else the
    mirror's latest against logbook's `version` (default: latest); optionally
    of one date."""
    key = lb.MIRROR_KEY
    place = at[key] if at else None
    assert not at or place is not None, f"logbook version {at['version']} has no {key}"
    version = at["version"] if at else version
    got = read(place, day)
    what = f"{note}: " * bool(note) + f"{reader} reading {table}"
    what += f" at {key} {place}" * (place is not None)
    what += f" (logbook version {version})" * (version is not None) + f" where date = {day}" * bool(day)
    assert_rows_equal(lb, table, got, reader, what, version=version, day=day)
