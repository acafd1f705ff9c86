//! `logbook cluster`: a scheduler and two executors as real processes on
//! loopback, answering the analyst workload exactly as one process does.

use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

const DAYS: u32 = 8;
const PER_DAY: u64 = 375_000;
const CUSTOMERS: u64 = 20_000;

/// A free loopback port (bound and released: the process binds it next).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Processes killed when the test ends, whatever happens.
struct Processes {
    children: Vec<(String, Child)>,
    logs: PathBuf,
}

impl Drop for Processes {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Processes {
    fn start(&mut self, name: &str, wh: &Path, args: &[&str]) {
        let log = std::fs::File::create(self.logs.join(format!("{name}.log"))).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_logbook"))
            .arg("--warehouse")
            .arg(wh)
            .args(args)
            .env_remove("LOGBOOK_WAREHOUSE")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start logbook");
        self.children.push((name.to_string(), child));
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.logs.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Wait until `name`'s log says `what` (or fail with the log).
    fn wait_for(&self, name: &str, what: &str) {
        self.wait_for_any(name, &[what]);
    }

    /// Wait until `name`'s log says one of `what` (or fail with the log).
    fn wait_for_any(&self, name: &str, what: &[&str]) {
        let start = Instant::now();
        while !what.iter().any(|w| self.log(name).contains(w)) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{name} did not say {what:?}:\n{}",
                self.log(name)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn kill(&mut self, name: &str) {
        let (_, child) = self.children.iter_mut().find(|(n, _)| n == name).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// A scheduler and `executors` executors (one task at a time each) over
/// `wh`, each executor with its own work directory under `dir`.
struct TestCluster {
    processes: Processes,
    url: String,
    /// The executors' Flight addresses.
    executors: Vec<String>,
}

fn start_cluster(dir: &Path, wh: &Path, executors: usize) -> TestCluster {
    start_cluster_with(dir, wh, executors, &[])
}

/// A cluster whose every process is given `extra` arguments (TLS).
fn start_cluster_with(dir: &Path, wh: &Path, executors: usize, extra: &[&str]) -> TestCluster {
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let mut processes = Processes {
        children: Vec::new(),
        logs,
    };
    let scheduler = format!("127.0.0.1:{}", free_port());
    processes.start(
        "scheduler",
        wh,
        &[
            "cluster",
            "scheduler",
            "--bind",
            &scheduler,
            "--executor-timeout",
            "5s",
        ]
        .iter()
        .chain(extra)
        .copied()
        .collect::<Vec<_>>(),
    );
    processes.wait_for("scheduler", "listening");
    let mut addresses = Vec::new();
    for i in 0..executors {
        let work = dir.join(format!("executor-{i}"));
        std::fs::create_dir_all(&work).unwrap();
        let bind = format!("127.0.0.1:{}", free_port());
        let grpc = free_port().to_string();
        processes.start(
            &format!("executor-{i}"),
            wh,
            &[
                "cluster",
                "executor",
                "--scheduler",
                &scheduler,
                "--bind",
                &bind,
                "--grpc-port",
                &grpc,
                "--concurrent-tasks",
                "1",
                "--heartbeat",
                "1s",
                "--work-dir",
                work.to_str().unwrap(),
            ]
            .iter()
            .chain(extra)
            .copied()
            .collect::<Vec<_>>(),
        );
        addresses.push(bind);
    }
    for i in 0..executors {
        // Ballista logs one or the other: pushed tasks, or fetched (TLS).
        processes.wait_for_any(
            &format!("executor-{i}"),
            &["registration succeed", "Starting poll work loop"],
        );
    }
    TestCluster {
        processes,
        url: format!("df://{scheduler}"),
        executors: addresses,
    }
}

fn day(i: u32) -> String {
    format!("2026-01-{:02}", i + 1)
}

/// 3M orders over 8 days (integer amounts: sums are exact in any order)
/// and a customer dimension whose regions move on day 4.
fn analyst_warehouse(dir: &Path) -> PathBuf {
    let wh = dir.join("wh");
    ok(&logbook(
        &wh,
        &[
            "create",
            "orders",
            "--schema",
            "date:date,order_id:int64,customer:int64,amount:int64",
            "--partition-by",
            "date",
        ],
    ));
    for i in 0..DAYS {
        let sql = format!(
            "SELECT logical_date() AS date, value + {offset} AS order_id, (value * 7919) % {CUSTOMERS} AS customer, (value * 7) % 10000 AS amount FROM range(0, {PER_DAY})",
            offset = u64::from(i) * PER_DAY
        );
        ok(&logbook(
            &wh,
            &["run", "orders", "--date", &day(i), "--sql", &sql],
        ));
    }
    ok(&logbook(
        &wh,
        &[
            "create",
            "customers",
            "--schema",
            "customer:int64,region:string",
            "--scd2",
            "--key",
            "customer",
        ],
    ));
    let regions = ["Berlin", "Hamburg", "Munich", "Cologne"];
    let states = |path: &Path, step: u64, shift: usize| {
        let mut f = std::fs::File::create(path).unwrap();
        writeln!(f, "customer,region").unwrap();
        for c in (0..CUSTOMERS).step_by(step as usize) {
            writeln!(f, "{c},{}", regions[(c as usize + shift) % regions.len()]).unwrap();
        }
    };
    let first = dir.join("customers-1.csv");
    states(&first, 1, 0);
    let moved = dir.join("customers-2.csv");
    states(&moved, 3, 1);
    for (effective, file) in [("2026-01-01", &first), ("2026-01-04", &moved)] {
        ok(&logbook(
            &wh,
            &[
                "apply",
                "customers",
                "--effective",
                effective,
                file.to_str().unwrap(),
            ],
        ));
    }
    wh
}

/// The analyst workload of `benches/compare/analyst_queries.json` on this
/// data, each with an ORDER BY so that answers compare as text; and the
/// arguments each runs with.
fn workload() -> Vec<(&'static str, String, Vec<String>)> {
    let one_day = day(5);
    let as_of = vec!["--logical-date".to_string(), one_day.clone()];
    vec![
        ("point lookup", "SELECT * FROM orders WHERE order_id = 1234567".into(), vec![]),
        (
            "selective range",
            "SELECT count(*) AS n, sum(amount) AS revenue FROM orders WHERE order_id BETWEEN 1000000 AND 1200000".into(),
            vec![],
        ),
        (
            "top 10 customers",
            "SELECT customer, sum(amount) AS revenue FROM orders WHERE date BETWEEN DATE '2026-01-02' AND DATE '2026-01-07' GROUP BY customer ORDER BY revenue DESC, customer LIMIT 10".into(),
            vec![],
        ),
        (
            "distinct per day",
            "SELECT date, count(DISTINCT customer) AS customers FROM orders GROUP BY 1 ORDER BY 1".into(),
            vec![],
        ),
        (
            "as-of one date",
            "SELECT c.region, sum(o.amount) AS revenue FROM orders o JOIN customers c ON o.customer = c.customer WHERE o.date = logical_date() GROUP BY c.region ORDER BY 1".into(),
            as_of,
        ),
        (
            "as-of range join",
            "SELECT o.date, c.region, sum(o.amount) AS revenue, count(*) AS n FROM orders o JOIN customers c ON o.customer = c.customer AND o.date >= c.valid_from AND (c.valid_to IS NULL OR o.date < c.valid_to) GROUP BY o.date, c.region ORDER BY 1, 2".into(),
            vec![],
        ),
        (
            "wide one date",
            format!("SELECT * FROM orders WHERE date = DATE '{one_day}' AND customer < 200 ORDER BY order_id"),
            vec![],
        ),
        (
            "time travel",
            "SELECT count(*) AS n, sum(amount) AS revenue FROM snapshot('orders', 3)".into(),
            vec![],
        ),
    ]
}

fn sql(wh: &Path, query: &str, extra: &[String], cluster: Option<&str>) -> String {
    let mut args = vec!["sql", query, "--format", "csv"];
    args.extend(extra.iter().map(String::as_str));
    if let Some(url) = cluster {
        args.extend(["--cluster", url]);
    }
    ok(&logbook(wh, &args))
}

/// A cluster process's refusal: exit 1, the reason on stderr (after its
/// log lines), no panic.
fn refused_at_start(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    err.lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {err}"))
        .to_string()
}

#[test]
fn a_scheduler_and_two_executors_answer_the_analyst_workload_as_one_process_does() {
    let dir = tempfile::tempdir().unwrap();
    let wh = analyst_warehouse(dir.path());
    let cluster = start_cluster(dir.path(), &wh, 2);
    for (name, query, extra) in workload() {
        let local = sql(&wh, &query, &extra, None);
        let distributed = sql(&wh, &query, &extra, Some(&cluster.url));
        assert!(local.lines().count() > 1, "{name}: no rows to compare");
        assert_eq!(distributed, local, "{name}: {query}");
    }
    let tasks = |cluster: &TestCluster| -> Vec<usize> {
        (0..2)
            .map(|i| {
                let log = cluster.processes.log(&format!("executor-{i}"));
                log.matches("Finished task").count()
            })
            .collect()
    };
    let before = tasks(&cluster);
    assert!(
        before.iter().all(|&n| n > 0),
        "an executor ran no task: {before:?}"
    );

    // `serve --cluster`: a Flight SQL client's queries run on the cluster.
    let mut cluster = cluster;
    let listen = format!("127.0.0.1:{}", free_port());
    let url = cluster.url.clone();
    cluster.processes.start(
        "serve",
        &wh,
        &["serve", "--listen", &listen, "--cluster", &url],
    );
    cluster.processes.wait_for("serve", "serving Flight SQL");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (name, query, extra) in workload() {
        if !extra.is_empty() || name == "wide one date" {
            continue;
        }
        let local = sql(&wh, &query, &[], None);
        let served = runtime.block_on(flight_query(&listen, &query));
        assert_eq!(served, csv_rows(&local), "{name} through serve --cluster");
    }
    let after = tasks(&cluster);
    assert!(
        after.iter().sum::<usize>() > before.iter().sum::<usize>(),
        "serve ran its queries itself: {before:?} -> {after:?}"
    );
}

/// The rows of `sql` through a Flight SQL server at `addr`, sorted, as CSV
/// lines.
async fn flight_query(addr: &str, sql: &str) -> Vec<String> {
    use arrow_flight::sql::client::FlightSqlServiceClient;
    use futures::TryStreamExt;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = FlightSqlServiceClient::new(channel);
    let info = client.execute(sql.to_string(), None).await.unwrap();
    let mut batches = Vec::new();
    for ep in info.endpoint {
        let stream = client.do_get(ep.ticket.unwrap()).await.unwrap();
        batches.extend(stream.try_collect::<Vec<_>>().await.unwrap());
    }
    rows(&batches)
}

/// The rows of `sql --format csv` output, sorted, without the header.
fn csv_rows(out: &str) -> Vec<String> {
    let mut rows: Vec<String> = out.lines().skip(1).map(str::to_string).collect();
    rows.sort();
    rows
}

#[test]
fn an_executor_killed_mid_query_gives_the_right_answer_or_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let wh = analyst_warehouse(dir.path());
    let mut cluster = start_cluster(dir.path(), &wh, 2);
    let query = workload()
        .into_iter()
        .find(|(name, _, _)| *name == "as-of range join")
        .unwrap()
        .1;
    let local = sql(&wh, &query, &[], None);
    let child = Command::new(env!("CARGO_BIN_EXE_logbook"))
        .arg("--warehouse")
        .arg(&wh)
        .args(["sql", &query, "--format", "csv", "--cluster", &cluster.url])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Kill executor 1 once it has started a task of this query.
    cluster.processes.wait_for("executor-1", "Execute task");
    cluster.processes.kill("executor-1");
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        assert_eq!(String::from_utf8(out.stdout).unwrap(), local);
        // Answered after the scheduler gave the lost executor's task to the
        // other one (not before the kill mattered).
        let log = cluster.processes.log("scheduler");
        assert!(log.contains("on lost Executor"), "{log}");
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("error: ") && !err.contains("panicked"),
            "{err}"
        );
    }
    // The cluster still answers with the executor left.
    assert_eq!(sql(&wh, &query, &[], Some(&cluster.url)), local);
}

#[test]
fn a_cluster_process_that_cannot_reach_the_warehouse_says_so_at_start_up() {
    // An S3 endpoint nothing listens on: every request is refused.
    for process in ["scheduler", "executor"] {
        let out = Command::new(env!("CARGO_BIN_EXE_logbook"))
            .args(["--warehouse", "s3://nobucket/wh", "cluster", process])
            .args(["--bind", "127.0.0.1:0"])
            .env_remove("LOGBOOK_WAREHOUSE")
            .env("AWS_ENDPOINT", format!("http://127.0.0.1:{}", free_port()))
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap();
        let err = refused_at_start(&out);
        assert!(
            err.contains(&format!(
                "cannot reach the warehouse at s3://nobucket/wh from this {process}"
            )),
            "{err}"
        );
    }
    // A warehouse in one process's memory cannot be a cluster's.
    let out = Command::new(env!("CARGO_BIN_EXE_logbook"))
        .args(["--warehouse", "memory://", "cluster", "scheduler"])
        .args(["--bind", "127.0.0.1:0"])
        .env_remove("LOGBOOK_WAREHOUSE")
        .output()
        .unwrap();
    let err = refused_at_start(&out);
    assert!(err.contains("lives in one process"), "{err}");
}

/// Rows as text, sorted (batches from a cluster come in any order).
fn rows(batches: &[arrow_array::RecordBatch]) -> Vec<String> {
    let mut out: Vec<String> = batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |r| {
                b.columns()
                    .iter()
                    .map(|c| arrow_cast::display::array_value_to_string(c, r).unwrap())
                    .collect::<Vec<_>>()
                    .join(",")
            })
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_commit_landing_between_planning_and_execution_changes_nothing_the_query_reads() {
    use futures::TryStreamExt;
    use logbook_datafusion::{session, QueryOptions};

    let dir = tempfile::tempdir().unwrap();
    let wh = analyst_warehouse(dir.path());
    let cluster = start_cluster(dir.path(), &wh, 2);
    let query = "SELECT date, count(*) AS n, sum(amount) AS revenue FROM orders GROUP BY date";
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let warehouse = logbook_core::Warehouse::open(wh.to_str().unwrap()).unwrap();
        let local = session(&warehouse, QueryOptions::default(), None)
            .await
            .unwrap();
        let before = logbook_datafusion::sql(&local, query)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();

        let client = logbook_cluster::Cluster::new(&cluster.url, &warehouse).unwrap();
        let ctx = session(&warehouse, QueryOptions::default(), None)
            .await
            .unwrap();
        let df = logbook_datafusion::sql(&ctx, query).await.unwrap();
        let planned = client.plan(df).await.unwrap();

        // Day 2 replaced by one row between planning and execution.
        let sql = "SELECT logical_date() AS date, 1 AS order_id, 1 AS customer, 5 AS amount";
        ok(&logbook(
            &wh,
            &["run", "orders", "--date", &day(1), "--sql", sql],
        ));
        let after = logbook_datafusion::sql(&local, query)
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        assert_ne!(rows(&after), rows(&before), "the commit changed nothing");

        let stream = client.run(planned).await.unwrap();
        let got: Vec<_> = stream.try_collect().await.unwrap();
        assert_eq!(rows(&got), rows(&before));
    });
}

