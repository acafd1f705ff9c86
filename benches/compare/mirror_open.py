"""Timing shared by delta_open.sh and iceberg_open.sh: open each of the three
tables mirror_history.sh builds (h10, h3000, h3000v) alternately, `rounds`
times, and print the medians as a Markdown table with the ratio to h10."""

import statistics
import time

LABELS = {"h10": "10", "h3000": "3,000", "h3000v": "3,000, then expire --keep-last 10 and vacuum"}


def report(work, rounds, what, open_table):
    """`open_table(table_dir)` opens (and plans) one table; `what` names the
    timed step in the table's header."""
    times = {n: [] for n in LABELS}
    for _ in range(rounds):
        for n in times:
            t0 = time.perf_counter()
            open_table(f"{work}/{n}/t")
            times[n].append((time.perf_counter() - t0) * 1000)
    base = statistics.median(times["h10"])
    print(f"| commits | median {what} ms | ratio to 10 |")
    print("|---|---|---|")
    for n, ts in times.items():
        print(f"| {LABELS[n]} | {statistics.median(ts):.1f} | {statistics.median(ts) / base:.2f} |")
