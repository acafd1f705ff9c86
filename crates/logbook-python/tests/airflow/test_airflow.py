"""Airflow 3 as the orchestrator: the DAGs of ``dags/logbook_daily.py`` run
with ``dag.test()`` against Airflow's SQLite metadata database (made by
``scripts/airflow-tests.sh``); Airflow's own backfills are created with its
CLI and their runs driven by ``run_dag_run.py``, several processes at once.
Nothing else is started."""

import datetime as dt
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pendulum
import pyarrow as pa
import pytest

import pylogbook as lb
from pylogbook.airflow import StaleRuns, stale_runs

HERE = Path(__file__).parent
DAG_FILE = HERE / "dags" / "logbook_daily.py"
TEN_DAYS = [dt.date(2026, 3, d) for d in range(1, 11)]

# Only ever against the throwaway database scripts/airflow-tests.sh makes
# (the tests mark backfills completed by hand), never a real deployment's.
if not (Path(os.environ.get("AIRFLOW_HOME", "/nonexistent")) / ".logbook-airflow-tests").exists():
    pytest.exit("run through scripts/airflow-tests.sh: it makes Airflow's metadata database", returncode=2)


def _load_dags():
    spec = importlib.util.spec_from_file_location("logbook_daily", DAG_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DAGS = _load_dags()


@pytest.fixture
def wh(tmp_path, monkeypatch):
    """orders (data), revenue (scheduled from 03-01) and customers (c-1
    Berlin, c-2 Hamburg): the warehouse the DAGs' variable names."""
    w = lb.Warehouse(tmp_path / "wh")
    w.create_table("orders", schema=DAGS.ORDERS, partition_by="date")
    revenue = pa.schema([("date", pa.date32()), ("region", pa.string()), ("revenue", pa.float64())])
    w.create_table("revenue", schema=revenue, partition_by="date", schedule_start="2026-03-01")
    customers = w.create_table(
        "customers", schema=pa.schema([("customer", pa.string()), ("region", pa.string())]), scd2_keys=["customer"]
    )
    customers.apply_changes("2026-01-01", pa.table({"customer": ["c-1", "c-2"], "region": ["Berlin", "Hamburg"]}))
    monkeypatch.setenv("AIRFLOW_VAR_LOGBOOK_WAREHOUSE", str(w.uri))
    return w


def run_dag(dag, day: dt.date, expect: str = "success"):
    """One DAG run for ``day`` (midnight in the DAG's timezone)."""
    moment = pendulum.datetime(day.year, day.month, day.day, tz=dag.timezone)
    dr = dag.test(logical_date=moment)
    assert str(dr.state) == expect, f"{dag.dag_id} {day}: {dr.state}"
    return dr


def pushed(dr, task_id: str):
    """What the task pushed to XCom (``return_value``)."""
    from airflow.models.xcom import XComModel

    from airflow import settings

    session = settings.Session()
    query = XComModel.get_many(run_id=dr.run_id, dag_ids=dr.dag_id, task_ids=task_id, key="return_value")
    (row,) = session.scalars(query).all()
    return XComModel.deserialize_value(row)


def commits(w, table: str) -> int:
    return w.table(table).latest_version()


def rows(w, table: str):
    return pa.table(w.sql(f"SELECT * FROM {table} ORDER BY 1, 2, 3")).to_pylist()


def backfill(dag_id: str, first: dt.date, last: dt.date, parallel: int, env=None):
    """Airflow's own backfill of ``first``..``last`` (``airflow backfill
    create``), its runs driven ``parallel`` at a time, each in its own
    process. Returns the runs' logical dates."""
    runs = StaleRuns(dag_id=dag_id, table="-", dates=tuple(_days(first, last)))
    return drive_backfill(runs.create_backfill(max_active_runs=parallel), dag_id, parallel, env)


def drive_backfill(command, dag_id: str, parallel: int, env=None):
    from airflow import settings
    from airflow.models.dagrun import DagRun
    from airflow.utils.state import DagRunState
    from sqlalchemy import select

    assert command, "no backfill was created"
    session = settings.Session()
    queued = session.scalars(
        select(DagRun).where(
            DagRun.dag_id == dag_id, DagRun.run_type == "backfill", DagRun.state == DagRunState.QUEUED
        )
    ).all()
    run_ids = [r.run_id for r in queued]
    dates = sorted(r.logical_date.date() for r in queued)
    session.close()
    # Several at a time, as the scheduler would run them (its
    # max_active_runs), each run in a process of its own.
    for start in range(0, len(run_ids), parallel):
        procs = [
            subprocess.Popen(
                [sys.executable, str(HERE / "run_dag_run.py"), str(DAG_FILE), dag_id, rid],
                env={**os.environ, **(env or {})},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for rid in run_ids[start : start + parallel]
        ]
        for p in procs:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, out[-3000:]
    # What the scheduler does once a backfill's runs are done: a DAG with
    # a backfill still open takes no new one.
    from airflow.models.backfill import Backfill
    from sqlalchemy import update

    session = settings.Session()
    session.execute(update(Backfill).where(Backfill.dag_id == dag_id).values(completed_at=pendulum.now("UTC")))
    session.commit()
    session.close()
    return dates


def _days(first: dt.date, last: dt.date):
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def test_a_daily_dag_writes_ten_partitions_and_a_rerun_commits_nothing(wh):
    # (A DAG run's XComs go with it when dag.test() replaces the run.)
    first = {}
    for d in TEN_DAYS:
        dr = run_dag(DAGS.daily, d)
        first[d] = {task: pushed(dr, task) for task in ("orders", "revenue")}
    assert [p["date"] for p in wh.table("orders").partitions()] == [d.isoformat() for d in TEN_DAYS]
    assert {s["state"] for s in wh.status("revenue", end="2026-03-10")} == {"complete"}
    for d, infos in first.items():
        for task, info in infos.items():
            assert info["date"] == d.isoformat() and info["table"] == task
            assert info["already_committed"] is False and info["version"] >= 1
    # Partitions of production runs (dag.test makes manual runs).
    assert {p["class"] for p in wh.table("revenue").partitions()} == {"production"}
    before = {t: commits(wh, t) for t in ("orders", "revenue")}
    assert before == {"orders": 10, "revenue": 10}

    again = {d: run_dag(DAGS.daily, d) for d in TEN_DAYS}
    assert {t: commits(wh, t) for t in ("orders", "revenue")} == before
    for d, dr in again.items():
        for task in ("orders", "revenue"):
            info = pushed(dr, task)
            assert info["already_committed"] is True
            assert info["version"] == first[d][task]["version"]
    march_3 = [r for r in rows(wh, "revenue") if r["date"] == dt.date(2026, 3, 3)]
    assert march_3 == [
        {"date": dt.date(2026, 3, 3), "region": "Berlin", "revenue": 3.5},
        {"date": dt.date(2026, 3, 3), "region": "Hamburg", "revenue": 1.0},
    ]


def test_new_rows_from_the_callable_replace_the_date_even_rows_it_wrote_before(wh, monkeypatch):
    run_dag(DAGS.daily, TEN_DAYS[0])
    monkeypatch.setenv("AIRFLOW_VAR_ORDERS_SCALE", "2")
    dr = run_dag(DAGS.daily, TEN_DAYS[0])
    assert pushed(dr, "orders")["already_committed"] is False
    assert [r["amount"] for r in rows(wh, "orders")] == [2.0, 2.0, 1.0]
    # Back to the first rows: written once, replaced since, so written again.
    monkeypatch.delenv("AIRFLOW_VAR_ORDERS_SCALE")
    dr = run_dag(DAGS.daily, TEN_DAYS[0])
    assert pushed(dr, "orders")["already_committed"] is False
    assert [r["amount"] for r in rows(wh, "orders")] == [1.0, 1.0, 0.5]
    assert commits(wh, "orders") == 3


def test_a_backdated_dimension_change_makes_exactly_the_covered_dates_stale_and_only_those_rerun(wh):
    customers = wh.table("customers")
    customers.apply_changes("2026-03-03", pa.table({"customer": ["c-2"], "region": ["Cologne"]}))
    customers.apply_changes("2026-03-09", pa.table({"customer": ["c-1"], "region": ["Hamburg"]}))
    for d in TEN_DAYS:
        run_dag(DAGS.daily, d)
    # Found out only now: c-1 moved to Munich on 03-06 (before Hamburg on
    # 03-09), and c-2 was in Bremen on 03-02 (before Cologne on 03-03).
    customers.apply_changes("2026-03-06", pa.table({"customer": ["c-1"], "region": ["Munich"]}))
    customers.apply_changes("2026-03-02", pa.table({"customer": ["c-2"], "region": ["Bremen"]}))

    runs = stale_runs(wh, "revenue", "logbook_daily", end="2026-03-10", timezone=DAGS.daily.timezone)
    stale = (dt.date(2026, 3, 2), dt.date(2026, 3, 6), dt.date(2026, 3, 7), dt.date(2026, 3, 8))
    assert runs.dates == stale
    assert runs.ranges() == [(stale[0], stale[0]), (stale[1], stale[3])]
    assert all(runs.reasons[d.isoformat()] for d in runs.dates), runs.reasons
    command = runs.backfill_command()
    assert command[:5] == ["airflow", "backfill", "create", "--dag-id", "logbook_daily"]
    assert command[5:9] == [
        "--from-date", "2026-03-02T00:00:00+00:00", "--to-date", "2026-03-08T23:59:59.999999+00:00"
    ]
    # What an operator reads: the dates, why, and the command.
    shown = subprocess.run(
        [sys.executable, "-m", "pylogbook.airflow", str(wh.uri), "revenue", "logbook_daily", "--end", "2026-03-10"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "4 date(s)" in shown and "2026-03-07" in shown and "airflow backfill create" in shown

    before = {t: commits(wh, t) for t in ("orders", "revenue")}
    # One Airflow backfill (one per DAG at a time) from 03-02 to 03-08; its
    # runs of the dates in between skip their tasks.
    assert json.loads(command[command.index("--dag-run-conf") + 1]) == {
        "logbook_dates": ["2026-03-02", "2026-03-06", "2026-03-07", "2026-03-08"]
    }
    redone = drive_backfill(runs.create_backfill(), "logbook_daily", parallel=4)
    assert redone == _days(stale[0], stale[-1])
    assert commits(wh, "revenue") == before["revenue"] + 4
    assert commits(wh, "orders") == before["orders"]
    assert {s["state"] for s in wh.status("revenue", end="2026-03-10")} == {"complete"}
    regions = {(r["date"].day, r["region"]) for r in rows(wh, "revenue")}
    assert (7, "Munich") in regions and (7, "Berlin") not in regions and (2, "Bremen") in regions
    assert (5, "Berlin") in regions and (9, "Hamburg") in regions and (9, "Munich") not in regions
    by_date = {p["date"]: p["class"] for p in wh.table("revenue").partitions()}
    assert by_date["2026-03-07"] == "backfill" and by_date["2026-03-05"] == "production"
    assert stale_runs(wh, "revenue", "logbook_daily", end="2026-03-10").backfill_command() is None


def test_the_same_rows_are_written_again_over_a_damaged_partition(wh):
    run_dag(DAGS.daily, TEN_DAYS[0])
    (part,) = wh.table("orders").partitions()
    path = Path(wh.table("orders").uri.removeprefix("file://")) / wh.table("orders")._t.files(None)[0]
    path.unlink()
    assert wh.status("orders", start="2026-03-01", end="2026-03-01")[0]["state"] == "corrupt"
    dr = run_dag(DAGS.daily, TEN_DAYS[0])
    info = pushed(dr, "orders")
    assert info["already_committed"] is False and info["version"] > part["version"]
    assert wh.status("orders", start="2026-03-01", end="2026-03-01")[0]["state"] == "complete"


def test_airflows_backfill_of_five_dates_in_parallel_gives_the_table_sequential_runs_give(wh, tmp_path):
    for d in TEN_DAYS[:5]:
        run_dag(DAGS.daily, d)
    sequential = {t: rows(wh, t) for t in ("orders", "revenue")}

    parallel = lb.Warehouse(tmp_path / "parallel")
    for name in ("orders", "revenue", "customers"):
        src = wh.table(name)
        if name == "customers":
            t = parallel.create_table(name, schema=pa.schema([("customer", pa.string()), ("region", pa.string())]), scd2_keys=["customer"])
            t.apply_changes("2026-01-01", pa.table({"customer": ["c-1", "c-2"], "region": ["Berlin", "Hamburg"]}))
        else:
            parallel.create_table(name, schema=src.schema(), partition_by="date", schedule_start="2026-03-01")
    dates = backfill(
        "logbook_daily", TEN_DAYS[0], TEN_DAYS[4], parallel=5, env={"AIRFLOW_VAR_LOGBOOK_WAREHOUSE": str(parallel.uri)}
    )
    assert dates == TEN_DAYS[:5]
    assert {t: rows(parallel, t) for t in ("orders", "revenue")} == sequential
    assert {s["state"] for s in parallel.status("revenue", end="2026-03-05")} == {"complete"}
    assert {p["class"] for p in parallel.table("revenue").partitions()} == {"backfill"}
    assert commits(parallel, "revenue") == 5


def test_now_in_a_runs_sql_fails_the_task_with_the_clock_error(wh, capfd):
    run_dag(DAGS.clock, TEN_DAYS[0], expect="failed")
    out = capfd.readouterr()
    assert "now() reads the wall clock" in out.out + out.err
    assert commits(wh, "revenue") == 0


def test_a_run_without_a_logical_date_is_refused(wh, capfd):
    dr = DAGS.daily.test(logical_date=None)
    assert str(dr.state) == "failed"
    out = capfd.readouterr()
    assert "has no logical date" in out.out + out.err
    assert commits(wh, "orders") == 0


def test_the_date_is_the_logical_date_in_the_dags_timezone(wh):
    # Midnight of 03-05 in Tokyo is 15:00 UTC on 03-04.
    run_dag(DAGS.tokyo, dt.date(2026, 3, 5))
    assert [p["date"] for p in wh.table("orders").partitions()] == ["2026-03-05"]


def test_the_sensor_waits_for_a_complete_partition(wh, monkeypatch, capfd):
    run_dag(DAGS.wait, TEN_DAYS[0], expect="failed")  # missing: the sensor times out
    run_dag(DAGS.daily, TEN_DAYS[0])
    run_dag(DAGS.wait, TEN_DAYS[0])
    # Stale is not complete: a back-dated dimension change, then the
    # sensor on revenue waits (times out) until the date is redone.
    monkeypatch.setenv("AIRFLOW_VAR_WAIT_FOR", "revenue")
    run_dag(DAGS.wait, TEN_DAYS[0])
    wh.table("customers").apply_changes("2026-02-01", pa.table({"customer": ["c-1"], "region": ["Munich"]}))
    capfd.readouterr()
    run_dag(DAGS.wait, TEN_DAYS[0], expect="failed")
    assert "logbook revenue 2026-03-01: stale" in capfd.readouterr().out
    run_dag(DAGS.daily, TEN_DAYS[0])
    run_dag(DAGS.wait, TEN_DAYS[0])


def test_the_sensor_fails_at_once_on_a_date_the_table_does_not_schedule(wh, monkeypatch, capfd):
    monkeypatch.setenv("AIRFLOW_VAR_WAIT_FOR", "revenue")  # scheduled from 03-01
    monkeypatch.setenv("AIRFLOW_VAR_WAIT_DATE", "2026-02-27")
    run_dag(DAGS.wait, TEN_DAYS[0], expect="failed")
    assert "not a date the table schedules" in "".join(capfd.readouterr())


def test_a_job_launched_by_logbook_backfill_writes_into_its_stage(wh, monkeypatch):
    monkeypatch.setenv("LOGBOOK_STAGE", "fix-1")
    run_dag(DAGS.daily, TEN_DAYS[0])
    assert wh.table("orders").partitions() == []
    monkeypatch.delenv("LOGBOOK_STAGE")
    published = wh.publish_stage("fix-1")
    assert set(published["tables"]) == {"orders", "revenue"}
    assert [p["date"] for p in wh.table("orders").partitions()] == ["2026-03-01"]


def test_stale_runs_cover_their_days_in_the_dags_timezone_and_a_chain_runs_one_at_a_time():
    tokyo = pendulum.timezone("Asia/Tokyo")
    days = (dt.date(2026, 3, 2), dt.date(2026, 3, 3), dt.date(2026, 3, 7))
    runs = StaleRuns(dag_id="d", table="t", dates=days, chain=True, timezone=tokyo)
    assert runs.ranges() == [(days[0], days[1]), (days[2], days[2])]
    command = runs.backfill_command(max_active_runs=8)
    flags = dict(zip(command[3::2], command[4::2]))
    assert flags["--from-date"] == "2026-03-02T00:00:00+09:00"
    assert flags["--to-date"] == "2026-03-07T23:59:59.999999+09:00"
    assert flags["--max-active-runs"] == "1"
    unchained = StaleRuns(dag_id="d", table="t", dates=days)
    assert "--max-active-runs" not in unchained.backfill_command()
    assert str(StaleRuns(dag_id="d", table="t", dates=())) == "t: nothing to redo for DAG d"
    blocked = StaleRuns(dag_id="d", table="t", dates=(), chain=True, blocked_by=days[0])
    assert "2026-03-02 is running" in str(blocked)
