"""DuckDB's side of the as-of join comparison, on logbook's own Parquet files."""
import json
import sys
import time

import duckdb

def main(directory: str, which: str) -> None:
    files = json.load(open(f"{directory}/files.json"))
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    start = time.perf_counter()
    con.execute(f"CREATE OR REPLACE VIEW orders AS SELECT * FROM read_parquet({files['facts']!r}, hive_partitioning=false)")
    con.execute(f"CREATE OR REPLACE VIEW customers AS SELECT * FROM read_parquet({files['dimension']!r}, hive_partitioning=false)")
    day = files["one_day"]
    if which == "one":
        sql = f"""SELECT c.region, sum(o.amount) AS revenue FROM orders o JOIN customers c
                  ON o.customer = c.customer AND c.valid_from <= DATE '{day}'
                  AND (c.valid_to IS NULL OR DATE '{day}' < c.valid_to)
                  WHERE o.date = DATE '{day}' GROUP BY c.region"""
        col = 1
    else:
        sql = """SELECT o.date, c.region, sum(o.amount) AS revenue FROM orders o JOIN customers c
                 ON o.customer = c.customer AND o.date >= c.valid_from
                 AND (c.valid_to IS NULL OR o.date < c.valid_to) GROUP BY o.date, c.region"""
        col = 2
    rows = con.execute(sql).fetchall()
    ms = (time.perf_counter() - start) * 1000
    print(json.dumps({"ms": round(ms, 1), "rows": len(rows), "checksum": round(sum(r[col] for r in rows), 2)}))

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
