"""pylogbook: logbook tables from Python.

A pipeline job replaces the partition its logical date owns, atomically;
re-running it is safe. Dimensions are slowly changing and resolved as of the
run's date; every partition records what it read. See the project README.

    import pylogbook as lb
    wh = lb.Warehouse("./warehouse")
    orders = wh.table("orders")
    orders.replace_partition("2026-03-15", arrow_table)
    with wh.run("revenue", "2026-03-15", code_version="v2") as run:
        run.write(run.sql("SELECT ... WHERE o.date = logical_date() ..."))

Data in is anything exporting the Arrow PyCapsule stream interface
(``__arrow_c_stream__``: pyarrow, polars, DuckDB, a ``sql()`` result) or a
pandas DataFrame; results export it too. pyarrow is imported only by the
methods that return pyarrow objects.
"""

from __future__ import annotations

import datetime as _dt
import json as _json
from dataclasses import dataclass
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from . import _native
from ._native import (
    AlreadyExistsError,
    ConflictError,
    CorruptError,
    InvalidInputError,
    LogbookError,
    NotFoundError,
    SqlError,
    TransientError,
    UnsupportedError,
)

__version__ = _native.__version__

__all__ = [
    "Warehouse",
    "Table",
    "Run",
    "CommitInfo",
    "LogbookError",
    "InvalidInputError",
    "ConflictError",
    "NotFoundError",
    "AlreadyExistsError",
    "CorruptError",
    "UnsupportedError",
    "TransientError",
    "SqlError",
]

DateLike = Union[str, _dt.date]


def _date(value: Optional[DateLike], what: str = "date") -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        raise InvalidInputError(f"{what} {value!r} is a datetime; give a date (logical dates are days)")
    if isinstance(value, _dt.date):
        return value.isoformat()
    if isinstance(value, str):
        try:
            return _dt.date.fromisoformat(value).isoformat()
        except ValueError:
            raise InvalidInputError(f"{what} {value!r} is not a date (YYYY-MM-DD)") from None
    raise InvalidInputError(f"{what} {value!r} is not a date or a YYYY-MM-DD string")


def _yesterday() -> str:
    """The CLI's default end of a status range: yesterday, in UTC."""
    return (_dt.datetime.now(_dt.timezone.utc).date() - _dt.timedelta(days=1)).isoformat()


def _from_backfill(table: str, date: str, stage: Optional[str], expect: Optional[str]):
    """What ``logbook backfill`` asks of the job it launched, as ``logbook
    write`` and ``logbook run`` obey it: write into its stage
    (``LOGBOOK_STAGE``), and commit only if the date is still as the backfill
    saw it (``LOGBOOK_EXPECT_VERSION=TABLE@DATE=VERSION|missing``, for that
    table and date only). Explicit arguments win."""
    if stage is None:
        stage = os.environ.get("LOGBOOK_STAGE") or None
    if expect is None and stage is None:
        value = os.environ.get("LOGBOOK_EXPECT_VERSION", "")
        target, _, version = value.partition("=")
        if target == f"{table}@{date}" and version:
            expect = version
    return stage, expect


def _turn(run_class: Optional[str]):
    """The class and backfill slot ``logbook backfill`` hands the job it
    launched (``LOGBOOK_RUN_CLASS``, ``LOGBOOK_SLOT``), as ``logbook write``
    and ``logbook run`` take them: a production run announces itself while
    it runs, a backfill run commits only while its runner's slot is its own.
    An explicit ``run_class`` wins."""
    return run_class or os.environ.get("LOGBOOK_RUN_CLASS") or None, os.environ.get("LOGBOOK_SLOT") or None


