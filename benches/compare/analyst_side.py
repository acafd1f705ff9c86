"""DuckDB's side of the analyst workload (analyst_queries.json), on
logbook's own Parquet files, with the same thread count."""
import json
import re
import resource
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc


def main(directory: str, name: str, threads: int, memory_limit: str | None) -> None:
    queries = json.loads((Path(__file__).parent / "analyst_queries.json").read_text())
    files = json.loads(Path(directory, "files.json").read_text())
    query = queries[name]
    sql = query.get("duckdb", query["sql"])
    for key, value in files.items():
        sql = sql.replace("{" + key + "}", str(value))
    con = duckdb.connect()
    con.execute(f"SET threads TO {threads}")
    if memory_limit:
        con.execute(f"SET memory_limit = '{memory_limit}'")
    start = time.perf_counter()
    # Only the views the query names, as logbook opens only the tables it names.
    for view, key in (("orders", "facts"), ("customers", "dimension"), ("orders_at_snapshot", "snapshot_files")):
        if not re.search(rf"\b{view}\b", sql):
            continue
        con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM read_parquet({files[key]!r}, hive_partitioning=false)")
    # Arrow, as logbook's side collects: no Python object per value.
    result = con.execute(sql).fetch_arrow_table()
    ms = (time.perf_counter() - start) * 1000
    last = result.column(result.num_columns - 1)
    checksum = pc.sum(last.cast(pa.float64())).as_py() or 0.0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"ms": round(ms, 1), "rows": result.num_rows, "checksum": round(checksum, 2), "bytes": None, "peak_mib": round(peak)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2, sys.argv[4] if len(sys.argv) > 4 else None)
