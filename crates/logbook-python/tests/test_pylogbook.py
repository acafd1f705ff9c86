"""pylogbook as a pipeline job and a notebook use it: writes by logical
date, runs with lineage, reads by pyarrow, polars and DuckDB, status and
errors."""

import datetime as dt

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest
from pathlib import Path

import pylogbook as lb
from conftest import ORDERS, REVENUE_SQL, day, orders_on


def rows(table, d=None):
    t = table.to_arrow(dates=None if d is None else [d])
    return sorted(zip(*[t.column(c).to_pylist() for c in t.column_names]))


def test_replace_is_atomic_idempotent_and_keeps_other_dates(wh):
    orders = wh.table("orders")
    first = orders.replace_partition("2026-03-15", orders_on("2026-03-15", ("a",), (1.0,)), run_id="fix-1")
    assert not first.already_committed
    again = orders.replace_partition("2026-03-15", orders_on("2026-03-15", ("a",), (1.0,)), run_id="fix-1")
    assert again.already_committed and again.version == first.version
    assert [p["date"] for p in orders.partitions()] == ["2026-03-14", "2026-03-15", "2026-03-16"]
    assert orders.to_arrow(dates=["2026-03-15"]).num_rows == 1
    assert orders.to_arrow(dates=["2026-03-14"]).num_rows == 3
    # Time travel: the version before the fix still has three rows that day.
    assert orders.to_arrow(version=first.version - 1, dates=[day("2026-03-15")]).num_rows == 3


def test_every_dataframe_kind_goes_in_streamed(wh):
    orders = wh.table("orders")
    data = orders_on("2026-03-17")
    orders.replace_partition("2026-03-17", pa.RecordBatchReader.from_batches(ORDERS, data.to_batches()))
    orders.replace_partition("2026-03-18", pl.from_arrow(orders_on("2026-03-18")))
    orders.replace_partition("2026-03-19", orders_on("2026-03-19").to_pandas())
    rel = duckdb.sql(
        "SELECT DATE '2026-03-20' AS date, 1::BIGINT AS order_id, 'c-17' AS customer, 2.5::DOUBLE AS amount"
    )
    orders.replace_partition("2026-03-20", rel)
    got = {p["date"]: p["rows"] for p in orders.partitions()}
    assert got["2026-03-17"] == 3 and got["2026-03-18"] == 3 and got["2026-03-19"] == 3 and got["2026-03-20"] == 1


def test_bad_input_is_refused_naming_the_table_and_date_and_commits_nothing(wh):
    orders = wh.table("orders")
    before = orders.latest_version()
    with pytest.raises(lb.InvalidInputError, match=r"orders.*2026-03-17"):
        orders.replace_partition("2026-03-17", orders_on("2026-03-15"))
    with pytest.raises(lb.InvalidInputError, match="amount"):
        orders.replace_partition("2026-03-17", pa.table({"date": [day("2026-03-17")], "order_id": [1], "customer": ["x"]}))
    with pytest.raises(lb.InvalidInputError, match="not a date"):
        orders.replace_partition("15/03/2026", orders_on("2026-03-15"))
    with pytest.raises(lb.InvalidInputError, match="datetime"):
        orders.replace_partition(dt.datetime(2026, 3, 17, 12), orders_on("2026-03-17"))
    with pytest.raises(lb.NotFoundError, match="nope"):
        wh.table("nope")
    assert orders.latest_version() == before
    assert orders.to_pyarrow_dataset().count_rows() == 9, "no file of a refused write is live"