def _stream(data: Any) -> Any:
    """``data`` as something exporting ``__arrow_c_stream__``."""
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
        return data
    module = type(data).__module__ or ""
    if module.startswith("pandas"):
        import pyarrow as pa

        return pa.Table.from_pandas(data, preserve_index=False)
    raise InvalidInputError(
        f"cannot read {type(data).__name__}: give a pyarrow Table or RecordBatchReader, "
        "a polars or pandas DataFrame, a DuckDB relation, or a sql() result"
    )


def _schema(schema: Any) -> Any:
    if hasattr(schema, "__arrow_c_schema__"):
        return schema
    raise InvalidInputError("schema must export __arrow_c_schema__ (e.g. a pyarrow.Schema)")


@dataclass(frozen=True)
class CommitInfo:
    """What a write did: the version holding its rows, and whether this run
    had already committed them (then nothing new was committed)."""

    version: int
    already_committed: bool
    run_id: Optional[str] = None


class Table:
    """One table of a warehouse."""

    def __init__(self, native: "_native.Table"):
        self._t = native

    @property
    def name(self) -> str:
        return self._t.name

    @property
    def uri(self) -> str:
        return self._t.uri

    def __repr__(self) -> str:
        return f"pylogbook.Table({self.name!r} at {self.uri!r})"

    def __datafusion_table_provider__(self, session: Any) -> Any:
        """Lets ``datafusion`` (PyPI) query the table:
        ``ctx.register_table("orders", wh.table("orders"))``. Each scan reads
        the latest snapshot, pruning partitions by date filters."""
        return self._t.__datafusion_table_provider__(session)

    def latest_version(self) -> int:
        return self._t.latest_version()

    def schema(self, version: Optional[int] = None):
        """The table's pyarrow schema at ``version`` (default: latest)."""
        import pyarrow as pa

        return pa.schema(self._t.schema(version))

    def replace_partition(
        self,
        date: DateLike,
        data: Any,
        run_id: Optional[str] = None,
        code_version: Optional[str] = None,
        job: Optional[str] = None,
        expect_version: Union[int, str, None] = None,
        stage: Optional[str] = None,
        run_class: Optional[str] = None,
    ) -> CommitInfo:
        """Replace the partition of ``date`` with ``data`` (streamed), in one
        atomic commit. Re-submitting a ``run_id`` that committed the date
        commits nothing. ``expect_version`` (a version, or ``"missing"``)
        refuses the commit with ``ConflictError`` if the date moved. With
        ``stage``, the partition is staged (see ``logbook stage``). Launched
        by ``logbook backfill``, its stage and expectation apply."""
        day = _date(date)
        expect = None if expect_version is None else str(expect_version)
        stage, expect = _from_backfill(self.name, day, stage, expect)
        run_class, slot = _turn(run_class)
        version, already, run = self._t.replace_partition(
            day, _stream(data), run_id, code_version, job, expect, stage, run_class, slot
        )
        return CommitInfo(version, already, run)

    def apply_changes(self, date: DateLike, data: Any, run_id: Optional[str] = None) -> int:
        """Dimension: upsert rows effective ``date``; returns the version."""
        return self._t.apply_changes(_date(date), _stream(data), run_id)[0]

    def apply_deletes(self, date: DateLike, keys: Any, run_id: Optional[str] = None) -> int:
        """Dimension: end the keys in ``keys`` at ``date``; returns the version."""
        return self._t.apply_deletes(_date(date), _stream(keys), run_id)[0]

    def apply_snapshot(self, date: DateLike, data: Any, run_id: Optional[str] = None) -> int:
        """Dimension: ``data`` is the whole dimension from ``date`` on."""
        return self._t.apply_snapshot(_date(date), _stream(data), run_id)[0]

    def partitions(self, version: Optional[int] = None) -> List[Dict[str, Any]]:
        """One dict per partition, as ``logbook partitions --json`` prints."""
        return _json.loads(self._t.partitions_json(version))

    def to_arrow(self, version: Optional[int] = None, dates: Optional[Sequence[DateLike]] = None):
        """The rows at ``version`` (of ``dates`` only, if given) as a pyarrow Table."""
        import pyarrow as pa

        picked = None if dates is None else [_date(d, "dates") for d in dates]
        return pa.RecordBatchReader.from_stream(self._t.read(version, picked)).read_all()

    def to_reader(self, version: Optional[int] = None, dates: Optional[Sequence[DateLike]] = None):
        """The rows as a stream (exports ``__arrow_c_stream__``), read lazily."""
        picked = None if dates is None else [_date(d, "dates") for d in dates]
        return self._t.read(version, picked)

    def to_pyarrow_dataset(self, version: Optional[int] = None):
        """The live files of ``version`` as a ``pyarrow.dataset.Dataset``, for
        DuckDB, polars, Dask or Ray. Only those files: never a directory
        listing, which would also see uncommitted and superseded files."""
        import pyarrow.dataset as ds
        import pyarrow.fs as pafs

        if self.uri.startswith(("memory://", "az://")):
            raise UnsupportedError(
                f"table {self.name}: pyarrow cannot open {self.uri.split(':')[0]}:// files here; "
                "use to_arrow() or to_reader()"
            )
        schema = self.schema(version)
        stored = self._t.file_schema(version)
        for logical, physical in zip(schema.names, stored.names):
            if logical != physical:
                # A dataset maps columns by name; logbook by field id.
                raise UnsupportedError(
                    f"table {self.name}: column {logical} is stored as {physical} in the files "
                    "(it was renamed, or reuses a dropped column's name); a pyarrow dataset would "
                    "read it as nulls: use to_arrow() or to_reader()"
                )
        fs, root = pafs.FileSystem.from_uri(self.uri)
        paths = [f"{root}/{p}" for p in self._t.files(version)]
        return ds.dataset(paths, schema=schema, format="parquet", filesystem=fs)


