"""Writing one date of 2,000,000 rows from Python: pylogbook's
replace_partition against deltalake's write_deltalake with a predicate
overwrite of that date. One timed run per process, from opening the table
to the commit; the rows are read into memory first (not timed).

    python_write.py DIR prepare | pylogbook | delta
"""

import datetime as dt
import json
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq

ROWS = 2_000_000
DAY = dt.date(2026, 3, 15)
SCHEMA = pa.schema(
    [
        ("date", pa.date32()),
        ("order_id", pa.int64()),
        ("customer", pa.string()),
        ("amount", pa.float64()),
        ("placed_at", pa.timestamp("us", tz="UTC")),
    ]
)


def orders(day: dt.date, n: int, seed: int) -> pa.Table:
    base = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    return pa.table(
        {
            "date": pa.array([day] * n, pa.date32()),
            "order_id": pa.array(range(seed * 10_000_000, seed * 10_000_000 + n), pa.int64()),
            "customer": pa.array([f"c-{(i * 7919) % 50_000:05}" for i in range(n)]),
            "amount": pa.array([((i * 31) % 10_000) / 100 for i in range(n)], pa.float64()),
            "placed_at": pa.array([base + dt.timedelta(seconds=i % 86_400) for i in range(n)], SCHEMA.field("placed_at").type),
        },
        schema=SCHEMA,
    )


def prepare(d: str) -> None:
    import pylogbook as lb
    from deltalake import write_deltalake

    pq.write_table(orders(DAY, ROWS, 1), f"{d}/rows.parquet")
    wh = lb.Warehouse(f"{d}/wh")
    t = wh.create_table("orders", schema=SCHEMA, partition_by="date")
    for i in range(1, 4):
        day = DAY - dt.timedelta(days=i)
        rows = orders(day, 200_000, 10 + i)
        t.replace_partition(day, rows, run_id=f"load-{i}")
        write_deltalake(f"{d}/delta", rows, mode="append", partition_by=["date"])


def timed(d: str, which: str) -> None:
    # Imports and reading the rows happen before the clock starts.
    import uuid

    import pylogbook as lb
    from deltalake import write_deltalake

    rows = pq.read_table(f"{d}/rows.parquet")
    start = time.perf_counter()
    if which == "pylogbook":
        table = lb.Warehouse(f"{d}/wh").table("orders")
        table.replace_partition(DAY, rows, run_id=f"py-{uuid.uuid4()}")
    else:
        write_deltalake(f"{d}/delta", rows, mode="overwrite", predicate=f"date = '{DAY}'", partition_by=["date"])
    print(json.dumps({"ms": round((time.perf_counter() - start) * 1000, 1)}))


if __name__ == "__main__":
    d, which = sys.argv[1], sys.argv[2]
    prepare(d) if which == "prepare" else timed(d, which)
