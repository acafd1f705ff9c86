"""Airflow 3: a daily DAG's tasks as logbook runs and writes of their logical date.

    from airflow.sdk import DAG, CronDataIntervalTimetable
    from pylogbook.airflow import LogbookRunOperator, LogbookWriteOperator

    with DAG("revenue", schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"), ...):
        orders = LogbookWriteOperator(task_id="orders", warehouse=WH, table="orders",
                                      python_callable=load_orders)   # returns Arrow data
        revenue = LogbookRunOperator(task_id="revenue", warehouse=WH, table="revenue",
                                     sql="SELECT ... WHERE o.date = logical_date() ...")
        orders >> revenue

**The date.** A task's partition is its DAG run's ``logical_date`` as a
date in the DAG's timezone, never the wall clock; a run without a logical
date (Airflow 3 gives asset-triggered runs none) is refused. Inside a run,
``now()`` is logbook's clock error. Mind the timetable: Airflow 3's
``schedule="@daily"`` is a ``CronTriggerTimetable``, whose run at 00:00 on D
has logical date D (so it would write D before D's data exists);
``CronDataIntervalTimetable("0 0 * * *", timezone=...)`` gives that run
the logical date D - 1, the day that just ended, as Airflow 2 did.

**Re-running.** `LogbookRunOperator`'s run id is derived from the query and
the data it read, so clearing a task whose inputs did not change commits
nothing. `LogbookWriteOperator` skips the commit when the date's current
contents came from a write of the same rows (same schema, rows, code
version); different rows always replace the partition, even rows written
once before and replaced since.

**Run classes.** A DAG run of type ``backfill`` (``airflow backfill
create``) is a logbook backfill: it waits for the warehouse's run budget
(production first, at most its backfill slots). Scheduled and manual runs
are production. ``run_class=`` on an operator, or
``LOGBOOK_RUN_CLASS`` from ``logbook backfill``, wins; ``LOGBOOK_STAGE``
and the expected version ``logbook backfill`` passes are obeyed as by
every pylogbook write.

**Only the dates a backfill names.** In a DAG run whose conf lists
``logbook_dates`` (the backfills `StaleRuns` makes), both operators skip a
date not listed.

**XCom.** Both operators return (and so push) ``{"table", "date",
"version", "run_id", "already_committed"}``.

**Staleness.** `stale_runs` turns ``Warehouse.plan`` into the DAG runs to
redo: the stale, missing or corrupt dates with their reasons, and the
``airflow backfill create`` covering them (or that backfill created). From
a shell: ``python -m pylogbook.airflow WAREHOUSE TABLE DAG_ID [--start D]
[--end D] [--timezone TZ] [--create]``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import shlex
import subprocess
import uuid
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import BaseOperator, BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from . import CommitInfo, InvalidInputError, Warehouse, _date, _from_backfill

__all__ = [
    "LogbookRunOperator",
    "LogbookWriteOperator",
    "LogbookPartitionSensor",
    "StaleRuns",
    "stale_runs",
    "logical_day",
]


def logical_day(context: Any) -> _dt.date:
    """The date a task instance owns: its DAG run's logical date in the
    DAG's timezone."""
    moment = context.get("logical_date")
    if moment is None:
        ti = context.get("ti")
        what = f"task {ti.task_id} of DAG {ti.dag_id} (run {ti.run_id})" if ti is not None else "this task"
        raise InvalidInputError(
            f"{what} has no logical date; logbook writes one date's partition: "
            "trigger the DAG run with a logical date"
        )
    return moment.astimezone(context["dag"].timezone).date()


#: The DAG run conf key naming the only dates a backfill redoes (see `StaleRuns`).
ONLY_DATES = "logbook_dates"


def _skip_unless_listed(context: Any, table: str, day: _dt.date) -> None:
    """A backfill made by `StaleRuns` spans its first to last date; its runs
    of dates it does not list skip their logbook tasks."""
    conf = getattr(context.get("dag_run"), "conf", None) or {}
    listed = conf.get(ONLY_DATES)
    if listed is not None and day.isoformat() not in listed:
        raise AirflowSkipException(f"table {table}: {day} is not among the dates this backfill redoes")


def _run_class(context: Any, explicit: Optional[str]) -> Optional[str]:
    """The logbook run class of this task: ``explicit``, else (unless
    ``logbook backfill`` handed one through the environment, which
    pylogbook reads) from the DAG run's type."""
    if explicit:
        return explicit
    if os.environ.get("LOGBOOK_RUN_CLASS"):
        return None
    run_type = getattr(context.get("dag_run"), "run_type", None)
    return "backfill" if str(getattr(run_type, "value", run_type)) == "backfill" else "production"