class Run:
    """A job run for one logical date (use it as a context manager)."""

    def __init__(self, native: "_native.Run", target: str, date: str):
        self._r = native
        self.target = target
        self.logical_date = _dt.date.fromisoformat(date)
        self.info: Optional[CommitInfo] = None

    def sql(self, query: str):
        """Run ``query`` in the run's context; its reads are the run's lineage."""
        return self._r.sql(query)

    def write(self, data: Any) -> int:
        """Append ``data``'s rows (streamed) to the partition; returns rows."""
        return self._r.write(_stream(data))

    def commit(self) -> CommitInfo:
        version, already, run_id = self._r.commit()
        self.info = CommitInfo(version, already, run_id)
        return self.info

    def abort(self) -> None:
        self._r.abort()

    def __enter__(self) -> "Run":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.commit()
        else:
            self.abort()
        return False


class Warehouse:
    """A warehouse: a directory or bucket prefix of tables (the same URIs as
    the CLI: a directory, ``file://``, ``memory://``, ``s3://``, ``gs://``,
    ``az://``).

    With ``cluster="df://HOST:PORT"``, :meth:`sql` plans each query here (at
    the versions it reads now) and runs it on that Apache Ballista cluster
    (``logbook cluster scheduler`` and its executors, which read the
    warehouse themselves). A cluster started with TLS also needs
    ``cluster_ca``, ``cluster_cert`` and ``cluster_key``: PEM files of its
    CA, and of this client's certificate (signed by that CA) and key."""

    def __init__(
        self,
        uri: Union[str, "os.PathLike[str]"],
        cluster: Optional[str] = None,
        cluster_ca: Optional[Union[str, "os.PathLike[str]"]] = None,
        cluster_cert: Optional[Union[str, "os.PathLike[str]"]] = None,
        cluster_key: Optional[Union[str, "os.PathLike[str]"]] = None,
    ):
        self._w = _native.Warehouse(str(uri), cluster, cluster_ca, cluster_cert, cluster_key)

    @property
    def uri(self) -> str:
        return self._w.uri

    def __repr__(self) -> str:
        return f"pylogbook.Warehouse({self.uri!r})"

    def create_table(
        self,
        name: str,
        schema: Any,
        partition_by: Optional[str] = None,
        scd2_keys: Optional[Sequence[str]] = None,
        schedule_start: Optional[DateLike] = None,
        depends_on_previous: bool = False,
        mirror: Optional[str] = None,
    ) -> Table:
        """Create a fact table (``partition_by`` names its date column) or a
        dimension (``scd2_keys``; logbook adds ``valid_from``/``valid_to``).
        ``mirror``: ``"delta"``, ``"iceberg"`` or ``"delta,iceberg"`` keeps
        that log beside logbook's, for other engines."""
        keys = None if scd2_keys is None else list(scd2_keys)
        native = self._w.create_table(
            name,
            _schema(schema),
            partition_by,
            keys,
            _date(schedule_start, "schedule_start"),
            depends_on_previous,
            mirror=mirror,
        )
        return Table(native)

    def table(self, name: str) -> Table:
        return Table(self._w.table(name))

    def tables(self) -> List[str]:
        return self._w.tables()

    def sql(
        self,
        query: str,
        logical_date: Optional[DateLike] = None,
        dimensions: str = "as-of",
        versions: Optional[Dict[str, int]] = None,
    ):
        """Run ``query``; the result streams (it exports ``__arrow_c_stream__``:
        ``pyarrow.table(r)``, ``polars.DataFrame(r)``, ``duckdb.from_arrow(r)``)."""
        return self._w.sql(query, _date(logical_date, "logical_date"), dimensions, versions)

    def run(
        self,
        target: str,
        date: DateLike,
        dimensions: str = "as-of",
        code_version: Optional[str] = None,
        run_id: Optional[str] = None,
        stage: Optional[str] = None,
        expect_version: Union[int, str, None] = None,
        run_class: Optional[str] = None,
    ) -> Run:
        """Start a run of ``target`` for ``date``: ``with wh.run(...) as run:``
        commits on success and aborts on an exception. Without ``run_id`` the
        id is derived from the query text and the data read, so re-running on
        the same data commits nothing. Launched by ``logbook backfill``, its
        stage and expectation apply."""
        day = _date(date)
        expect = None if expect_version is None else str(expect_version)
        stage, expect = _from_backfill(target, day, stage, expect)
        run_class, slot = _turn(run_class)
        native = self._w.start_run(target, day, dimensions, code_version, run_id, stage, expect, run_class, slot)
        return Run(native, target, day)

    def status(self, table: str, start: Optional[DateLike] = None, end: Optional[DateLike] = None) -> List[Dict[str, Any]]:
        """Each scheduled date up to ``end`` (default: yesterday, UTC, as the
        CLI) with its state and reasons, as ``logbook status --json`` prints."""
        end = _date(end, "end") or _yesterday()
        return _json.loads(self._w.status_json(table, end, _date(start, "start")))

    def plan(
        self,
        table: str,
        start: Optional[DateLike] = None,
        end: Optional[DateLike] = None,
        only: str = "needed",
    ) -> Dict[str, Any]:
        """The dates to recompute, in order, as ``logbook plan --json`` prints."""
        end = _date(end, "end") or _yesterday()
        return _json.loads(self._w.plan_json(table, end, _date(start, "start"), only))

    def log(self, table: str) -> List[Dict[str, Any]]:
        """Every commit of ``table``, as ``logbook log --json`` prints."""
        return _json.loads(self._w.log_json(table))

    def publish_stage(self, name: str, force: bool = False) -> Dict[str, Any]:
        """Publish stage ``name`` in every table holding it, as one: readers
        see all of them change or none (``logbook stage publish NAME``).
        Returns ``{"seq": N, "tables": {table: version}}`` (``seq`` is
        ``None`` when one table held the stage)."""
        return _json.loads(self._w.publish_stage_json(name, force))
