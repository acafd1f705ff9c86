"""A multi-process soak of multi-table publishes on an S3 server.

Processes of the `logbook` CLI, started by four workers, race on one
warehouse: a publisher stages a generation of two dates in three tables
and publishes them as one; a production writer replaces other dates of
one table; maintenance compacts, expires and vacuums; a reader queries
the three tables in one statement. A fifth thread SIGKILLs a random
running process now and then, and the S3 endpoint may be a fault proxy
answering 503 before or after a request takes effect (fault_proxy.py).

Every read is checked against a model of the history:
- the three tables agree on every published date (one generation: no
  read sees part of a publish);
- an acknowledged publish or production write is visible to every read
  that started after it was acknowledged (nothing acknowledged lost);
- every value read was written by some attempt (nothing invented).
At the end the same checks run once more, and `logbook check` on every
table must be clean.

Usage: python3 soak.py LOGBOOK_BIN WAREHOUSE_URI SECONDS SEED REPORT.json
(S3 settings come from the AWS_* environment variables.)
"""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time

BIN, WAREHOUSE, SECONDS, SEED, REPORT = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
TABLES = ["agg", "mid", "up"]
PUBLISHED = [f"2026-01-0{i}" for i in range(1, 7)]  # written only by publishes
PRODUCTION = [f"2026-02-0{i}" for i in range(1, 4)]  # written only by production, in `up`
WORK = tempfile.mkdtemp(prefix="logbook-soak-")

lock = threading.Lock()
running = set()  # live Popen objects, for the killer
stop = threading.Event()
stats = {"ops": 0, "kills": 0, "failed": 0, "reads": 0, "publishes_acked": 0, "writes_acked": 0}
anomalies = []
attempted = set()  # every tag some write may have committed
acked_publish = {d: [] for d in PUBLISHED}  # (ack time, generation tag)
acked_write = {d: [] for d in PRODUCTION}


