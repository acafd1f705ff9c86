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


def test_the_io_manager_stores_two_assets_and_redoes_exactly_the_stale_dates(tmp_path):
    import datetime as dt

    import pylogbook as lb
    from conftest import CUSTOMERS, ORDERS, REVENUE
    from pylogbook.dagster import LogbookIOManager, Query

    wh = lb.Warehouse(tmp_path / "wh")
    wh.create_table("orders", schema=ORDERS, partition_by="date")
    wh.create_table("revenue", schema=REVENUE, partition_by="date", schedule_start="2026-03-01")
    customers = wh.create_table("customers", schema=CUSTOMERS, scd2_keys=["customer"])
    customers.apply_changes("2026-01-01", pa.table({"customer": ["c-1", "c-2"], "region": ["Berlin", "Hamburg"]}))
    daily = dg.DailyPartitionsDefinition(start_date="2026-03-01", end_date="2026-03-11")

    @dg.asset(partitions_def=daily, code_version="v1")
    def orders(context: dg.AssetExecutionContext) -> pa.Table:
        d = dt.date.fromisoformat(context.partition_key)
        return orders_on(context.partition_key, ("c-1", "c-2"), (float(d.day), 1.0))

    @dg.asset(partitions_def=daily, deps=[orders], code_version="v1")
    def revenue() -> Query:
        return Query(
            "SELECT o.date, c.region, sum(o.amount) AS revenue FROM orders o "
            "JOIN customers c ON o.customer = c.customer "
            "WHERE o.date = logical_date() GROUP BY o.date, c.region"
        )

    io = LogbookIOManager(warehouse=str(tmp_path / "wh"))

    def run(assets, key):
        result = dg.materialize(assets, partition_key=key, resources={"io_manager": io})
        assert result.success
        return {
            e.asset_key.path[-1]: {k: v.value for k, v in e.metadata.items()}
            for e in result.get_asset_materialization_events()
            for e in [e.materialization]
        }

    keys = daily.get_partition_keys()
    assert len(keys) == 10
    for key in keys:
        done = run([orders, revenue], key)
        assert not done["orders"]["already_committed"] and not done["revenue"]["already_committed"]
    assert {s["state"] for s in wh.status("revenue", end=keys[-1])} == {"complete"}
    part = [p for p in wh.table("revenue").partitions() if p["date"] == "2026-03-05"][0]
    assert part["code_version"] == "v1" and part["dimensions"] == "as-of"
    # An unchanged partition: Dagster materializes it, logbook commits nothing.
    assert run([revenue], keys[0])["revenue"]["already_committed"]

    # c-1 moved to Munich on 03-06, recorded late: the dates from then on are stale.
    customers.apply_changes("2026-03-06", pa.table({"customer": ["c-1"], "region": ["Munich"]}))
    stale = [s["date"] for s in wh.status("revenue", end=keys[-1]) if s["state"] == "stale"]
    assert stale == keys[5:]
    for key in stale:
        done = run([revenue], key)
        assert not done["revenue"]["already_committed"]
    assert {s["state"] for s in wh.status("revenue", end=keys[-1])} == {"complete"}
    regions = pa.table(wh.sql("SELECT date, region FROM revenue WHERE revenue > 1 ORDER BY date"))
    by_date = dict(zip([str(d) for d in regions.column("date").to_pylist()], regions.column("region").to_pylist()))
    assert by_date["2026-03-05"] == "Berlin" and by_date["2026-03-06"] == "Munich"
    # load_input reads the upstream partition.
    loaded = io.load_input(
        dg.build_input_context(
            asset_key=dg.AssetKey("orders"),
            asset_partition_key_range=dg.PartitionKeyRange(keys[2], keys[2]),
            asset_partitions_def=daily,
        )
    )
    assert loaded.num_rows == 2 and loaded.column("amount").to_pylist() == [3.0, 1.0]
