"""The Iceberg mirror (issue 40) read by engines nobody here wrote.

Each test builds a warehouse with the `logbook` CLI, then checks that pyiceberg
(a StaticTable on the `vN.metadata.json` that `version-hint.text` names),
DuckDB's `iceberg_scan` and polars' `scan_iceberg` return exactly the rows of
`logbook sql`: at the latest version, and at earlier ones through the
`iceberg_snapshot_id` that `logbook log --json` gives each commit.
"""

import importlib.metadata
import os
import re
from datetime import date, timedelta

import duckdb
import polars as pl
import pytest
from pyiceberg.expressions import AlwaysTrue, EqualTo
from pyiceberg.table import StaticTable
from readers_common import (DAYS, assert_caught_up, assert_read_matches, build_history, create_orders, order_id,
                            order_rows, replace, where, write_csv)

# polars plans the scan with pyiceberg (the polars_iceberg plugin is not
# installed): say so, which silences its PerformanceWarning.
os.environ.setdefault("POLARS_ICEBERG_PLANNER", "pyiceberg")

# --------------------------------------------------------------- readers


def duckdb_extension(package, name):
    """The extension file a duckdb-ext-* package ships: LOADed, nothing downloaded."""
    return next(str(f.locate()) for f in importlib.metadata.files(package) or []
                if f.name == f"{name}.duckdb_extension")


# With autoloading off, avro must be loaded before iceberg.
DUCKDB_EXTENSIONS = [duckdb_extension("duckdb-ext-avro", "avro"), duckdb_extension("duckdb-ext-iceberg", "iceberg")]


def duckdb_connection():
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    for path in DUCKDB_EXTENSIONS:
        con.execute(f"LOAD '{path}'")
    return con


def iceberg_scan(lb, table, snapshot_id=None):
    quoted = str(lb.table_path(table)).replace("'", "''")
    at = f", snapshot_from_id => {int(snapshot_id)}" if snapshot_id is not None else ""
    return f"iceberg_scan('{quoted}'{at})"


def static_table(lb, table):
    """pyiceberg's table of the metadata file the hint names."""
    return StaticTable.from_metadata(str(lb.metadata_file(table)))


def read_pyiceberg(lb, table, snapshot_id=None, day=None):
    row_filter = EqualTo("date", day.isoformat()) if day else AlwaysTrue()
    return static_table(lb, table).scan(row_filter=row_filter, snapshot_id=snapshot_id).to_arrow()


def read_duckdb(lb, table, snapshot_id=None, day=None):
    with duckdb_connection() as con:
        return con.execute(f"SELECT * FROM {iceberg_scan(lb, table, snapshot_id)}{where(day)}").fetch_arrow_table()


def read_polars(lb, table, snapshot_id=None, day=None):
    frame = pl.scan_iceberg(static_table(lb, table), snapshot_id=snapshot_id)
    if day:
        frame = frame.filter(pl.col("date") == day)
    return frame.collect().to_arrow()


READERS = {"pyiceberg": read_pyiceberg, "duckdb": read_duckdb, "polars": read_polars}

# ------------------------------------------------------------ comparison


def assert_reader_matches(lb, table, reader, **kwargs):
    """`reader` on the Iceberg table returns the rows of `logbook sql`: at=, version=, day=, note= as
    in assert_read_matches."""
    def read(snapshot_id, day):
        return READERS[reader](lb, table, snapshot_id=snapshot_id, day=day)
    assert_read_matches(lb, table, reader, read, **kwargs)


def files_per_date(lb, table):
    return {p["date"]: p["files"] for p in lb.json("partitions", table, "--json")}


# ----------------------------------------------------------------- tests


@pytest.mark.parametrize("reader", READERS)
def test_readers_return_logbooks_rows_after_each_kind_of_commit(lb, reader):
    build_history(lb, check=lambda step: assert_reader_matches(lb, "orders", reader, note=f"after {step}"))