def cli(args, env_extra=None):
    """Run the CLI; returns (returncode, stdout, stderr, killed)."""
    env = dict(os.environ)
    env.pop("LOGBOOK_STAGE", None)
    env.update(env_extra or {})
    p = subprocess.Popen([BIN, "--warehouse", WAREHOUSE, *args], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with lock:
        running.add(p)
    out, err = p.communicate()
    with lock:
        running.discard(p)
        stats["ops"] += 1
        killed = p.returncode == -signal.SIGKILL
        if p.returncode != 0 and not killed:
            stats["failed"] += 1
    return p.returncode, out, err, killed


def csv_for(date, tag):
    path = os.path.join(WORK, f"{date}-{tag}.csv")
    with open(path, "w") as f:
        f.write("date,id,gen\n")
        for i in range(3):
            f.write(f"{date},{i},{tag}\n")
    return path


def must(args, env_extra=None):
    rc, out, err, _ = cli(args, env_extra)
    if rc != 0:
        sys.exit(f"set-up failed: logbook {' '.join(args)}: {err}")
    return out


def set_up():
    # The soak checks data, not scheduling: with production first on, the
    # production worker's back-to-back writes would hold every staged
    # (backfill) write back, and nothing would be published.
    must(["warehouse", "set", "production-first", "off"])
    for t in TABLES:
        must(["create", t, "--schema", "date:date,id:int64,gen:string", "--partition-by", "date"])
        for d in PUBLISHED:
            must(["write", t, "--date", d, csv_for(d, "g000000"), "--run-id", f"init-{t}-{d}"])
    for d in PRODUCTION:
        must(["write", "up", "--date", d, csv_for(d, "p000000"), "--run-id", f"init-{d}"])
    attempted.update({"g000000", "p000000"})


def publisher(rng):
    n = 0
    while not stop.is_set():
        n += 1
        tag, stage = f"g{n:06d}", f"s{n}"
        dates = rng.sample(PUBLISHED, 2)
        staged = True
        for t in TABLES:
            for d in dates:
                rc, _, _, _ = cli(["write", t, "--date", d, csv_for(d, tag), "--run-id", f"{tag}-{t}-{d}"],
                                  {"LOGBOOK_STAGE": stage})
                staged &= rc == 0
        if not staged:
            continue  # a stage missing a table's date is never published
        with lock:
            attempted.add(tag)
        # Publish until a definite answer: after a kill, publishing the
        # same stage again aborts the dead attempt or finds it published.
        while True:
            rc, out, err, killed = cli(["stage", "publish", stage])
            if killed:
                continue
            if rc == 0:
                now = time.monotonic()
                with lock:
                    stats["publishes_acked"] += 1
                    for d in dates:
                        acked_publish[d].append((now, tag))
            elif "no table" in err:
                # Published by an attempt whose answer was lost (killed
                # after its decision): it counts as acknowledged now.
                now = time.monotonic()
                with lock:
                    for d in dates:
                        acked_publish[d].append((now, tag))
            break


def production(rng):
    n = 0
    while not stop.is_set():
        n += 1
        tag, d = f"p{n:06d}", rng.choice(PRODUCTION)
        with lock:
            attempted.add(tag)
        rc, _, _, _ = cli(["write", "up", "--date", d, csv_for(d, tag), "--run-id", f"prod-{n}"])
        if rc == 0:
            now = time.monotonic()
            with lock:
                stats["writes_acked"] += 1
                acked_write[d].append((now, tag))


def maintenance(rng):
    while not stop.is_set():
        t = rng.choice(TABLES)
        op = rng.choice([["compact", t], ["expire", t, "--keep-last", "20"], ["vacuum", t]])
        cli(op)
        time.sleep(rng.uniform(0.2, 1.0))


QUERY = ("SELECT 'agg' AS t, CAST(date AS VARCHAR) AS d, min(gen) AS lo, max(gen) AS hi FROM agg GROUP BY date "
         "UNION ALL SELECT 'mid', CAST(date AS VARCHAR), min(gen), max(gen) FROM mid GROUP BY date "
         "UNION ALL SELECT 'up', CAST(date AS VARCHAR), min(gen), max(gen) FROM up GROUP BY date")


def judge(rows, started, what):
    """Check one read (rows of t, d, lo, hi) against the model."""
    seen = {}
    for r in rows:
        if r["lo"] != r["hi"]:
            anomalies.append(f"{what}: {r['t']} {r['d']} mixes {r['lo']} and {r['hi']} within a date")
        seen[(r["t"], r["d"])] = r["lo"]
    with lock:
        known = set(attempted)
        pubs = {d: [tag for at, tag in acked_publish[d] if at < started] for d in PUBLISHED}
        writes = {d: [tag for at, tag in acked_write[d] if at < started] for d in PRODUCTION}
    for d in PUBLISHED:
        gens = {seen.get((t, d)) for t in TABLES}
        if len(gens) != 1:
            anomalies.append(f"{what}: date {d} reads as {sorted(map(str, gens))} across the tables: part of a publish")
            continue
        g = gens.pop()
        if g not in known:
            anomalies.append(f"{what}: date {d} holds {g}, which nothing wrote")
        if pubs[d] and (g is None or g < max(pubs[d])):
            anomalies.append(f"{what}: date {d} holds {g} after {max(pubs[d])} was acknowledged")
    for d in PRODUCTION:
        g = seen.get(("up", d))
        if g not in known:
            anomalies.append(f"{what}: up {d} holds {g}, which nothing wrote")
        if writes[d] and (g is None or g < max(writes[d])):
            anomalies.append(f"{what}: up {d} holds {g} after {max(writes[d])} was acknowledged")


def reader():
    while not stop.is_set():
        started = time.monotonic()
        rc, out, err, killed = cli(["sql", QUERY, "--format", "json"])
        if rc != 0:
            continue
        with lock:
            stats["reads"] += 1
        judge(json.loads(out), started, f"read {stats['reads']}")


def killer(rng):
    while not stop.is_set():
        time.sleep(rng.uniform(0.5, 3.0))
        with lock:
            live = list(running)
        if live:
            p = rng.choice(live)
            try:
                p.send_signal(signal.SIGKILL)
                with lock:
                    stats["kills"] += 1
            except ProcessLookupError:
                pass


def main():
    rng = random.Random(SEED)
    set_up()
    workers = [
        threading.Thread(target=publisher, args=(random.Random(rng.random()),)),
        threading.Thread(target=production, args=(random.Random(rng.random()),)),
        threading.Thread(target=maintenance, args=(random.Random(rng.random()),)),
        threading.Thread(target=reader),
        threading.Thread(target=killer, args=(random.Random(rng.random()),)),
    ]
    for w in workers:
        w.start()
    time.sleep(SECONDS)
    stop.set()
    for w in workers:
        w.join()
    # Recovery: a publish killed at the end is finished by publishing its
    # stage again; then the final read and the integrity checks.
    started = time.monotonic()
    rc, out, err, _ = cli(["sql", QUERY, "--format", "json"])
    if rc != 0:
        anomalies.append(f"final read failed: {err}")
    else:
        judge(json.loads(out), started, "final read")
    for t in TABLES:
        rc, out, err, _ = cli(["check", t])
        if rc != 0:
            anomalies.append(f"check {t}: {out} {err}")
    if stats["publishes_acked"] == 0:
        # A soak that published nothing checked no publish.
        anomalies.append("no publish was acknowledged: the soak tested nothing of publishing")
    report = dict(stats, anomalies=anomalies, seconds=SECONDS, seed=SEED)
    with open(REPORT, "w") as f:
        json.dump(report, f, indent=2)
    print(json.dumps({k: v for k, v in report.items() if k != "anomalies"}), f"anomalies: {len(anomalies)}")
    for a in anomalies[:20]:
        print("  ", a)
    sys.exit(1 if anomalies else 0)


main()
