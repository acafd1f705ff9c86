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


def start_cluster(wh, tmp_path, *extra):
    """A scheduler and two executors over ``wh``, each given ``extra``
    arguments; yields the scheduler's URL, the executors' logs."""
    cli = os.environ["LOGBOOK_BIN"]
    scheduler = f"127.0.0.1:{free_port()}"
    procs, logs = [], []

    def start(name, *args):
        log = tmp_path / f"{name}.log"
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [cli, "--warehouse", wh.uri, "cluster", *args, *extra],
                stdout=subprocess.DEVNULL,
                stderr=open(log, "w"),
            )
        )
        return log

    def wait_for(log, *texts):
        deadline = time.time() + 60
        while not any(t in log.read_text() for t in texts):
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
        # Tasks pushed (plain) or fetched (TLS).
        wait_for(log, "registration succeed", "Starting poll work loop")
    try:
        yield f"df://{scheduler}", executors
    finally:
        for p in procs:
            p.kill()
            p.wait()


@pytest.fixture
def cluster(wh, tmp_path):
    yield from start_cluster(wh, tmp_path)


def certificates(directory):
    """A CA, a certificate it signs for the cluster's processes and one for
    the client (``openssl``, for 127.0.0.1)."""
    directory.mkdir()
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    (directory / "leaf.ext").write_text(
        "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
        "basicConstraints=CA:FALSE\n"
    )
    openssl("req", "-x509", "-days", "1", "-subj", "/CN=test ca", *key,
            "-keyout", "ca.key", "-out", "ca.pem")
    for leaf in ["node", "client"]:
        openssl("req", "-subj", f"/CN=test {leaf}", *key, "-keyout", f"{leaf}.key",
                "-out", f"{leaf}.csr")
        openssl("x509", "-req", "-in", f"{leaf}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "1", "-extfile", "leaf.ext", "-out", f"{leaf}.pem")
    return directory


@pytest.fixture
def tls_cluster(wh, tmp_path):
    certs = certificates(tmp_path / "certs")
    tls = ["--tls-cert", certs / "node.pem", "--tls-key", certs / "node.key",
           "--tls-ca", certs / "ca.pem"]
    for url, executors in start_cluster(wh, tmp_path, *map(str, tls)):
        yield url, executors, certs


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


def test_a_cluster_over_mutual_tls_answers_a_client_with_a_certificate_from_its_ca(wh, tls_cluster):
    url, executors, certs = tls_cluster
    time.sleep(0.5)  # the executors' first polls
    remote = lb.Warehouse(
        wh.uri,
        cluster=url,
        cluster_ca=str(certs / "ca.pem"),
        cluster_cert=str(certs / "client.pem"),
        cluster_key=certs / "client.key",  # a path works as well as a str
    )
    sql = "SELECT date, count(*) AS n, max(amount) AS top FROM orders GROUP BY date"
    here = sorted_rows(wh.sql(sql))
    assert here
    assert sorted_rows(remote.sql(sql)) == here
    assert sum(log.read_text().count("Finished task") for log in executors) > 0
    # Without a certificate the cluster refuses, and says what may be wrong.
    with pytest.raises(lb.LogbookError, match="serves TLS"):
        lb.Warehouse(wh.uri, cluster=url).sql(sql)


def test_cluster_tls_files_go_together_and_must_be_pem(wh, tmp_path):
    with pytest.raises(lb.InvalidInputError, match="go together"):
        lb.Warehouse(wh.uri, cluster="df://127.0.0.1:1", cluster_ca="ca.pem")
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(lb.InvalidInputError, match="bad.pem: not a PEM file"):
        lb.Warehouse(
            wh.uri,
            cluster="df://127.0.0.1:1",
            cluster_ca=str(bad),
            cluster_cert=str(bad),
            cluster_key=str(bad),
        )