def test_a_run_reads_dimensions_as_of_its_date_and_records_lineage(wh):
    with wh.run("revenue", "2026-03-15", code_version="v1") as run:
        run.write(run.sql(REVENUE_SQL))
    assert not run.info.already_committed
    revenue = wh.table("revenue")
    assert rows(revenue) == [(day("2026-03-15"), "Berlin", 11.5), (day("2026-03-15"), "Hamburg", 5.0)]
    part = revenue.partitions()[0]
    assert part["dimensions"] == "as-of" and part["code_version"] == "v1"
    assert part["run_id"] == run.info.run_id
    assert {i["table"] for i in part["inputs"]} == {"orders", "customers"}
    # The same run on the same data commits nothing.
    with wh.run("revenue", "2026-03-15", code_version="v1") as again:
        again.write(again.sql(REVENUE_SQL))
    assert again.info.already_committed and again.info.run_id == run.info.run_id
    # Restated: today's dimensions put c-17 in Munich.
    with wh.run("revenue", "2026-03-15", dimensions="current", code_version="v1") as restated:
        restated.write(restated.sql(REVENUE_SQL))
    assert ("Munich" in [r[1] for r in rows(revenue)]) and not restated.info.already_committed


def test_an_exception_inside_a_run_aborts_it(wh):
    revenue = wh.table("revenue")
    before = revenue.latest_version()
    with pytest.raises(RuntimeError):
        with wh.run("revenue", "2026-03-15") as run:
            run.write(run.sql(REVENUE_SQL))
            raise RuntimeError("the job failed")
    assert revenue.latest_version() == before
    assert revenue.partitions() == []


def test_the_wall_clock_and_random_are_refused_inside_a_run(wh):
    with pytest.raises(lb.SqlError, match="logical_date"):
        with wh.run("revenue", "2026-03-15") as run:
            run.sql("SELECT now()")
    with pytest.raises(lb.SqlError, match="replayed"):
        with wh.run("revenue", "2026-03-15") as run:
            pa.table(run.sql("SELECT random() AS r"))


def test_results_stream_into_pyarrow_polars_and_duckdb(wh):
    q = "SELECT customer, sum(amount) AS total FROM orders GROUP BY customer ORDER BY customer"
    t = pa.table(wh.sql(q))
    assert t.column("customer").to_pylist() == ["c-04", "c-17"]
    assert pl.DataFrame(wh.sql(q))["total"].to_list() == [15.0, 34.5]
    reader = wh.sql(q)
    assert duckdb.sql("SELECT count(*) FROM reader").fetchall()[0][0] == 2
    # As of a date and pinned to a version.
    asof = pa.table(wh.sql("SELECT region FROM customers WHERE customer = 'c-17'", logical_date="2026-03-21"))
    assert asof.column("region").to_pylist() == ["Munich"]
    pinned = pa.table(wh.sql("SELECT count(*) AS n FROM orders", versions={"orders": 1}))
    assert pinned.column("n").to_pylist() == [3]


def test_the_live_files_as_a_dataset_for_other_engines(wh):
    orders = wh.table("orders")
    orders.replace_partition("2026-03-15", orders_on("2026-03-15", ("a",), (1.0,)))
    dataset = orders.to_pyarrow_dataset()
    assert dataset.count_rows() == 7, "only the live files, not the superseded ones"
    assert duckdb.sql("SELECT sum(amount) FROM dataset").fetchall()[0][0] == pytest.approx(2 * 16.5 + 1.0)
    old = orders.to_pyarrow_dataset(version=3)
    assert old.count_rows() == 9


def test_status_plan_and_log_are_the_clis_json(wh):
    for d in ("2026-03-14", "2026-03-15", "2026-03-16"):
        with wh.run("revenue", d, code_version="v1") as run:
            run.write(run.sql(REVENUE_SQL))
    orders = wh.table("orders")
    orders.replace_partition("2026-03-15", orders_on("2026-03-15", ("c-04",), (7.0,)))
    status = wh.status("revenue", end="2026-03-16")
    states = {s["date"]: s["state"] for s in status}
    assert states == {"2026-03-14": "complete", "2026-03-15": "stale", "2026-03-16": "complete"}
    reason = [s for s in status if s["date"] == "2026-03-15"][0]["reasons"][0]
    assert reason["reason"] == "input" and reason["table"] == "orders" and reason["change"] == "replaced"
    plan = wh.plan("revenue", end="2026-03-16")
    assert [s["date"] for s in plan["steps"]] == ["2026-03-15"]
    log = wh.log("orders")
    assert log[0]["operation"] == "create_table" and log[-1]["operation"] == "replace_partitions"