def _pushed(table: str, day: _dt.date, info: CommitInfo) -> Dict[str, Any]:
    return {
        "table": table,
        "date": day.isoformat(),
        "version": info.version,
        "run_id": info.run_id,
        "already_committed": info.already_committed,
    }


class _Target:
    """What both operators write to: a table of a warehouse, with the code
    version recorded and the run class (``None``: from the DAG run)."""

    def _target(self, warehouse: str, table: str, code_version: Optional[str], run_class: Optional[str]) -> None:
        self.warehouse = warehouse
        self.table = table
        self.code_version = code_version
        self.run_class = run_class


class LogbookRunOperator(_Target, BaseOperator):
    """Runs ``sql`` as the logbook run of ``table`` for the task's logical
    date: dimensions resolved as of the date (``dimensions="as-of"``) or
    current (``"current"``), lineage recorded, the partition replaced in
    one commit. ``sql`` may be a ``.sql`` file (Airflow templates it); use
    ``logical_date()`` in it rather than ``{{ ds }}``, so the lineage and
    run id see the date."""

    template_fields: Sequence[str] = ("warehouse", "table", "sql", "code_version")
    template_ext: Sequence[str] = (".sql",)
    template_fields_renderers = {"sql": "sql"}
    ui_color = "#e8f0e0"

    def __init__(
        self,
        *,
        warehouse: str,
        table: str,
        sql: str,
        dimensions: str = "as-of",
        code_version: Optional[str] = None,
        run_class: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._target(warehouse, table, code_version, run_class)
        self.sql = sql
        self.dimensions = dimensions

    def execute(self, context: Any) -> Dict[str, Any]:
        day = logical_day(context)
        _skip_unless_listed(context, self.table, day)
        wh = Warehouse(self.warehouse)
        with wh.run(
            self.table,
            day,
            dimensions=self.dimensions,
            code_version=self.code_version,
            run_class=_run_class(context, self.run_class),
        ) as run:
            rows = run.write(run.sql(self.sql))
        info = run.info
        self.log.info(
            "logbook %s %s: %s (version %s, run %s, %s rows)",
            self.table,
            day,
            "already committed" if info.already_committed else "committed",
            info.version,
            info.run_id,
            rows,
        )
        return _pushed(self.table, day, info)


def _content_digest(table: str, day: _dt.date, code_version: Optional[str], data: Any) -> Tuple[str, Any]:
    """A digest of what a write would commit (table, date, code version,
    schema and rows as Arrow IPC), and the data as a pyarrow Table."""
    import pyarrow as pa

    module = type(data).__module__ or ""
    if module.startswith("pandas"):
        data = pa.Table.from_pandas(data, preserve_index=False)
    elif not isinstance(data, pa.Table):
        try:
            data = pa.table(data)
        except (TypeError, ValueError) as e:
            raise InvalidInputError(
                f"table {table}, date {day}: the callable returned {type(data).__name__}, not Arrow data "
                f"(a pyarrow Table, a polars or pandas DataFrame, a DuckDB relation): {e}"
            ) from None
    h = hashlib.sha256()
    h.update(f"{table}\0{day.isoformat()}\0{code_version or ''}\0".encode())
    h.update(data.schema.serialize())
    for batch in data.to_batches():
        h.update(batch.serialize())
    return h.hexdigest()[:32], data


class LogbookWriteOperator(_Target, PythonOperator):
    """Replaces ``table``'s partition of the task's logical date with what
    ``python_callable`` returns (a pyarrow Table, a polars or pandas
    DataFrame, a DuckDB relation: anything Arrow), in one commit. The
    callable takes Airflow's context by keyword (``logical_date``, ``ds``,
    ...), as `PythonOperator`'s does, and ``logbook_date``: the partition's
    date (a ``datetime.date``; ``ds`` is the logical date in UTC, another
    day in a timezone ahead of UTC).

    The run id is ``airflow-<digest>-<unique>``: when the date's current
    contents were written from the same rows, nothing is committed."""

    template_fields: Sequence[str] = (*PythonOperator.template_fields, "warehouse", "table", "code_version")

    def __init__(
        self,
        *,
        warehouse: str,
        table: str,
        code_version: Optional[str] = None,
        run_class: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._target(warehouse, table, code_version, run_class)
        self._day: Optional[_dt.date] = None
        self._class: Optional[str] = None

    def execute(self, context: Any) -> Any:
        self._day = logical_day(context)
        _skip_unless_listed(context, self.table, self._day)
        self._class = _run_class(context, self.run_class)
        context["logbook_date"] = self._day
        return super().execute(context)

    def execute_callable(self) -> Dict[str, Any]:
        data = super().execute_callable()
        assert self._day is not None, "execute sets the date before the callable runs"
        day = self._day
        digest, data = _content_digest(self.table, day, self.code_version, data)
        wh = Warehouse(self.warehouse)
        table = wh.table(self.table)
        # Launched by `logbook backfill` into a stage or with an expected
        # version: the write itself obeys them (a skip would not).
        stage, expect = _from_backfill(self.table, day.isoformat(), None, None)
        done = None if stage or expect else self._written_from(wh, table, day, digest)
        if done is not None:
            self.log.info("logbook %s %s: the same rows are already there (version %s)", self.table, day, done.version)
            return _pushed(self.table, day, done)
        info = table.replace_partition(
            day,
            data,
            run_id=f"airflow-{digest}-{uuid.uuid4().hex[:12]}",
            code_version=self.code_version,
            job=f"airflow:{self.dag_id}.{self.task_id}",
            run_class=self._class,
        )
        self.log.info("logbook %s %s: committed version %s (run %s)", self.table, day, info.version, info.run_id)
        return _pushed(self.table, day, info)

    def _written_from(self, wh: Warehouse, table: Any, day: _dt.date, digest: str) -> Optional[CommitInfo]:
        """The date's current commit, if a write of the same rows made it and
        the partition is whole (a damaged one is rewritten)."""
        current = next((p for p in table.partitions() if p["date"] == day.isoformat()), None)
        if current is None or not str(current.get("run_id") or "").startswith(f"airflow-{digest}-"):
            return None
        states = wh.status(self.table, start=day, end=day)
        if not states or states[0]["state"] != "complete":
            return None
        return CommitInfo(current["version"], True, current["run_id"])


class LogbookPartitionSensor(BaseSensorOperator):
    """Waits until ``table``'s partition of ``date`` (default: the task's
    logical date) is Complete: not Missing, Running or Stale. A Corrupt
    partition fails the task at once (waiting would not mend it). Use
    ``mode="reschedule"`` to free the worker slot between pokes."""

    template_fields: Sequence[str] = ("warehouse", "table", "date")

    def __init__(self, *, warehouse: str, table: str, date: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.warehouse = warehouse
        self.table = table
        self.date = date

    def poke(self, context: Any) -> bool:
        day = _dt.date.fromisoformat(_date(self.date)) if self.date else logical_day(context)
        states = Warehouse(self.warehouse).status(self.table, start=day, end=day)
        if not states:
            raise AirflowFailException(
                f"table {self.table}, date {day}: not a date the table schedules (before its schedule start)"
            )
        state = states[0]
        if state["state"] == "corrupt":
            raise AirflowFailException(f"table {self.table}, date {day}: corrupt ({state['reasons']}); run `logbook check {self.table}`")
        self.log.info("logbook %s %s: %s %s", self.table, day, state["state"], state.get("reasons") or "")
        return state["state"] == "complete"


@dataclass(frozen=True)
class StaleRuns:
    """The DAG runs to redo for ``table``: its dates that ``plan`` says are
    stale, missing or corrupt, in the plan's order, with the reasons."""

    dag_id: str
    table: str
    dates: Tuple[_dt.date, ...]
    reasons: Dict[str, List[Any]] = field(default_factory=dict)
    chain: bool = False
    timezone: Any = _dt.timezone.utc
    #: A chain's date a live writer is running: no later date is planned
    #: until it finishes (ask again then).
    blocked_by: Optional[_dt.date] = None

    def ranges(self) -> List[Tuple[_dt.date, _dt.date]]:
        """The dates as runs of consecutive days, first to last (for
        people: the backfill covers from the first to the last)."""
        out: List[Tuple[_dt.date, _dt.date]] = []
        for d in sorted(self.dates):
            if out and d == out[-1][1] + _dt.timedelta(days=1):
                out[-1] = (out[-1][0], d)
            else:
                out.append((d, d))
        return out

    def _local(self, day: _dt.date, at: _dt.time) -> str:
        local = _dt.datetime.combine(day, at)
        if hasattr(self.timezone, "localize"):
            local = self.timezone.localize(local)
        else:
            local = local.replace(tzinfo=self.timezone)
        return local.isoformat()

    def backfill_command(self, max_active_runs: Optional[int] = None) -> Optional[List[str]]:
        """The ``airflow backfill create`` that redoes every date: one
        backfill from the first date's start to the last date's end in the
        DAG's timezone (Airflow runs one backfill per DAG at a time), which
        reprocesses runs that completed (a stale date's run succeeded
        once). Its runs' conf lists the dates (``logbook_dates``): the runs
        of dates in between skip their logbook tasks. A chain runs one date
        at a time, oldest first. ``None`` when nothing is to redo."""
        if not self.dates:
            return None
        runs = 1 if self.chain else max_active_runs
        first, last = min(self.dates), max(self.dates)
        cmd = ["airflow", "backfill", "create", "--dag-id", self.dag_id,
               "--from-date", self._local(first, _dt.time()),
               "--to-date", self._local(last, _dt.time(23, 59, 59, 999999)),
               "--reprocess-behavior", "completed",
               "--dag-run-conf", json.dumps({ONLY_DATES: sorted(d.isoformat() for d in self.dates)})]
        if runs is not None:
            cmd += ["--max-active-runs", str(runs)]
        return cmd

    def create_backfill(self, max_active_runs: Optional[int] = None, airflow: str = "airflow") -> Optional[List[str]]:
        """Create that backfill in Airflow's metadata database (the
        scheduler runs it); returns the command it ran (``None``: nothing
        to redo). Needs the ``airflow`` CLI configured for the deployment;
        fails while another backfill of the DAG is unfinished (Airflow's
        rule), naming the table and the command."""
        cmd = self.backfill_command(max_active_runs)
        if cmd is None:
            return None
        cmd = [airflow, *cmd[1:]]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            raise InvalidInputError(
                f"table {self.table}: `{shlex.join(cmd)}` failed ({result.returncode}): "
                f"{(result.stderr or result.stdout).strip()[-2000:]}"
            )
        return cmd

    def __str__(self) -> str:
        if self.blocked_by is not None and not self.dates:
            return f"{self.table}: {self.blocked_by} is running; a chain plans nothing after it until it finishes"
        if not self.dates:
            return f"{self.table}: nothing to redo for DAG {self.dag_id}"
        lines = [f"{self.table}: {len(self.dates)} date(s) of DAG {self.dag_id} to redo"]
        for d in self.dates:
            why = self.reasons.get(d.isoformat()) or []
            lines.append(f"  {d}  {'; '.join(map(str, why)) if why else ''}".rstrip())
        lines.append(shlex.join(self.backfill_command() or []))
        return "\n".join(lines)


def stale_runs(
    warehouse: Any,
    table: str,
    dag_id: str,
    start: Any = None,
    end: Any = None,
    timezone: Any = _dt.timezone.utc,
) -> StaleRuns:
    """What ``Warehouse.plan(table, start, end)`` asks to recompute, as the
    runs of ``dag_id`` (whose timezone is ``timezone``, e.g. ``dag.timezone``)
    to redo."""
    wh = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    plan = wh.plan(table, start=start, end=end)
    steps = plan["steps"]
    return StaleRuns(
        dag_id=dag_id,
        table=table,
        dates=tuple(_dt.date.fromisoformat(s["date"]) for s in steps),
        reasons={s["date"]: list(s.get("reasons") or []) for s in steps},
        chain=bool(plan.get("chain")),
        timezone=timezone,
        blocked_by=_dt.date.fromisoformat(plan["blocked_by"]) if plan.get("blocked_by") else None,
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m pylogbook.airflow WAREHOUSE TABLE DAG_ID``: the dates to
    redo and the ``airflow backfill create`` commands (``--create`` runs them)."""
    p = argparse.ArgumentParser(prog="python -m pylogbook.airflow", description=main.__doc__)
    p.add_argument("warehouse")
    p.add_argument("table")
    p.add_argument("dag_id")
    p.add_argument("--start")
    p.add_argument("--end")
    p.add_argument("--timezone", default="UTC", help="the DAG's timezone (IANA name; default UTC)")
    p.add_argument("--create", action="store_true", help="create the backfill with the airflow CLI")
    args = p.parse_args(argv)
    import pendulum

    runs = stale_runs(args.warehouse, args.table, args.dag_id, args.start, args.end, pendulum.timezone(args.timezone))
    print(runs)
    if args.create:
        runs.create_backfill()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