@pytest.mark.parametrize("reader", READERS)
def test_time_travel_to_the_snapshot_of_each_logbook_commit(lb, reader):
    build_history(lb)
    entries = lb.mirrored("orders")
    assert [e["version"] for e in entries] == [e["version"] for e in lb.log("orders")], "a commit not mirrored"
    assert {"create_table", "replace_partitions", "publish_stage", "compact"} <= {e["operation"] for e in entries}
    for e in entries:
        assert_reader_matches(lb, "orders", reader, at=e)


def test_each_snapshot_names_its_logbook_commit(lb):
    build_history(lb)
    entries = lb.log("orders")
    # v1.metadata.json mirrors version 0; the hint names the newest, and nothing is missing.
    assert lb.metadata_versions("orders") == list(range(1, len(entries) + 1))
    assert lb.hint("orders") == len(entries)
    md = lb.metadata("orders")
    assert md["format-version"] == 2
    assert md["current-snapshot-id"] == md["refs"]["main"]["snapshot-id"] == entries[-1]["iceberg_snapshot_id"]
    assert md["partition-specs"] == [{"spec-id": 0, "fields": [
        {"source-id": 1, "field-id": 1000, "name": "date", "transform": "identity"}]}]
    snapshots = {s["snapshot-id"]: s for s in md["snapshots"]}
    assert [s["snapshot-id"] for s in md["snapshot-log"]] == [e["iceberg_snapshot_id"] for e in entries]
    for e in entries:
        assert e["iceberg_snapshot_id"] == e["version"] + 1, e
        summary = snapshots[e["iceberg_snapshot_id"]]["summary"]
        assert (summary["logbook.version"], summary["logbook.commit-id"]) == (str(e["version"]), e["commit_id"])
        # Each metadata version's current snapshot is its own commit's.
        assert lb.metadata("orders", e["version"] + 1)["current-snapshot-id"] == e["iceberg_snapshot_id"]
    current = snapshots[md["current-snapshot-id"]]["summary"]
    assert current["total-records"] == str(len(lb.sql("SELECT * FROM orders"))), current
    assert md["location"].startswith("file:///"), md["location"]


@pytest.mark.parametrize("reader", READERS)
def test_date_filters_return_that_dates_rows(lb, reader):
    build_history(lb)
    for day in [*DAYS, DAYS[-1] + timedelta(days=1)]:
        assert_reader_matches(lb, "orders", reader, day=day)


def test_pyiceberg_plans_only_the_files_a_filter_can_match(lb):
    build_history(lb)
    files = files_per_date(lb, "orders")
    table = static_table(lb, "orders")
    tasks = list(table.scan().plan_files())
    assert len(tasks) == sum(files.values()) and len(files) == len(DAYS), files
    # The identity partition: a date filter plans exactly that date's files.
    for day in [*DAYS, DAYS[-1] + timedelta(days=1)]:
        planned = list(table.scan(row_filter=EqualTo("date", day.isoformat())).plan_files())
        assert len(planned) == files.get(day.isoformat(), 0), (day, files)
        assert {date(1970, 1, 1) + timedelta(days=t.file.partition[0]) for t in planned} <= {day}
    # Column metrics: the bounds of order_id (each date's ids lie apart) leave
    # one file for an id, none for an id replaced by the re-run of DAYS[1].
    planned = list(table.scan(row_filter=EqualTo("order_id", order_id(DAYS[2], 1, 5))).plan_files())
    assert len(planned) == 1, [t.file.file_path for t in planned]
    assert list(table.scan(row_filter=EqualTo("order_id", order_id(DAYS[1], 1, 5))).plan_files()) == []
    # Value and null counts (field 4: amount) agree with the rows.
    nulls = len(lb.sql("SELECT * FROM orders WHERE amount IS NULL"))
    assert nulls > 0
    assert sum(t.file.null_value_counts[4] for t in tasks) == nulls
    assert all(t.file.value_counts[4] == t.file.record_count for t in tasks)