def test_a_backfill_expectation_refuses_a_date_that_moved(wh):
    orders = wh.table("orders")
    current = orders.partitions()[1]["version"]
    orders.replace_partition("2026-03-15", orders_on("2026-03-15"), expect_version=current)
    with pytest.raises(lb.ConflictError, match="2026-03-15"):
        orders.replace_partition("2026-03-15", orders_on("2026-03-15"), expect_version=current)
    orders.replace_partition("2026-03-21", orders_on("2026-03-21"), expect_version="missing")


def test_dimension_changes_deletes_and_snapshots(wh):
    cust = wh.table("customers")
    cust.apply_deletes("2026-03-25", pa.table({"customer": ["c-04"]}))
    cust.apply_snapshot("2026-04-01", pa.table({"customer": ["c-17", "c-99"], "region": ["Munich", "Bonn"]}))
    at = lambda d: sorted(  # noqa: E731
        pa.table(wh.sql(f"SELECT customer, region FROM asof('customers', DATE '{d}')")).to_pylist(),
        key=lambda r: r["customer"],
    )
    assert at("2026-03-01") == [{"customer": "c-04", "region": "Hamburg"}, {"customer": "c-17", "region": "Berlin"}]
    assert at("2026-03-26") == [{"customer": "c-17", "region": "Munich"}]
    assert at("2026-04-02") == [{"customer": "c-17", "region": "Munich"}, {"customer": "c-99", "region": "Bonn"}]


def test_a_job_launched_by_backfill_obeys_its_stage_and_expectation(wh, monkeypatch):
    orders = wh.table("orders")
    seen = orders.partitions()[1]["version"]
    monkeypatch.setenv("LOGBOOK_EXPECT_VERSION", f"orders@2026-03-15={seen}")
    orders.replace_partition("2026-03-15", orders_on("2026-03-15"))
    with pytest.raises(lb.ConflictError, match="2026-03-15"):
        orders.replace_partition("2026-03-15", orders_on("2026-03-15"))
    # Another date is not held to it (a conflict would raise).
    orders.replace_partition("2026-03-16", orders_on("2026-03-16"))
    monkeypatch.delenv("LOGBOOK_EXPECT_VERSION")
    monkeypatch.setenv("LOGBOOK_STAGE", "audit")
    before = orders.latest_version()
    orders.replace_partition("2026-03-14", orders_on("2026-03-14", ("z",), (9.0,)))
    with wh.run("revenue", "2026-03-15") as run:
        run.write(run.sql(REVENUE_SQL))
    assert orders.latest_version() == before and wh.table("revenue").partitions() == []


def test_runs_take_their_turn_in_the_run_budget(wh, monkeypatch):
    root = Path(wh.uri.removeprefix("file://"))
    live = root / "_logbook" / "production"
    # A production run announces itself while it runs (backfill runners on
    # every machine hold back), and the announcement goes when it ends.
    with wh.run("revenue", "2026-03-15") as run:
        assert len(list(live.glob("*.json"))) == 1
        run.write(run.sql(REVENUE_SQL))
    assert list(live.glob("*.json")) == []
    assert [p["class"] for p in wh.table("revenue").partitions()] == ["production"]
    # Launched by `logbook backfill`: a backfill, committing only while its
    # runner's slot is its own.
    monkeypatch.setenv("LOGBOOK_RUN_CLASS", "backfill")
    orders = wh.table("orders")
    orders.replace_partition("2026-03-15", orders_on("2026-03-15"), run_id="bf-15")
    assert [p["class"] for p in orders.partitions() if p["date"] == "2026-03-15"] == ["backfill"]
    monkeypatch.setenv("LOGBOOK_SLOT", "0/0")
    taken = root / "_logbook" / "slots" / "0000"
    taken.mkdir(parents=True)
    (taken / ("%020d.json" % 1)).write_text("{}")
    before = orders.latest_version()
    with pytest.raises(lb.TransientError, match="without committing"):
        orders.replace_partition("2026-03-16", orders_on("2026-03-16"), run_id="bf-16")
    assert orders.latest_version() == before