/// A CA, a certificate it signs for every process of the cluster and one
/// for its client, and a second CA with a certificate of its own: made with
/// `openssl`, for 127.0.0.1.
fn certificates(dir: &Path) -> PathBuf {
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let openssl = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(&certs)
            .output()
            .expect("openssl");
        assert!(out.status.success(), "openssl {args:?}: {out:?}");
    };
    let key = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    std::fs::write(
        certs.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    for ca in ["ca", "other-ca"] {
        let (pem, k) = (format!("{ca}.pem"), format!("{ca}.key"));
        let mut args = vec!["req", "-x509", "-days", "1", "-subj"];
        let subject = format!("/CN=logbook test {ca}");
        args.extend([subject.as_str(), "-keyout", &k, "-out", &pem]);
        args.extend(key);
        openssl(&args);
    }
    for (leaf, ca) in [("node", "ca"), ("client", "ca"), ("rogue", "other-ca")] {
        let (csr, k, pem) = (
            format!("{leaf}.csr"),
            format!("{leaf}.key"),
            format!("{leaf}.pem"),
        );
        let subject = format!("/CN=logbook test {leaf}");
        let mut args = vec!["req", "-subj", &subject, "-keyout", &k, "-out", &csr];
        args.extend(key);
        openssl(&args);
        let (ca_pem, ca_key) = (format!("{ca}.pem"), format!("{ca}.key"));
        openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_pem,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "leaf.ext",
            "-out",
            &pem,
        ]);
    }
    certs
}