def test_duckdb_reads_only_the_files_of_the_filtered_date(lb):
    build_history(lb)
    files = files_per_date(lb, "orders")

    def files_read(query):
        plan = con.execute(f"EXPLAIN ANALYZE {query}").fetchall()[0][1]
        counts = re.findall(r"Total Files Read: (\d+)", plan)
        assert len(counts) == 1, plan
        return int(counts[0])

    with duckdb_connection() as con:
        scan = f"SELECT * FROM {iceberg_scan(lb, 'orders')}"
        assert files_read(scan) == sum(files.values())
        for day in DAYS:
            assert files_read(f"{scan}{where(day)}") == files[day.isoformat()] < sum(files.values()), day


@pytest.mark.parametrize("reader", READERS)
def test_readers_after_a_column_rename(lb, reader):
    build_history(lb)
    lb("alter", "orders", "--rename-column", "amount:total")
    assert_reader_matches(lb, "orders", reader)
    # The snapshot before the rename keeps its schema, and the old name.
    assert_reader_matches(lb, "orders", reader, at=lb.mirrored("orders")[-2])


@pytest.mark.parametrize("reader", READERS)
def test_readers_after_writes_following_a_column_rename(lb, reader):
    # Files written after the rename sit beside older ones: the column must read from both.
    build_history(lb)
    lb("alter", "orders", "--rename-column", "amount:total")
    replace(lb, DAYS[2], 5, 11, amount="total")
    replace(lb, DAYS[5] + timedelta(days=1), 5, 6, amount="total")
    assert_reader_matches(lb, "orders", reader)


@pytest.mark.parametrize("reader", READERS)
def test_a_widened_column_reads_from_files_of_both_widths(lb, reader):
    # int32 files under a column the current schema declares `long`.
    lb("create", "w", "--schema", "date:date,n:int32", "--partition-by", "date", "--mirror", "iceberg")
    lb("write", "w", "--date", "2026-01-01", write_csv(lb.cwd / "w1.csv", [{"date": "2026-01-01", "n": 7}]))
    lb("alter", "w", "--widen-column", "n:int64")
    rows = [{"date": "2026-01-02", "n": 5_000_000_000}]
    lb("write", "w", "--date", "2026-01-02", write_csv(lb.cwd / "w2.csv", rows))
    md = lb.metadata("w")
    n_types = {s["schema-id"]: {f["name"]: f["type"] for f in s["fields"]}["n"] for s in md["schemas"]}
    assert n_types[md["current-schema-id"]] == "long" and "int" in n_types.values(), n_types
    assert_reader_matches(lb, "w", reader)
    for e in lb.mirrored("w"):  # int before the widening, long after
        assert_reader_matches(lb, "w", reader, at=e)


@pytest.mark.parametrize("reader", READERS)
def test_a_dropped_column_and_its_name_added_again(lb, reader):
    build_history(lb)
    lb("alter", "orders", "--drop-column", "customer")
    assert_reader_matches(lb, "orders", reader, note="after the drop")
    rows = [{k: v for k, v in r.items() if k != "customer"} for r in order_rows(DAYS[3], 6, 8)]
    lb("write", "orders", "--date", DAYS[3], write_csv(lb.cwd / "dropped.csv", rows))
    assert_reader_matches(lb, "orders", reader, note="after a write without the column")
    # A new column of the old name: older files' `customer` is another field, never read as this one.
    lb("alter", "orders", "--add-column", "customer:string")
    replace(lb, DAYS[4], 6, 5)
    assert_reader_matches(lb, "orders", reader, note="after adding the name again")
    assert len(lb.sql("SELECT * FROM orders WHERE customer IS NOT NULL")) == 5
    before_drop = [e for e in lb.mirrored("orders") if e["operation"] == "compact"][-1]
    assert_reader_matches(lb, "orders", reader, at=before_drop, note="before the drop")