def test_a_backfill_write_waits_for_a_heavy_step_slot(wh):
    import json
    import threading
    import time

    root = Path(wh.uri.removeprefix("file://"))
    slot = root / "_logbook" / "heavy" / "0000"
    slot.mkdir(parents=True)

    def held(gen, released):
        record = {"holder": "h", "what": "a compaction elsewhere", "beat": gen,
                  "lease_ms": 600000, "started_ms": 0, "released": released}
        (slot / ("%020d.json" % gen)).write_text(json.dumps(record))

    import os
    import subprocess

    cli = os.environ["LOGBOOK_BIN"]
    subprocess.run([cli, "--warehouse", wh.uri, "warehouse", "set", "max-heavy-steps", "1"],
                   check=True, capture_output=True)
    held(0, False)
    orders = wh.table("orders")
    # Production never waits for a heavy-step slot.
    orders.replace_partition("2026-03-15", orders_on("2026-03-15"), run_id="p-15")
    # A backfill's write (a table's, or a run's) waits until one is free.
    done = []

    def backfill():
        orders.replace_partition("2026-03-20", orders_on("2026-03-20"), run_id="bf-20",
                                 run_class="backfill")
        with wh.run("revenue", "2026-03-20", run_class="backfill") as run:
            run.write(run.sql(REVENUE_SQL))
        done.append(True)

    t = threading.Thread(target=backfill)
    t.start()
    time.sleep(1.5)
    assert t.is_alive() and "2026-03-20" not in [p["date"] for p in orders.partitions()]
    held(1, True)
    t.join(timeout=30)
    assert done == [True]
    classes = {p["date"]: p["class"] for p in orders.partitions()}
    assert (classes["2026-03-15"], classes["2026-03-20"]) == ("production", "backfill")
    assert [p["class"] for p in wh.table("revenue").partitions()] == ["backfill"]
    latest = sorted(slot.glob("*.json"))[-1]
    assert json.loads(latest.read_text())["released"], "a heavy step was left held"
    # Two runs of one job writing at once share the job's slot: no wait
    # for itself.
    two = []

    def both():
        with wh.run("revenue", "2026-03-14", run_class="backfill") as a:
            a.write(a.sql(REVENUE_SQL))
            with wh.run("revenue", "2026-03-15", run_class="backfill") as b:
                b.write(b.sql(REVENUE_SQL))
        two.append(True)

    t = threading.Thread(target=both, daemon=True)
    t.start()
    t.join(timeout=30)
    assert two == [True], "a job's second run waited for its first's heavy-step slot"


def test_a_failed_write_aborts_the_run(wh):
    with pytest.raises(lb.LogbookError, match="aborted"):
        with wh.run("revenue", "2026-03-15") as run:
            with pytest.raises(lb.InvalidInputError, match="2026-03-14"):
                run.write(pa.table({"date": [day("2026-03-14")], "region": ["x"], "revenue": [1.0]}))
            # Committing what was written before the failure is refused.
    assert wh.table("revenue").partitions() == []


def test_a_dataset_refuses_a_renamed_column_rather_than_read_it_as_nulls(wh, tmp_path):
    # Renaming is a CLI (and Rust) operation; scripts/python-tests.sh builds it.
    import os
    import subprocess

    cli = os.environ["LOGBOOK_BIN"]
    subprocess.run(
        [cli, "--warehouse", wh.uri, "alter", "orders", "--rename-column", "amount:total"],
        check=True,
        capture_output=True,
    )
    orders = wh.table("orders")
    with pytest.raises(lb.UnsupportedError, match="column total is stored as amount"):
        orders.to_pyarrow_dataset()
    assert orders.to_arrow().column("total").null_count == 0


