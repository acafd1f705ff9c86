"""Dagster: daily-partitioned assets stored as logbook tables.

    import dagster as dg
    from pylogbook.dagster import LogbookIOManager, Query

    @dg.asset(partitions_def=dg.DailyPartitionsDefinition("2026-03-01"))
    def orders() -> pa.Table:              # data: replaces the date's partition
        return load_orders(...)

    @dg.asset(partitions_def=..., deps=[orders], code_version="v2")
    def revenue() -> Query:                # a query: a logbook run for the date
        return Query("SELECT ... FROM orders o JOIN customers c ... WHERE o.date = logical_date() ...")

    dg.Definitions(assets=[orders, revenue],
                   resources={"io_manager": LogbookIOManager(warehouse="s3://bucket/wh")})

The asset's partition key is the logical date; its table is the asset key's
parts joined by ``_`` (``orders``, or ``raw_orders`` for ``raw/orders``). A `Query` output runs as a logbook run for that date (dimensions
as of the date, or current; lineage recorded; its run id derived from the
query and the data read, so re-materializing an unchanged partition
commits nothing, and `Warehouse.status` knows when a partition went stale).
Any other output (pyarrow, polars, pandas, DuckDB) replaces the partition
as data, with run id ``dagster-<run id>-<step>``: a retry of the step within
the same Dagster run commits nothing, while a new run commits anew. The asset's ``code_version`` is recorded
as the partition's code version. ``load_input`` reads the upstream
partitions as a pyarrow Table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import dagster as dg

from . import InvalidInputError, Warehouse


@dataclass(frozen=True)
class Query:
    """An asset output that is SQL run as a logbook run for the partition's
    date (``logical_date()`` is the partition key)."""

    sql: str


def _table(context: Any) -> str:
    return "_".join(context.asset_key.path)


def _run_id(context: dg.OutputContext) -> str:
    raw = f"dagster-{context.run_id}-{context.step_key}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", raw)


def _code_version(context: dg.OutputContext) -> Any:
    return context.asset_spec.code_version if context.has_asset_key else None


class LogbookIOManager(dg.ConfigurableIOManager):
    """Stores each daily partition of an asset as the same date's partition
    of the logbook table named by the asset key (parts joined by ``_``)."""

    warehouse: str
    dimensions: str = "as-of"

    def _date(self, context: Any) -> str:
        if not context.has_asset_partitions:
            raise InvalidInputError(
                f"asset {context.asset_key.to_user_string()}: logbook tables are partitioned by date; "
                "give the asset a daily partitions definition"
            )
        return context.asset_partition_key

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        wh = Warehouse(self.warehouse)
        table = _table(context)
        date = self._date(context)
        code_version = _code_version(context)
        if isinstance(obj, Query):
            with wh.run(table, date, dimensions=self.dimensions, code_version=code_version) as run:
                run.write(run.sql(obj.sql))
            info = run.info
        else:
            info = wh.table(table).replace_partition(
                date, obj, run_id=_run_id(context), code_version=code_version
            )
        context.add_output_metadata(
            {
                "logbook_version": info.version,
                "already_committed": info.already_committed,
                "run_id": info.run_id,
            }
        )

    def load_input(self, context: dg.InputContext) -> Any:
        wh = Warehouse(self.warehouse)
        table = _table(context)
        dates = list(context.asset_partition_keys) if context.has_asset_partitions else None
        return wh.table(table).to_arrow(dates=dates)