@pytest.mark.parametrize("reader", READERS)
def test_timestamp_and_timestamptz_keep_their_types(lb, reader):
    lb("create", "events", "--schema", "date:date,local:timestamp,utc:timestamptz", "--partition-by", "date",
       "--mirror", "iceberg")
    rows = [
        {"date": "2026-03-01", "local": "2026-03-01T23:59:59.999999", "utc": "2026-03-01T23:30:00.000001Z"},
        {"date": "2026-03-01", "local": "1969-12-31T23:59:59.5", "utc": "1969-12-31T23:59:59.5Z"},
        {"date": "2026-03-01", "local": "2026-03-01T12:00:00", "utc": "2026-03-01T12:00:00+02:00"},
        {"date": "2026-03-01", "local": None, "utc": None},
    ]
    lb("write", "events", "--date", "2026-03-01", write_csv(lb.cwd / "events.csv", rows))
    md = lb.metadata("events")
    schema = next(s for s in md["schemas"] if s["schema-id"] == md["current-schema-id"])
    assert {f["name"]: f["type"] for f in schema["fields"]} == {
        "date": "date", "local": "timestamp", "utc": "timestamptz"}
    # Types are checked exactly: a zone on `local`, or none on `utc`, fails.
    assert_reader_matches(lb, "events", reader)


@pytest.mark.parametrize("reader", READERS)
def test_a_mirrored_dimension_reads_with_its_validity_intervals(lb, reader):
    lb("create", "customers", "--schema", "customer:string,region:string", "--scd2", "--key", "customer",
       "--mirror", "iceberg")
    first = [{"customer": f"c-{i:02}", "region": ["Berlin", "Hamburg", "Munich"][i % 3]} for i in range(12)]
    lb("apply", "customers", "--effective", "2026-01-01", write_csv(lb.cwd / "c1.csv", first))
    assert_reader_matches(lb, "customers", reader, note="after the first apply")
    moves = [{"customer": "c-01", "region": "Munich"}, {"customer": "c-04", "region": "Berlin"},
             {"customer": "c-07", "region": "Cologne"}, {"customer": "c-12", "region": "Hamburg"}]
    lb("apply", "customers", "--effective", "2026-02-15", write_csv(lb.cwd / "c2.csv", moves))
    assert_reader_matches(lb, "customers", reader, note="after the second apply")
    assert len(lb.sql("SELECT * FROM customers WHERE valid_to IS NOT NULL")) == 3
    first_apply = [e for e in lb.mirrored("customers") if e["operation"] == "apply_dimension"][0]
    assert_reader_matches(lb, "customers", reader, at=first_apply)


def test_delta_and_iceberg_mirrors_at_once(lb):
    build_history(lb, mirror="delta,iceberg")
    assert sorted(s["format"] for s in lb.mirror_statuses("orders")) == ["delta", "iceberg"]
    assert_caught_up(lb, "orders", "delta")
    assert_caught_up(lb, "orders", "iceberg")
    changing = [e for e in lb.log("orders") if e["operation"] != "create_table"]
    assert all(e["delta_version"] is not None and e["iceberg_snapshot_id"] is not None for e in changing), changing
    assert (lb.table_path("orders") / "_delta_log").is_dir()
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader)
    assert_reader_matches(lb, "orders", "pyiceberg", at=changing[0])


def test_expire_and_vacuum_keep_the_retained_snapshots_readable(lb):
    build_history(lb)
    before = lb.log("orders")
    retained_from = before[-3]["version"]
    gone = [e["iceberg_snapshot_id"] for e in before if e["version"] < retained_from]
    lb("expire", "orders", "--keep-last", "3")
    lb("vacuum", "orders", "--retention", "0s", "--force")
    assert_caught_up(lb, "orders")
    entries = lb.log("orders")
    assert [e["operation"] for e in entries[-2:]] == ["expire", "vacuum"]
    kept = [e for e in entries if e["version"] >= retained_from]
    # The log names no snapshot the metadata no longer holds.
    assert all(e["iceberg_snapshot_id"] is None for e in entries if e["version"] < retained_from)
    md = lb.metadata("orders")
    assert sorted(s["snapshot-id"] for s in md["snapshots"]) == [e["iceberg_snapshot_id"] for e in kept]
    assert not set(gone) & {s["snapshot-id"] for s in md["snapshot-log"]}, md["snapshot-log"]
    assert not set(gone) & {r["snapshot-id"] for r in md["refs"].values()}, md["refs"]
    listing = lb.metadata_listing("orders")
    assert not [n for n in listing if any(n.startswith(f"snap-{g}-") for g in gone)], listing
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader, note="after expire and vacuum")
    for e in kept:
        for reader in ("pyiceberg", "duckdb"):
            assert_reader_matches(lb, "orders", reader, at=e, note="a retained snapshot")
    with pytest.raises(ValueError, match=f"Snapshot not found: {gone[-1]}"):
        static_table(lb, "orders").scan(snapshot_id=gone[-1]).to_arrow()


