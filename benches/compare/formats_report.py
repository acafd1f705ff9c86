"""Markdown tables of medians and ratios from formats.sh's results file.

Each line is `SYSTEM[-WORKLOAD] JSON`; workloads: (none) replace, -tt time
travel, -bf1/-bf2 backfill, -h history, -cp compaction, -verify rows after.
"""
import json
import statistics
import sys
from collections import defaultdict

SYSTEMS = ("logbook", "delta", "iceberg")


def load(path):
    runs = defaultdict(list)
    for line in open(path):
        tag, payload = line.split(" ", 1)
        system, _, workload = tag.partition("-")
        if system == "raw":  # "raw-writer": a system, not a workload
            system, workload = tag, ""
        payload = payload.strip()
        # An empty payload: the run was stopped (formats.sh's time limit).
        runs[(workload, system)].append(
            json.loads(payload) if payload else {"ms": None, "note": "did not finish"})
    return runs


def med(rows, key="ms"):
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else None


def same(results):
    keys = {(r["rows"], r["checksum"]) for r in results if "rows" in r}
    return "all systems hold the same rows" if len(keys) == 1 else f"MISMATCH: {sorted(keys)}"


def timed_table(runs, workload, title, systems=SYSTEMS):
    print(f"\n| system | median ms ({title}) | ratio to logbook | rows | checksum |")
    print("|---|---|---|---|---|")
    base = med(runs[(workload, "logbook")])
    last = []
    for system in systems:
        rs = runs.get((workload, system))
        if not rs:
            continue
        m = med(rs)
        r = rs[-1]
        last.append(r)
        cell = "n/a" if m is None else f"{m:.1f} (n={len(rs)})"
        ratio = "n/a" if m is None else f"{m / base:.2f}"
        print(f"| {system} | {cell} | {ratio} | {r.get('rows', '-')} | {r.get('checksum', r.get('note', '-'))} |")
    print("\n" + same(last))


def main(path):
    runs = load(path)
    print("| system | median ms (replace one date) | ratio to logbook |")
    print("|---|---|---|")
    base = med(runs[("", "logbook")])
    for system in SYSTEMS + ("raw-writer",):
        m = med(runs[("", system)])
        print(f"| {system} | {m:.1f} | {m / base:.2f} |")
    print("\n" + same([runs[("verify", s)][0] for s in SYSTEMS]) + " after the replaces")
    timed_table(runs, "tt", "read the version before the replaces")
    for w in ("bf1", "bf2"):
        timed_table(runs, w, f"replace 90 of 365 dates, {w[-1]} writer(s)")
        retries = {s: [r.get("retries", 0) for r in runs[(w, s)]] for s in ("delta", "iceberg")}
        print(f"commit retries per round: {retries}")
    print("\n| system | commits | open ms | commit ms | commit ratio to 10 commits |")
    print("|---|---|---|---|---|")
    for system in SYSTEMS:
        rows = sorted(runs[("h", system)], key=lambda r: r["commits"])
        first = rows[0]["commit_ms"]
        for r in rows:
            print(f"| {system} | {r['commits']} | {r['open_ms']:.1f} | {r['commit_ms']:.1f} | {r['commit_ms'] / first:.2f} |")
    timed_table(runs, "cp", "compact 30 dates x 100 small files")
    for system in ("logbook", "delta"):
        r = runs[("cp", system)][-1]
        print(f"{system}: {r['files_before']} files -> {r['files_after']}")


if __name__ == "__main__":
    main(sys.argv[1])
