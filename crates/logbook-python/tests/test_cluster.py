"""``Warehouse(..., cluster="df://...")``: queries planned here run on a
scheduler and two executors started from the logbook binary, with the
answers one process gives."""

import os
import socket
import subprocess
import time

import pyarrow as pa
import pytest

import pylogbook as lb

from conftest import REVENUE_SQL


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(wh, tmp_path):
    cli = os.environ["LOGBOOK_BIN"]
    scheduler = f"127.0.0.1:{free_port()}"
    procs, logs = [], []

    def start(name, *args):
        log = tmp_path / f"{name}.log"
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [cli, "--warehouse", wh.uri, "cluster", *args],
                stdout=subprocess.DEVNULL,
                stderr=open(log, "w"),
            )
        )
        return log

    def wait_for(log, text):
        deadline = time.time() + 60
        while text not in log.read_text():
            assert time.time() < deadline, log.read_text()
            time.sleep(0.1)

    wait_for(start("scheduler", "scheduler", "--bind", scheduler), "listening")
    executors = [
        start(
            f"executor-{i}",
            "executor",
            "--scheduler",
            scheduler,
            "--bind",
            f"127.0.0.1:{free_port()}",
            "--grpc-port",
            str(free_port()),
            "--concurrent-tasks",
            "1",
        )
        for i in range(2)
    ]
    for log in executors:
        wait_for(log, "registration succeed")
    yield f"df://{scheduler}", executors
    for p in procs:
        p.kill()
        p.wait()


def sorted_rows(result) -> list:
    table = pa.table(result)
    return sorted(table.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


def test_queries_on_a_cluster_answer_as_in_this_process(wh, cluster):
    url, executors = cluster
    remote = lb.Warehouse(wh.uri, cluster=url)
    queries = [
        ("SELECT date, count(*) AS n, sum(amount) AS amount FROM orders GROUP BY date", {}),
        (REVENUE_SQL, {"logical_date": "2026-03-15"}),
        ("SELECT * FROM asof('customers', DATE '2026-03-25')", {}),
    ]
    for sql, kw in queries:
        here = sorted_rows(wh.sql(sql, **kw))
        assert here, sql
        assert sorted_rows(remote.sql(sql, **kw)) == here, sql
    assert sum(log.read_text().count("Finished task") for log in executors) > 0


def test_a_cluster_address_that_is_not_df_host_port_is_refused(wh):
    with pytest.raises(lb.InvalidInputError, match="df://HOST:PORT"):
        lb.Warehouse(wh.uri, cluster="http://127.0.0.1:1")
