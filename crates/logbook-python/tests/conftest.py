import datetime as dt

import pyarrow as pa
import pytest

import pylogbook as lb

ORDERS = pa.schema(
    [("date", pa.date32()), ("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64())]
)
CUSTOMERS = pa.schema([("customer", pa.string()), ("region", pa.string())])
REVENUE = pa.schema([("date", pa.date32()), ("region", pa.string()), ("revenue", pa.float64())])
REVENUE_SQL = (
    "SELECT o.date, c.region, sum(o.amount) AS revenue FROM orders o "
    "JOIN customers c ON o.customer = c.customer "
    "WHERE o.date = logical_date() GROUP BY o.date, c.region"
)


def day(s: str) -> dt.date:
    return dt.date.fromisoformat(s)


def orders_on(d: str, customers=("c-17", "c-04", "c-17"), amounts=(10.0, 5.0, 1.5)) -> pa.Table:
    n = len(customers)
    return pa.table(
        {
            "date": [day(d)] * n,
            "order_id": list(range(n)),
            "customer": list(customers),
            "amount": list(amounts),
        },
        schema=ORDERS,
    )


@pytest.fixture
def wh(tmp_path):
    """orders on 03-14..03-16; customers: c-17 Berlin, moving to Munich on
    03-20; c-04 Hamburg; an empty revenue table."""
    w = lb.Warehouse(tmp_path / "wh")
    orders = w.create_table("orders", schema=ORDERS, partition_by="date")
    for d in ("2026-03-14", "2026-03-15", "2026-03-16"):
        orders.replace_partition(d, orders_on(d), run_id=f"load-{d}")
    cust = w.create_table("customers", schema=CUSTOMERS, scd2_keys=["customer"])
    cust.apply_changes("2026-01-01", pa.table({"customer": ["c-17", "c-04"], "region": ["Berlin", "Hamburg"]}))
    cust.apply_changes(day("2026-03-20"), pa.table({"customer": ["c-17"], "region": ["Munich"]}))
    w.create_table("revenue", schema=REVENUE, partition_by="date")
    return w
