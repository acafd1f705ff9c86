"""The Delta Lake mirror (issue 17) read by engines nobody here wrote.

Each test builds a warehouse with the `logbook` CLI, then checks that deltalake
(its pyarrow and its DataFusion reader), DuckDB's `delta_scan` and polars return
exactly the rows of `logbook sql`: at the latest version, and at earlier ones
through the `delta_version` that `logbook log --json` gives each commit.
"""

import importlib.metadata
import json
from datetime import date, timedelta

import duckdb
import polars as pl
import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder
from deltalake.exceptions import DeltaProtocolError
from readers_common import (DAYS, assert_caught_up, assert_read_matches, build_history, create_orders, replace,
                            where, write_csv)

# --------------------------------------------------------------- readers


# DuckDB's Delta extension as the duckdb-ext-delta package ships it: LOADed, nothing downloaded.
DUCKDB_DELTA = next(str(f.locate()) for f in importlib.metadata.files("duckdb-ext-delta") or []
                    if f.name == "delta.duckdb_extension")


def read_deltalake(path, version=None, day=None):
    filters = [("date", "=", day)] if day else None
    return DeltaTable(str(path), version=version).to_pyarrow_table(filters=filters)


def read_deltalake_sql(path, version=None, day=None):
    """deltalake's DataFusion reader: unlike its pyarrow one, it applies column mapping."""
    query = QueryBuilder().register("t", DeltaTable(str(path), version=version))
    return pa.table(query.execute(f"SELECT * FROM t{where(day)}").read_all())


def read_duckdb(path, version=None, day=None):
    config = {"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"}
    with duckdb.connect(config=config) as con:
        con.execute(f"LOAD '{DUCKDB_DELTA}'")
        quoted = str(path).replace("'", "''")
        source = f"delta_scan('{quoted}')"
        if version is not None:
            con.execute(f"ATTACH '{quoted}' AS t (TYPE delta, VERSION {int(version)})")
            source = "t"
        return con.execute(f"SELECT * FROM {source}{where(day)}").fetch_arrow_table()


def read_polars(path, version=None, day=None):
    if day is None:
        return pl.read_delta(str(path), version=version).to_arrow()
    return pl.scan_delta(str(path), version=version).filter(pl.col("date") == day).collect().to_arrow()


READERS = {"deltalake": read_deltalake, "deltalake-sql": read_deltalake_sql, "duckdb": read_duckdb,
           "polars": read_polars}
# Readers that cannot read Delta column mapping at all: a hand-made table with a valid
# mapping reads in deltalake-sql and DuckDB, not in these two.
RENAME_READERS = ["deltalake-sql", "duckdb"] + [
    pytest.param(r, marks=pytest.mark.xfail(strict=True, raises=raises, reason=reason))
    for r, raises, reason in [
        ("deltalake", DeltaProtocolError,
         "deltalake 1.6's pyarrow reader (to_pyarrow_table) ignores column mapping: it reads a renamed "
         "column by its new name (nulls) on reader-version-2 tables and refuses the columnMapping reader "
         "feature (not in SUPPORTED_READER_FEATURES); deltalake-sql covers deltalake"),
        ("polars", DeltaProtocolError,
         "polars 2.1 refuses column mapping: 'delta table requires reader version 2 (column mapping), "
         "which polars does not support' (polars/io/delta/_dataset.py)"),
    ]
]

# ------------------------------------------------------------ comparison


def assert_reader_matches(lb, table, reader, **kwargs):
    """`reader` on the Delta table returns the rows of `logbook sql`: at=, version=, day=, note= as
    in assert_read_matches."""
    def read(delta_version, day):
        return READERS[reader](lb.table_path(table), version=delta_version, day=day)
    assert_read_matches(lb, table, reader, read, **kwargs)


# ----------------------------------------------------------------- tests


@pytest.mark.parametrize("reader", READERS)
def test_readers_return_logbooks_rows_after_each_kind_of_commit(lb, reader):
    build_history(lb, check=lambda step: assert_reader_matches(lb, "orders", reader, note=f"after {step}"))


@pytest.mark.parametrize("reader", RENAME_READERS)
def test_readers_after_a_column_rename(lb, reader):
    build_history(lb)
    lb("alter", "orders", "--rename-column", "amount:total")
    assert_reader_matches(lb, "orders", reader)