@pytest.mark.parametrize("hint, catch_up", [("rewound", "mirror"), ("left", "mirror"), ("rewound", "next commit")])
def test_a_lost_metadata_write_is_caught_up(lb, hint, catch_up):
    create_orders(lb, "--mirror", "iceberg")
    replace(lb, DAYS[0], 1, 10)
    replace(lb, DAYS[1], 1, 12)
    lost = lb.mirrored("orders")[-1]
    n = lb.hint("orders")
    assert lb.metadata("orders")["current-snapshot-id"] == lost["iceberg_snapshot_id"]
    # The process died after the logbook commit, before `vN.metadata.json`
    # (and so before the hint moved to it); or the hint moved and vN was lost.
    lb.metadata_file("orders", n).unlink()
    if hint == "rewound":
        (lb.metadata_dir("orders") / "version-hint.text").write_text(str(n - 1))
        # Meanwhile readers see the commit before: never a state logbook never had.
        for reader in READERS:
            assert_reader_matches(lb, "orders", reader, version=lost["version"] - 1, note="before the catch-up")
    status = lb.mirror_status("orders")
    fields = ("enabled", "behind", "logbook_version", "mirrored_version", "mirror_version")
    assert tuple(status[f] for f in fields) == (True, 1, lost["version"], lost["version"] - 1, n - 2), status
    if catch_up == "mirror":
        lb("mirror", "orders")
        last = [lost]
    else:
        replace(lb, DAYS[1], 2, 7)
        last = lb.log("orders")[-2:]
    assert_caught_up(lb, "orders")
    assert lb.hint("orders") == n - 1 + len(last)
    for e in last:
        assert lb.metadata("orders", e["version"] + 1)["current-snapshot-id"] == e["iceberg_snapshot_id"]
        assert_reader_matches(lb, "orders", "pyiceberg", at=e)
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader, note="after the catch-up")
    before = lb.metadata_listing("orders")
    lb("mirror", "orders")
    assert lb.metadata_listing("orders") == before, "a caught-up mirror wrote metadata"


def test_turning_the_mirror_on_and_off(lb):
    create_orders(lb)
    replace(lb, DAYS[0], 1, 8)
    replace(lb, DAYS[1], 1, 5)
    assert lb.mirror_statuses("orders") == []
    assert not lb.metadata_dir("orders").exists()
    lb("alter", "orders", "--mirror", "iceberg")  # mirrors the current snapshot
    assert_caught_up(lb, "orders")
    assert [e["iceberg_snapshot_id"] for e in lb.log("orders")[:2]] == [None, None]  # never mirrored one by one
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader, note="after turning the mirror on")
    replace(lb, DAYS[2], 1, 6)
    assert_caught_up(lb, "orders")
    assert_reader_matches(lb, "orders", "pyiceberg", at=lb.log("orders")[-1])
    lb("alter", "orders", "--mirror", "none")
    status = lb.mirror_status("orders")  # the metadata left behind
    assert (status["table"], status["enabled"]) == ("orders", False), status
    before = lb.metadata_listing("orders")
    replace(lb, DAYS[3], 1, 4)
    assert lb.metadata_listing("orders") == before, "a commit after `--mirror none` wrote Iceberg metadata"
    assert lb.log("orders")[-1]["iceberg_snapshot_id"] is None
