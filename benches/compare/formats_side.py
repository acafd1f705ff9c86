"""Delta Lake's and Iceberg's side of the table-format comparison.

Usage: formats_side.py DIR (delta|iceberg) (prepare|replace|verify|timetravel)
Reads the input Parquet files `formats generate DIR` wrote, so every system
stores the same rows with the same Parquet settings (snappy, row groups of
up to 1,048,576 rows), partitioned by date.
"""
import glob
import json
import sys
import time

import pyarrow.compute as pc
import pyarrow.parquet as pq

REPLACED = "2020-01-18"
ROW_GROUP = 1 << 20


def delta(directory, op):
    from deltalake import DeltaTable, WriterProperties, write_deltalake

    path = f"{directory}/delta"
    props = WriterProperties(compression="SNAPPY", max_row_group_size=ROW_GROUP)
    if op == "prepare":
        for f in sorted(glob.glob(f"{directory}/input/day-*.parquet")):
            write_deltalake(path, pq.read_table(f), mode="append", partition_by=["date"],
                            writer_properties=props)
    elif op == "replace":
        fixed = pq.read_table(f"{directory}/input/fixed.parquet")
        start = time.perf_counter()
        write_deltalake(path, fixed, mode="overwrite", predicate=f"date = '{REPLACED}'",
                        partition_by=["date"], writer_properties=props)
        return {"ms": round((time.perf_counter() - start) * 1000, 1)}
    elif op == "timetravel":
        # The version right after loading the 30 days (versions 0..29).
        start = time.perf_counter()
        table = DeltaTable(path, version=29).to_pyarrow_table()
        return {"ms": round((time.perf_counter() - start) * 1000, 1), **summary(table)}
    else:
        return summary(DeltaTable(path).to_pyarrow_table())


def iceberg_catalog(directory, name):
    """A SQLite catalog `DIR/NAME.db` with its warehouse under `DIR/NAME`."""
    from pyiceberg.catalog.sql import SqlCatalog
    return SqlCatalog("bench", uri=f"sqlite:///{directory}/{name}.db",
                      warehouse=f"file://{directory}/{name}")


def iceberg(directory, op):
    from pyiceberg.expressions import EqualTo

    catalog = iceberg_catalog(directory, "iceberg")
    if op == "prepare":
        catalog.create_namespace("bench")
        days = sorted(glob.glob(f"{directory}/input/day-*.parquet"))
        schema = pq.read_schema(days[0])
        table = catalog.create_table("bench.orders", schema=schema, properties={
            "write.parquet.compression-codec": "snappy",
            "write.parquet.row-group-limit": str(ROW_GROUP),
        })
        with table.update_spec() as spec:
            spec.add_identity("date")
        for f in days:
            table.append(pq.read_table(f))
        return None
    table = catalog.load_table("bench.orders")
    if op == "replace":
        fixed = pq.read_table(f"{directory}/input/fixed.parquet")
        start = time.perf_counter()
        table.overwrite(fixed, overwrite_filter=EqualTo("date", REPLACED))
        return {"ms": round((time.perf_counter() - start) * 1000, 1)}
    if op == "timetravel":
        # The snapshot right after loading the 30 days (one per append).
        start = time.perf_counter()
        table = catalog.load_table("bench.orders")
        loaded = table.snapshots()[29].snapshot_id
        data = table.scan(snapshot_id=loaded).to_arrow()
        return {"ms": round((time.perf_counter() - start) * 1000, 1), **summary(data)}
    return summary(table.scan().to_arrow())


def summary(table):
    return {"rows": table.num_rows, "checksum": round(pc.sum(table["amount"]).as_py(), 2)}


if __name__ == "__main__":
    directory, system, op = sys.argv[1:4]
    result = {"delta": delta, "iceberg": iceberg}[system](directory, op)
    if result is not None:
        print(json.dumps(result))