def test_datafusion_queries_a_table_through_its_ffi_provider(wh):
    import datafusion

    ctx = datafusion.SessionContext()
    orders = wh.table("orders")
    ctx.register_table("orders", orders)
    q = "SELECT date, count(*) AS n, sum(amount) AS total FROM orders GROUP BY date ORDER BY date"
    assert ctx.sql(q).to_arrow_table().to_pylist() == pa.table(wh.sql(q)).to_pylist()
    one_day = "SELECT count(*) AS n FROM orders WHERE date = DATE '2026-03-15'"
    assert ctx.sql(one_day).to_arrow_table().column("n").to_pylist() == [3]
    # Each scan reads the latest snapshot.
    orders.replace_partition("2026-03-15", orders_on("2026-03-15", ("a",), (1.0,)))
    assert ctx.sql(one_day).to_arrow_table().column("n").to_pylist() == [1]


def test_datafusion_queries_a_table_on_s3(monkeypatch):
    # Planning reads the snapshot through S3's client, which needs pylogbook's
    # runtime: DataFusion's FFI calls the provider from its own thread.
    import os
    import uuid

    import datafusion

    endpoint = os.environ.get("LOGBOOK_TEST_S3_ENDPOINT")
    if not endpoint:
        pytest.skip("needs LOGBOOK_TEST_S3_ENDPOINT; scripts/python-tests.sh starts moto's server")
    for key, value in {
        "AWS_ENDPOINT": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
    }.items():
        monkeypatch.setenv(key, value)
    wh = lb.Warehouse(f"s3://logbook-test/pylogbook-{uuid.uuid4()}")
    orders = wh.create_table("orders", schema=ORDERS, partition_by="date")
    orders.replace_partition("2026-03-15", orders_on("2026-03-15"))
    ctx = datafusion.SessionContext()
    ctx.register_table("orders", orders)
    got = ctx.sql("SELECT count(*) AS n, sum(amount) AS total FROM orders").to_arrow_table()
    assert got.to_pylist() == [{"n": 3, "total": 16.5}]


def test_a_stage_across_tables_is_read_inside_it_and_published_as_one(wh, monkeypatch):
    # A job inside stage "fix" (as `logbook backfill --stage fix` runs it)
    # re-runs orders, then revenue reads orders as the stage holds them.
    monkeypatch.setenv("LOGBOOK_STAGE", "fix")
    wh.table("orders").replace_partition("2026-03-15", orders_on("2026-03-15", ("c-04",), (100.0,)))
    with wh.run("revenue", "2026-03-15") as run:
        run.write(run.sql(REVENUE_SQL))
    monkeypatch.delenv("LOGBOOK_STAGE")
    assert wh.table("revenue").partitions() == []
    published = wh.publish_stage("fix")
    assert published["seq"] == 0
    assert sorted(published["tables"]) == ["orders", "revenue"]
    rows = pa.table(
        wh.sql(
            "SELECT r.region, r.revenue, count(*) AS n FROM revenue r JOIN orders o USING (date) "
            "WHERE r.date = DATE '2026-03-15' GROUP BY r.region, r.revenue"
        )
    ).to_pylist()
    assert rows == [{"region": "Hamburg", "revenue": 100.0, "n": 1}]
    with pytest.raises(lb.LogbookError, match="fix"):
        wh.publish_stage("fix")


def test_a_table_keeps_both_mirrors(wh, tmp_path):
    both = wh.create_table("mirrored", schema=ORDERS, partition_by="date", mirror="delta,iceberg")
    both.replace_partition("2026-03-15", orders_on("2026-03-15"), run_id="m-1")
    root = tmp_path / "wh" / "mirrored"
    assert (root / "_delta_log" / f"{1:020}.json").exists()
    # Version 1 is Iceberg metadata file v2, and the hint names it (no newline).
    assert (root / "metadata" / "version-hint.text").read_text() == "2"
    assert (root / "metadata" / "v2.metadata.json").exists()
    # The log says which Delta version and Iceberg snapshot hold each
    # commit, as `logbook log --json` does.
    last = wh.log("mirrored")[-1]
    assert (last["version"], last["delta_version"], last["iceberg_snapshot_id"]) == (1, 1, 2)
    with pytest.raises(lb.InvalidInputError, match="mirrored2.*hudi"):
        wh.create_table("mirrored2", schema=ORDERS, partition_by="date", mirror="iceberg,hudi")
    assert not (tmp_path / "wh" / "mirrored2").exists()
