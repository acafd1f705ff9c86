"""The analyst workload (analyst_queries.json) as whole processes: the
release `logbook sql` against the DuckDB CLI on the same live Parquet
files, each process timed from its start to its exit, with its CPU time
from the kernel (wait4's rusage), and its peak resident memory from the
kernel in a run of its own under GNU time.

Why not wait4's peak: the kernel carries a process's high-water mark
across exec, and Python starts children with vfork, so a child's
ru_maxrss is at least the harness's own peak (67 to 68 MiB here: no
query of either system read less). GNU time forks the program
from a process of about 2 MiB, whose peak it reports (`%M`).

This is issue 42's setup: what an analyst waits for at a shell, start-up
and printing included. `analyst.sh` times the query inside one process
instead (the session made before the clock starts).

Peak memory splits into the program's code and data mapped from its
file (RssFile: the pages of code it ran, and the pages around them) and
what it allocated (RssAnon). The kernel keeps no peak of each, so after
the timed rounds every query runs once more per system with its
/proc/PID/status read every millisecond (a sampler that would disturb
the timings), and the largest values seen are reported.

Usage: analyst_cli.py DIR LOGBOOK DUCKDB ROUNDS [QUERY...]
Prints one JSON line per process run, then nothing else; the report is
made by analyst_cli.sh.
"""
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

TIME = "/usr/bin/time"  # GNU time (Debian's `time` package)


def logbook_cmd(binary: str, directory: str, query: dict, files: dict) -> list[str]:
    sql = fill(query["sql"], files)
    cmd = [binary, "--warehouse", directory, "sql", "--format", "csv"]
    if "logical_date" in query:
        cmd += ["--logical-date", fill(query["logical_date"], files)]
    return cmd + [sql]


def duckdb_cmd(binary: str, query: dict, files: dict) -> list[str]:
    sql = fill(query.get("duckdb", query["sql"]), files)
    # Only the views the query names, as logbook opens only the tables it names.
    views = []
    for view, key in (("orders", "facts"), ("customers", "dimension"), ("orders_at_snapshot", "snapshot_files")):
        if re.search(rf"\b{view}\b", sql):
            views.append(f"CREATE VIEW {view} AS SELECT * FROM read_parquet({files[key]!r}, hive_partitioning=false)")
    script = "; ".join(["SET autoinstall_known_extensions = false", *views, sql])
    # -batch: no interactive prompt; -init /dev/null: no ~/.duckdbrc.
    return [binary, "-batch", "-init", "/dev/null", "-csv", ":memory:", "-c", script]


def fill(text: str, files: dict) -> str:
    for key, value in files.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def sampled(cmd: list[str]) -> dict:
    """The largest RssAnon and RssFile seen, reading /proc every millisecond."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    peak = {"RssAnon": 0, "RssFile": 0}
    while proc.poll() is None:
        try:
            for line in open(f"/proc/{proc.pid}/status"):
                key = line.split(":")[0]
                if key in peak:
                    peak[key] = max(peak[key], int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            break
        time.sleep(0.001)
    return {"anon_mib": round(peak["RssAnon"] / 1024), "file_mib": round(peak["RssFile"] / 1024)}


def peak_mib(cmd: list[str]) -> int:
    """The program's peak resident memory, from GNU time (see the doc)."""
    with tempfile.NamedTemporaryFile("r") as out:
        subprocess.run([TIME, "-f", "%M", "-o", out.name, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        return round(int(out.read().split()[-1]) / 1024)


def run(cmd: list[str]) -> dict:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Both pipes drained at once (a child filling stderr first would hang a
    # sequential read), without reaping the child: wait4 does, for its
    # rusage (`communicate` would reap it first).
    errors = []
    reader = threading.Thread(target=lambda: errors.append(proc.stderr.read()))
    reader.start()
    out = proc.stdout.read()
    reader.join()
    err = errors[0]
    _, status, usage = os.wait4(proc.pid, 0)
    ms = (time.perf_counter() - start) * 1000
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}")
    rows = list(csv.reader(io.StringIO(out.decode())))[1:]
    checksum = sum(float(r[-1]) for r in rows if r and r[-1] != "")
    return {
        "ms": round(ms, 1),
        "cpu_ms": round((usage.ru_utime + usage.ru_stime) * 1000, 1),
        "peak_mib": peak_mib(cmd),
        "rows": len(rows),
        "checksum": round(checksum, 2),
    }


def main() -> None:
    directory, logbook, duckdb, rounds, *names = sys.argv[1:]
    queries = json.loads((Path(__file__).parent / "analyst_queries.json").read_text())
    files = json.loads(Path(directory, "files.json").read_text())
    names = names or [k for k in queries if not k.startswith("_")]
    commands = {
        name: (
            ("logbook", logbook_cmd(logbook, directory, queries[name], files)),
            ("duckdb", duckdb_cmd(duckdb, queries[name], files)),
        )
        for name in names
    }
    for _ in range(int(rounds)):
        for name in names:
            for system, cmd in commands[name]:
                print(json.dumps({"system": system, "query": name, **run(cmd)}), flush=True)
    for name in names:
        for system, cmd in commands[name]:
            print(json.dumps({"system": system, "query": name, "split": sampled(cmd)}), flush=True)


if __name__ == "__main__":
    main()