@pytest.mark.parametrize("reader", RENAME_READERS)
def test_readers_after_writes_following_a_column_rename(lb, reader):
    # Files written after the rename sit beside older ones: the column must read from both.
    build_history(lb)
    lb("alter", "orders", "--rename-column", "amount:total")
    replace(lb, DAYS[2], 5, 11, amount="total")
    replace(lb, DAYS[5] + timedelta(days=1), 5, 6, amount="total")
    assert_reader_matches(lb, "orders", reader)


@pytest.mark.parametrize("reader", READERS)
def test_a_widened_column_reads_from_files_of_both_widths(lb, reader):
    # int32 files under a column the mirror declares `long` (no typeWidening feature).
    lb("create", "w", "--schema", "date:date,n:int32", "--partition-by", "date", "--mirror", "delta")
    lb("write", "w", "--date", "2026-01-01", str(write_csv(lb.cwd / "w1.csv", [{"date": "2026-01-01", "n": 7}])))
    lb("alter", "w", "--widen-column", "n:int64")
    rows = [{"date": "2026-01-02", "n": 5_000_000_000}]
    lb("write", "w", "--date", "2026-01-02", str(write_csv(lb.cwd / "w2.csv", rows)))
    assert_reader_matches(lb, "w", reader)


@pytest.mark.parametrize("reader", READERS)
def test_time_travel_to_the_delta_version_of_each_logbook_commit(lb, reader):
    build_history(lb)
    entries = lb.mirrored("orders")
    assert {"replace_partitions", "publish_stage", "compact"} <= {e["operation"] for e in entries}
    for e in entries:
        assert_reader_matches(lb, "orders", reader, at=e)


@pytest.mark.parametrize("reader", READERS)
def test_date_filters_skip_files_by_their_stats_without_losing_rows(lb, reader):
    build_history(lb)
    for day in [*DAYS, DAYS[-1] + timedelta(days=1)]:
        assert_reader_matches(lb, "orders", reader, day=day)


def test_each_delta_commit_names_its_logbook_commit(lb):
    build_history(lb)
    changing = [e for e in lb.log("orders") if e["operation"] != "create_table"]
    assert all(e.get("delta_version") is not None for e in changing), changing
    versions = [e["delta_version"] for e in lb.mirrored("orders")]
    assert versions == sorted(set(versions)), f"Delta versions not increasing: {versions}"
    for e in changing:
        acts = lb.delta_actions("orders", e["delta_version"])
        assert lb.txn_version("orders", e["delta_version"]) == e["version"]
        assert any("commitInfo" in a for a in acts), acts
        adds, removes = [a["add"] for a in acts if "add" in a], [a["remove"] for a in acts if "remove" in a]
        assert all(f["path"][0] != "/" and "://" not in f["path"] for f in adds + removes), acts
        if e["operation"] == "compact":
            assert adds and removes and all(f["dataChange"] is False for f in adds + removes), acts
            continue
        stats = [json.loads(f["stats"]) for f in adds]
        assert all(f["dataChange"] is True for f in adds), adds
        assert sum(s["numRecords"] for s in stats) == e["rows_added"], stats
        assert all(s["minValues"]["date"] == s["maxValues"]["date"] for s in stats), stats
        assert sorted({s["minValues"]["date"] for s in stats}) == sorted(e["dates"]), (stats, e)
    protocol = DeltaTable(str(lb.table_path("orders"))).protocol()
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 2), protocol


@pytest.mark.parametrize("reader", READERS)
def test_a_mirrored_dimension_reads_with_its_validity_intervals(lb, reader):
    lb("create", "customers", "--schema", "customer:string,region:string", "--scd2", "--key", "customer",
       "--mirror", "delta")
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


