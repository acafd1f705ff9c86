"""DuckDB's side of the analyst workload (analyst_queries.json), on
logbook's own Parquet files, with the same thread count.

Usage: analyst_side.py DIR QUERY [THREADS] [MEMORY_LIMIT]
           [--s3 ENDPOINT PREFIX]
With --s3 the files are read from an S3 server at ENDPOINT (path-style,
plain HTTP) through DuckDB's httpfs extension, as shipped by the
duckdb-ext-httpfs package (loaded by path: nothing downloaded); PREFIX
(s3://bucket/key) stands for DIR in the files' paths.
"""
import argparse
import importlib.metadata
import json
import re
import resource
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc


def main(directory: str, name: str, threads: int, memory_limit: str | None, s3: list[str] | None) -> None:
    queries = json.loads((Path(__file__).parent / "analyst_queries.json").read_text())
    files = json.loads(Path(directory, "files.json").read_text())
    if s3:
        local = Path(directory).resolve()
        remote = s3[1].rstrip("/")
        # Every file's path moved to the bucket (relative_to fails on one
        # outside DIR: nothing is read locally by mistake).
        for key, value in files.items():
            if isinstance(value, list):
                files[key] = [f"{remote}/{Path(p).relative_to(local)}" for p in value]
    query = queries[name]
    sql = query.get("duckdb", query["sql"])
    for key, value in files.items():
        sql = sql.replace("{" + key + "}", str(value))
    con = duckdb.connect(config={"autoinstall_known_extensions": "false", "autoload_known_extensions": "false"})
    con.execute(f"SET threads TO {threads}")
    if s3:
        httpfs = next(str(f.locate()) for f in importlib.metadata.files("duckdb-ext-httpfs") or []
                      if f.name == "httpfs.duckdb_extension")
        con.execute(f"LOAD '{httpfs}'")
        endpoint = s3[0].removeprefix("http://")
        con.execute(f"CREATE SECRET (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1', "
                    f"ENDPOINT '{endpoint}', URL_STYLE 'path', USE_SSL false)")
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
    parser = argparse.ArgumentParser()
    parser.add_argument("directory")
    parser.add_argument("name")
    parser.add_argument("threads", nargs="?", type=int, default=2)
    parser.add_argument("memory_limit", nargs="?")
    parser.add_argument("--s3", nargs=2, metavar=("ENDPOINT", "PREFIX"))
    args = parser.parse_args()
    main(args.directory, args.name, args.threads, args.memory_limit, args.s3)
