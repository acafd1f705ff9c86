"""Dagster, as an orchestrator runs pylogbook: a daily-partitioned asset
whose materialization is a logbook run for the partition's date. Dagster
re-materializing a date (a retry, a backfill) commits nothing new unless
the inputs changed; logbook's status tells Dagster which dates to redo."""

import dagster as dg
import pyarrow as pa

from conftest import REVENUE_SQL, orders_on


def revenue_asset(wh):
    daily = dg.DailyPartitionsDefinition(start_date="2026-03-14", end_date="2026-03-17")

    @dg.asset(name="revenue", partitions_def=daily)
    def revenue(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        with wh.run("revenue", context.partition_key, code_version="v1") as run:
            run.write(run.sql(REVENUE_SQL))
        return dg.MaterializeResult(
            metadata={
                "logbook_version": run.info.version,
                "already_committed": run.info.already_committed,
                "run_id": run.info.run_id,
            }
        )

    return revenue, daily


def materialize(asset, key):
    result = dg.materialize([asset], partition_key=key, raise_on_error=True)
    assert result.success
    (event,) = result.asset_materializations_for_node("revenue")
    return {k: v.value for k, v in event.metadata.items()}


def test_dagster_partitions_are_logbook_runs_and_retries_commit_nothing(wh):
    asset, daily = revenue_asset(wh)
    keys = daily.get_partition_keys()
    assert keys == ["2026-03-14", "2026-03-15", "2026-03-16"]
    first = {k: materialize(asset, k) for k in keys}
    assert not any(m["already_committed"] for m in first.values())
    states = {s["date"]: s["state"] for s in wh.status("revenue", end="2026-03-16")}
    assert set(states.values()) == {"complete"}

    # Dagster retries a date: the same run, nothing new.
    retry = materialize(asset, "2026-03-15")
    assert retry["already_committed"] and retry["logbook_version"] == first["2026-03-15"]["logbook_version"]

    # An input date is fixed: logbook's plan says which partitions to redo,
    # and a Dagster backfill of exactly those brings them back to complete.
    wh.table("orders").replace_partition("2026-03-15", orders_on("2026-03-15", ("c-04",), (7.0,)))
    plan = [s["date"] for s in wh.plan("revenue", end="2026-03-16")["steps"]]
    assert plan == ["2026-03-15"]
    redo = materialize(asset, plan[0])
    assert not redo["already_committed"]
    states = {s["date"]: s["state"] for s in wh.status("revenue", end="2026-03-16")}
    assert set(states.values()) == {"complete"}
    revenue = pa.table(wh.sql("SELECT revenue FROM revenue WHERE date = DATE '2026-03-15'"))
    assert revenue.column("revenue").to_pylist() == [7.0]
