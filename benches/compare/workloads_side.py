"""Delta Lake's and Iceberg's side of workloads 2, 3 and 6 (see workloads.rs).

Usage: workloads_side.py DIR (delta|iceberg) OP [N]
  history N            grow to N commits (one-row replaces cycling over 30
                       dates), then time opening the table and one commit
  backfill-prepare     a 365-date table from input/backfill/day-NNN.parquet
  backfill WRITERS     replace the 90 dates of input/backfill/fixed-NNN.parquet
  compaction-prepare   30 dates of 100 small files each (Delta only)
  compaction           compact them (Delta's optimize.compact; Iceberg: none in pyiceberg)
Prints one JSON object.
"""
import glob
import json
import statistics
import sys
import threading
import time

import pyarrow.parquet as pq

from formats_side import ROW_GROUP, iceberg_catalog, summary

REPS = 5
BACKFILL_FROM, BACKFILL_COUNT = 200, 90
SMALL_FILES = 100


def ms(start):
    return (time.perf_counter() - start) * 1000


def day(i):
    import datetime
    return (datetime.date(2020, 1, 1) + datetime.timedelta(days=i)).isoformat()


class Delta:
    def __init__(self, directory, sub):
        from deltalake import WriterProperties
        self.path = f"{directory}/{sub}/delta"
        self.props = WriterProperties(compression="SNAPPY", max_row_group_size=ROW_GROUP)

    def replace(self, table_or_path, date, data):
        from deltalake import write_deltalake
        write_deltalake(table_or_path, data, mode="overwrite", predicate=f"date = '{date}'",
                        partition_by=["date"], writer_properties=self.props)

    def append(self, data):
        from deltalake import write_deltalake
        write_deltalake(self.path, data, mode="append", partition_by=["date"],
                        writer_properties=self.props)

    def version(self):
        from deltalake import DeltaTable
        try:
            return DeltaTable(self.path).version()
        except Exception:
            return -1

    def open(self):
        from deltalake import DeltaTable
        return DeltaTable(self.path)

    def read(self):
        return self.open().to_pyarrow_table()


class Iceberg:
    def __init__(self, directory, sub):
        self.catalog = iceberg_catalog(directory, f"{sub}-iceberg")
        self.name = "bench.orders"

    def create(self, schema):
        self.catalog.create_namespace("bench")
        table = self.catalog.create_table(self.name, schema=schema, properties={
            "write.parquet.compression-codec": "snappy",
            "write.parquet.row-group-limit": str(ROW_GROUP),
        })
        with table.update_spec() as spec:
            spec.add_identity("date")

    def exists(self):
        return self.catalog.table_exists(self.name)

    def open(self):
        return self.catalog.load_table(self.name)

    def replace(self, table, date, data):
        from pyiceberg.expressions import EqualTo
        table.overwrite(data, overwrite_filter=EqualTo("date", date))

    def read(self):
        return self.open().scan().to_arrow()


def tiny_batch(directory, i):
    """One row of date (i % 30), the schema of the input files."""
    import pyarrow as pa
    src = pq.read_table(f"{directory}/input/day-{i % 30:02d}.parquet").slice(0, 1)
    return pa.Table.from_batches(src.to_batches(), schema=src.schema)


def history(directory, system, target):
    s = (Delta if system == "delta" else Iceberg)(directory, "history")
    if system == "delta":
        # Versions count from 0: after the first write the table has 1 commit.
        commits = s.version() + 1
        table = s.open() if commits > 0 else None
    else:
        if not s.exists():
            s.create(pq.read_schema(f"{directory}/input/day-00.parquet"))
        table = s.open()
        commits = len(table.snapshots())

    def commit(i):
        nonlocal table
        data = tiny_batch(directory, i)
        date = data.column("date")[0].as_py().isoformat()
        if system == "delta":
            s.replace(table if table is not None else s.path, date, data)
            if table is None:
                table = s.open()
            else:
                table.update_incremental()
        else:
            s.replace(table, date, data)

    while commits < target:
        commit(commits)
        commits += 1
    opens, latencies = [], []
    for _ in range(REPS):
        start = time.perf_counter()
        s.open()
        opens.append(ms(start))
        start = time.perf_counter()
        commit(commits)
        latencies.append(ms(start))
        commits += 1
    return {"commits": target, "open_ms": round(statistics.median(opens), 2),
            "commit_ms": round(statistics.median(latencies), 2)}


def backfill_prepare(directory, system):
    days = sorted(glob.glob(f"{directory}/input/backfill/day-*.parquet"))
    if system == "delta":
        s = Delta(directory, "backfill")
        for f in days:
            s.append(pq.read_table(f))
    else:
        s = Iceberg(directory, "backfill")
        s.create(pq.read_schema(days[0]))
        table = s.open()
        for f in days:
            table.append(pq.read_table(f))
    return None


def backfill(directory, system, writers):
    s = (Delta if system == "delta" else Iceberg)(directory, "backfill")
    retries = [0]
    lock = threading.Lock()

    def work(w):
        for i in range(BACKFILL_FROM, BACKFILL_FROM + BACKFILL_COUNT):
            if i % writers != w:
                continue
            data = pq.read_table(f"{directory}/input/backfill/fixed-{i:03d}.parquet")
            while True:
                try:
                    if system == "delta":
                        s.replace(s.path, day(i), data)
                    else:
                        s.replace(s.open(), day(i), data)
                    break
                except Exception as e:  # a concurrent commit won: reload and retry
                    if "onflict" not in str(e) and "CommitFailed" not in type(e).__name__:
                        raise
                    with lock:
                        retries[0] += 1

    start = time.perf_counter()
    threads = [threading.Thread(target=work, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = ms(start)
    return {"ms": round(elapsed, 1), "retries": retries[0], **summary(s.read())}


def compaction_prepare(directory, system):
    if system != "delta":
        return None
    import pyarrow as pa
    s = Delta(directory, "compaction")
    days = [pq.read_table(f) for f in sorted(glob.glob(f"{directory}/input/day-*.parquet"))]
    per_file = days[0].num_rows // SMALL_FILES
    # Append k writes slice k of every date: one small file per date.
    for k in range(SMALL_FILES):
        s.append(pa.concat_tables([d.slice(k * per_file, per_file) for d in days]))
    return None


def compaction(directory, system):
    if system != "delta":
        return {"ms": None, "note": "pyiceberg 0.10 has no compaction"}
    s = Delta(directory, "compaction")
    table = s.open()
    before = len(table.file_uris())
    start = time.perf_counter()
    table.optimize.compact()
    elapsed = ms(start)
    after = len(s.open().file_uris())
    return {"ms": round(elapsed, 1), "files_before": before, "files_after": after, **summary(s.read())}


if __name__ == "__main__":
    directory, system, op = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else None
    result = {
        "history": lambda: history(directory, system, n),
        "backfill-prepare": lambda: backfill_prepare(directory, system),
        "backfill": lambda: backfill(directory, system, n),
        "compaction-prepare": lambda: compaction_prepare(directory, system),
        "compaction": lambda: compaction(directory, system),
    }[op]()
    if result is not None:
        print(json.dumps(result))