def test_the_next_commit_mirrors_a_commit_whose_mirror_write_was_lost(lb):
    create_orders(lb, "--mirror", "delta")
    replace(lb, DAYS[0], 1, 10)
    replace(lb, DAYS[1], 1, 12)
    lost = lb.mirrored("orders")[-1]
    # The process died after the logbook commit, before the Delta commit.
    lb.commit_file("orders", lost["delta_version"]).unlink()
    status = lb.mirror_status("orders")
    fields = ("enabled", "behind", "logbook_version", "mirrored_version", "mirror_version")
    want = (True, 1, lost["version"], lost["version"] - 1, lost["delta_version"] - 1)
    assert tuple(status[f] for f in fields) == want, status
    # Meanwhile readers see the commit before: never a state logbook never had.
    assert_reader_matches(lb, "orders", "deltalake", version=lost["version"] - 1)
    replace(lb, DAYS[1], 2, 7)
    assert_caught_up(lb, "orders")
    last_two = lb.log("orders")[-2:]
    assert [e["delta_version"] for e in last_two] == [lost["delta_version"], lost["delta_version"] + 1]
    for e in last_two:
        assert lb.txn_version("orders", e["delta_version"]) == e["version"]
        assert_reader_matches(lb, "orders", "deltalake", at=e)
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader)


def test_mirror_catches_up_each_missed_commit(lb):
    create_orders(lb, "--mirror", "delta")
    for day in DAYS[:4]:
        replace(lb, day, 1, 5 + day.day)
    lost = lb.mirrored("orders")[-2:]
    for e in lost:
        lb.commit_file("orders", e["delta_version"]).unlink()
    status = lb.mirror_status("orders")
    assert (status["behind"], status["mirrored_version"]) == (2, lost[0]["version"] - 1), status
    lb("mirror", "orders")
    assert_caught_up(lb, "orders")
    for e in lost:  # one Delta commit per missed logbook commit
        assert lb.txn_version("orders", e["delta_version"]) == e["version"]
        assert_reader_matches(lb, "orders", "deltalake", at=e)
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader)
    before = lb.commit_files("orders")
    lb("mirror", "orders")
    assert lb.commit_files("orders") == before, "a caught-up mirror wrote another Delta commit"


def test_a_checkpoint_every_100_mirror_commits(lb):
    create_orders(lb, "--mirror", "delta")
    for i in range(105):
        replace(lb, date(2026, 1, 1) + timedelta(days=i), 1, 1 + i % 3)
    entries = lb.mirrored("orders")
    assert entries[-1]["delta_version"] > 100, entries[-1]
    log_dir = lb.delta_log("orders")
    assert (log_dir / f"{100:020}.checkpoint.parquet").is_file(), sorted(p.name for p in log_dir.iterdir())
    assert json.loads((log_dir / "_last_checkpoint").read_text())["version"] == 100
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader)
    early = [e for e in entries if e["delta_version"] < 100]
    for e in (early[len(early) // 2], early[-1]):
        assert_reader_matches(lb, "orders", "deltalake", at=e)
    # The checkpoint holds the whole state: readers need no commit before it.
    for d in range(100):
        lb.commit_file("orders", d).unlink()
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader, note="without the commits before the checkpoint")


def test_status_without_a_mirror_then_turning_it_on_and_off(lb):
    create_orders(lb)
    replace(lb, DAYS[0], 1, 8)
    replace(lb, DAYS[1], 1, 5)
    assert lb.mirror_statuses("orders") == []  # no mirror on, none left behind
    assert not lb.delta_log("orders").exists()
    assert lb.mirrored("orders") == []
    lb("alter", "orders", "--mirror", "delta")  # mirrors the current snapshot
    assert_caught_up(lb, "orders")
    assert [e["delta_version"] for e in lb.log("orders")[:2]] == [None, None]  # never mirrored one by one
    for reader in READERS:
        assert_reader_matches(lb, "orders", reader, note="after turning the mirror on")
    replace(lb, DAYS[2], 1, 6)
    assert_caught_up(lb, "orders")
    assert_reader_matches(lb, "orders", "deltalake", note="after a commit with the mirror on")
    lb("alter", "orders", "--mirror", "none")
    status = lb.mirror_status("orders")  # the log left behind
    assert (status["table"], status["enabled"]) == ("orders", False), status
    before = lb.commit_files("orders")
    replace(lb, DAYS[3], 1, 4)
    assert lb.commit_files("orders") == before, "a commit after `--mirror none` wrote a Delta commit"
    assert lb.log("orders")[-1]["delta_version"] is None