#[test]
fn over_mutual_tls_a_cluster_answers_and_refuses_whoever_has_no_certificate_from_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    ok(&logbook(&wh, &["demo"]));
    let certs = certificates(dir.path());
    let file = |name: &str| certs.join(name).to_str().unwrap().to_string();
    let node = [
        "--tls-cert".to_string(),
        file("node.pem"),
        "--tls-key".into(),
        file("node.key"),
        "--tls-ca".into(),
        file("ca.pem"),
    ];
    let node: Vec<&str> = node.iter().map(String::as_str).collect();
    let mut cluster = start_cluster_with(dir.path(), &wh, 2, &node);
    std::thread::sleep(Duration::from_millis(500)); // their first polls
                                                    // A certificate and the CA trusted, under a process's flags
                                                    // (`--tls-*`) or a client's (`--cluster-*`).
    let identity = |flags: &str, cert: &str, ca: &str| -> Vec<String> {
        vec![
            format!("--{flags}-cert"),
            file(&format!("{cert}.pem")),
            format!("--{flags}-key"),
            file(&format!("{cert}.key")),
            format!("--{flags}-ca"),
            file(&format!("{ca}.pem")),
        ]
    };
    let client = |cert: &str, ca: &str| identity("cluster", cert, ca);

    // Two stages: partial aggregates on both executors, the final one
    // reading their shuffle outputs from each other, all over TLS (the
    // servers speak nothing else); exact values only (min/max, counts).
    let query = "SELECT customer, count(*) AS n, min(amount) AS lo, max(amount) AS hi \
                 FROM orders GROUP BY customer ORDER BY customer";
    let local = sql(&wh, query, &[], None);
    assert!(local.lines().count() > 2, "{local}");
    let distributed = sql(&wh, query, &client("client", "ca"), Some(&cluster.url));
    assert_eq!(distributed, local);
    for i in 0..2 {
        let log = cluster.processes.log(&format!("executor-{i}"));
        assert!(
            log.contains("Finished task"),
            "executor-{i} ran no task:\n{log}"
        );
    }
    // `serve --cluster` with the client's certificate: a Flight SQL
    // client's query runs there.
    let listen = format!("127.0.0.1:{}", free_port());
    let url = cluster.url.clone();
    let mut args = vec!["serve", "--listen", &listen, "--cluster", &url];
    let serve_tls = client("client", "ca");
    args.extend(serve_tls.iter().map(String::as_str));
    cluster.processes.start("serve", &wh, &args);
    cluster.processes.wait_for("serve", "serving Flight SQL");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let served = runtime.block_on(flight_query(&listen, query));
    assert_eq!(served, csv_rows(&local), "through serve --cluster");

    // Refused, each with one clear line: a client without TLS (it was
    // killed by SIGPIPE, silently, before), a client whose certificate
    // another CA signed, a client that trusts another CA.
    let refusal = |extra: Vec<String>| -> String {
        let mut args = vec!["sql", query, "--cluster", &cluster.url];
        args.extend(extra.iter().map(String::as_str));
        refused(&logbook(&wh, &args))
    };
    let plain = refusal(vec![]);
    assert!(plain.contains("if the other side serves TLS"), "{plain}");
    let rogue = refusal(client("rogue", "ca"));
    assert!(
        rogue.contains("may have refused this certificate"),
        "{rogue}"
    );
    let untrusting = refusal(client("client", "other-ca"));
    assert!(
        untrusting.contains("not signed by the CA given"),
        "{untrusting}"
    );

    // An executor's Flight service (results, shuffle files) serves only
    // clients with a certificate from the CA.
    let ca = std::fs::read(certs.join("ca.pem")).unwrap();
    let flight = |identity: Option<&str>| {
        use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
        let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&ca));
        if let Some(name) = identity {
            let cert = std::fs::read(certs.join(format!("{name}.pem"))).unwrap();
            let key = std::fs::read(certs.join(format!("{name}.key"))).unwrap();
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        let endpoint = Endpoint::from_shared(format!("https://{}", cluster.executors[0]))
            .unwrap()
            .tls_config(tls)
            .unwrap();
        runtime.block_on(async move {
            let channel = endpoint.connect().await.map_err(|e| format!("{e:?}"))?;
            let mut client = arrow_flight::flight_service_client::FlightServiceClient::new(channel);
            client
                .list_actions(arrow_flight::Empty {})
                .await
                .map(|_| ())
                .map_err(|e| format!("{e:?}"))
        })
    };
    // (The refusal reaches a client as an alert, a closed stream or a
    // broken pipe, depending on timing: only the outcome is checked.)
    flight(Some("client")).expect("a client with a certificate from the CA");
    flight(None).expect_err("a client without a certificate");
    flight(Some("rogue")).expect_err("a certificate from another CA");

    // An executor the scheduler refuses cannot join: it says so and stops
    // (one with TLS used to run on, logging failed polls, never given a
    // task): without TLS, with a certificate another CA signed, trusting
    // another CA.
    let scheduler = cluster.url.trim_start_matches("df://").to_string();
    let executor = |extra: Vec<String>| -> String {
        let bind = format!("127.0.0.1:{}", free_port());
        let grpc = free_port().to_string();
        let mut args = vec![
            "cluster",
            "executor",
            "--scheduler",
            &scheduler,
            "--bind",
            &bind,
            "--grpc-port",
            &grpc,
        ];
        args.extend(extra.iter().map(String::as_str));
        refused_at_start(&logbook_within(&wh, &args, Duration::from_secs(90)))
    };
    let plain = executor(vec![]);
    assert!(plain.contains("if the other side serves TLS"), "{plain}");
    let rogue = executor(identity("tls", "rogue", "ca"));
    assert!(rogue.contains("did not answer"), "{rogue}");
    assert!(
        rogue.contains("may have refused this certificate"),
        "{rogue}"
    );
    let untrusting = executor(identity("tls", "node", "other-ca"));
    assert!(
        untrusting.contains("not signed by the CA given"),
        "{untrusting}"
    );
    cluster.processes.kill("scheduler");
}

/// `logbook` with a deadline: a process still running after `limit` is
/// killed and the test fails (a refused executor used to run forever).
fn logbook_within(wh: &Path, args: &[&str], limit: Duration) -> std::process::Output {
    // stderr to a file: a pipe nobody reads would stall a talkative child.
    let log = tempfile::NamedTempFile::new().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_logbook"))
        .arg("--warehouse")
        .arg(wh)
        .args(args)
        .env_remove("LOGBOOK_WAREHOUSE")
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .expect("start logbook");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "logbook {args:?} still running after {limit:?}:\n{}",
                std::fs::read_to_string(log.path()).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::process::Output {
        status,
        stdout: Vec::new(),
        stderr: std::fs::read(log.path()).unwrap(),
    }
}
