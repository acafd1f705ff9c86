//! A corpus of bad inputs, one test each: every one gets an error naming the
//! table, partition, file or field, a non-zero exit, no panic, and leaves
//! the warehouse exactly as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod common;
use common::*;

/// A warehouse with `orders` (two committed dates) and `customers` (one
/// load), plus a scratch directory for inputs.
struct World {
    _dir: tempfile::TempDir,
    wh: PathBuf,
    inputs: PathBuf,
}

fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path().join("wh");
    let inputs = dir.path().join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    create_orders(&wh);
    for d in ["2026-03-15", "2026-03-16"] {
        let f = fixture(&format!("orders-{d}.csv"));
        ok(&logbook(
            &wh,
            &["write", "orders", "--date", d, f.to_str().unwrap()],
        ));
    }
    ok(&logbook(
        &wh,
        &[
            "create",
            "customers",
            "--schema",
            "customer:string,region:string",
            "--scd2",
            "--key",
            "customer",
        ],
    ));
    let c = fixture("worked/customers-2026-01-01.csv");
    ok(&logbook(
        &wh,
        &[
            "apply",
            "customers",
            "--effective",
            "2026-01-01",
            c.to_str().unwrap(),
        ],
    ));
    World {
        _dir: dir,
        wh,
        inputs,
    }
}

/// Every file under the warehouse with its size and contents.
fn contents(wh: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    walk(wh)
        .into_iter()
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect()
}

const HEADER: &str = "date,order_id,customer,amount,placed_at";

/// Write `text` as input file `name`; returns its path.
fn input(w: &World, name: &str, text: impl AsRef<[u8]>) -> String {
    let p = w.inputs.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

/// The newest file in `dir` (recursively) whose name ends with `suffix`.
fn file_ending(dir: &Path, suffix: &str) -> PathBuf {
    let mut found: Vec<PathBuf> = walk(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
        .pop()
        .unwrap_or_else(|| panic!("no file ending {suffix} under {}", dir.display()))
}

/// Run `args`; it must fail cleanly, mention every needle, change nothing.
fn refuses(w: &World, args: &[&str], needles: &[&str]) {
    let before = contents(&w.wh);
    let out = logbook(&w.wh, args);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        !out.status.success(),
        "{args:?} succeeded: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
    assert!(contents(&w.wh) == before, "{args:?} changed the warehouse");
}

macro_rules! bad {
    ($name:ident, |$w:ident| $args:expr, $needles:expr) => {
        #[test]
        fn $name() {
            let $w = world();
            let args: Vec<String> = $args;
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            refuses(&$w, &args, &$needles);
        }
    };
}

fn v(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn write(file: String, date: &str) -> Vec<String> {
    v(&["write", "orders", "--date", date, &file])
}

bad!(
    extra_column,
    |w| write(
        input(
            &w,
            "extra.csv",
            format!("{HEADER},tip\n2026-03-15,1,c,1.0,2026-03-15T00:00:00,2\n")
        ),
        "2026-03-15"
    ),
    ["orders", "extra.csv", "\"tip\""]
);
bad!(
    missing_column,
    |w| write(
        input(
            &w,
            "missing.csv",
            "date,order_id,customer,amount\n2026-03-15,1,c,1.0\n"
        ),
        "2026-03-15"
    ),
    ["orders", "placed_at"]
);
bad!(
    wrong_type_in_a_column,
    |w| write(
        input(
            &w,
            "types.csv",
            format!("{HEADER}\n2026-03-15,one,c,1.0,2026-03-15T00:00:00\n")
        ),
        "2026-03-15"
    ),
    ["orders", "types.csv", "one"]
);
bad!(
    null_in_the_partition_column,
    |w| write(
        input(
            &w,
            "nulls.csv",
            format!("{HEADER}\n,1,c,1.0,2026-03-15T00:00:00\n")
        ),
        "2026-03-15"
    ),
    ["orders", "2026-03-15", "null"]
);
bad!(
    rows_outside_the_date,
    |w| write(
        fixture("orders-wrong-date.csv").to_str().unwrap().into(),
        "2026-03-15"
    ),
    ["orders", "2026-03-14", "1 row(s)"]
);
bad!(
    malformed_csv,
    |w| write(
        fixture("orders-malformed.csv").to_str().unwrap().into(),
        "2026-03-15"
    ),
    ["orders", "orders-malformed.csv"]
);
bad!(
    ragged_csv,
    |w| write(
        input(&w, "ragged.csv", format!("{HEADER}\n2026-03-15,1,c\n")),
        "2026-03-15"
    ),
    ["orders", "ragged.csv", "line 2"]
);
bad!(
    empty_csv,
    |w| write(input(&w, "empty.csv", ""), "2026-03-15"),
    ["orders", "empty.csv", "empty"]
);
bad!(
    truncated_parquet,
    |w| {
        let bytes = std::fs::read(fixture("orders-2026-03-17.parquet")).unwrap();
        write(
            input(&w, "cut.parquet", &bytes[..bytes.len() / 2]),
            "2026-03-17",
        )
    },
    ["orders", "cut.parquet"]
);
bad!(
    not_parquet_at_all,
    |w| write(input(&w, "fake.parquet", "date,order_id\n"), "2026-03-17"),
    ["orders", "fake.parquet"]
);
bad!(
    unknown_input_type,
    |w| write(input(&w, "orders.xlsx", "x"), "2026-03-15"),
    ["orders", "orders.xlsx", ".csv or .parquet"]
);
bad!(
    date_that_does_not_parse,
    |w| write(
        fixture("orders-2026-03-15.csv").to_str().unwrap().into(),
        "2026-02-30"
    ),
    ["2026-02-30", "--date"]
);
bad!(
    corrupt_log_entry,
    |w| {
        std::fs::write(
            file_ending(&w.wh.join("orders/_logbook/log"), ".json"),
            "{not json",
        )
        .unwrap();
        v(&["partitions", "orders"])
    },
    [
        "orders",
        "_logbook/log/00000000000000000002.json",
        "corrupt"
    ]
);
bad!(
    truncated_log_entry,
    |w| {
        let f = file_ending(&w.wh.join("orders/_logbook/log"), ".json");
        let bytes = std::fs::read(&f).unwrap();
        std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
        v(&["sql", "SELECT count(*) FROM orders"])
    },
    ["orders", "00000000000000000002.json"]
);
bad!(
    future_format_version,
    |w| {
        let f = file_ending(&w.wh.join("orders/_logbook/log"), ".json");
        let text = std::fs::read_to_string(&f)
            .unwrap()
            .replace("\"format\":2", "\"format\":99");
        std::fs::write(&f, text).unwrap();
        v(&["partitions", "orders"])
    },
    ["orders", "format version 99", "upgrade logbook"]
);
bad!(
    missing_manifest,
    |w| {
        std::fs::remove_file(file_ending(
            &w.wh.join("orders/_logbook/manifests"),
            "root.json",
        ))
        .unwrap();
        v(&["partitions", "orders"])
    },
    ["orders", "root.json", "missing"]
);
bad!(
    missing_data_file,
    |w| {
        std::fs::remove_file(file_ending(
            &w.wh.join("orders/data/date=2026-03-16"),
            ".parquet",
        ))
        .unwrap();
        v(&["check", "orders"])
    },
    ["orders", "1 problem"]
);
bad!(
    missing_data_file_in_a_query,
    |w| {
        let gone = file_ending(&w.wh.join("orders/data/date=2026-03-16"), ".parquet");
        std::fs::remove_file(&gone).unwrap();
        v(&["sql", "SELECT * FROM orders"])
    },
    ["orders/data/date=2026-03-16/", "not found"]
);
bad!(
    table_name_with_dot_dot,
    |w| v(&[
        "create",
        "../up",
        "--schema",
        "d:date",
        "--partition-by",
        "d"
    ]),
    ["table name", "../up"]
);
bad!(
    table_name_with_slash,
    |w| v(&["create", "a/b", "--schema", "d:date", "--partition-by", "d"]),
    ["table name", "a/b"]
);
bad!(
    table_name_very_long,
    |w| v(&[
        "create",
        &"t".repeat(300),
        "--schema",
        "d:date",
        "--partition-by",
        "d"
    ]),
    ["table name", "longer than"]
);
bad!(
    run_id_with_slash,
    |w| {
        let mut a = write(
            fixture("orders-2026-03-15.csv").to_str().unwrap().into(),
            "2026-03-15",
        );
        a.extend(v(&["--run-id", "../../etc"]));
        a
    },
    ["run id", "../../etc"]
);
bad!(
    overlapping_scd_intervals,
    |w| {
        let f = input(&w, "dup.csv", "customer,region\nc-01,Bonn\nc-01,Kiel\n");
        v(&["apply", "customers", "--effective", "2026-02-01", &f])
    },
    ["customers", "c-01", "twice"]
);
bad!(
    delete_before_the_dimension_history,
    |w| {
        let f = input(&w, "gone.csv", "customer\nc-01\n");
        v(&[
            "apply",
            "customers",
            "--effective",
            "2025-06-01",
            "--delete",
            &f,
        ])
    },
    [
        "customers",
        "2025-06-01",
        "before the dimension's history begins"
    ]
);
bad!(
    duration_that_does_not_parse,
    |w| v(&["vacuum", "orders", "--retention", "forever"]),
    ["forever", "--retention"]
);
bad!(
    retention_too_short,
    |w| v(&["vacuum", "orders", "--retention", "5min"]),
    ["orders", "under one hour"]
);
bad!(
    writing_a_dimension_like_a_fact_table,
    |w| {
        let f = fixture("orders-2026-03-15.csv");
        v(&[
            "write",
            "customers",
            "--date",
            "2026-03-15",
            f.to_str().unwrap(),
        ])
    },
    ["customers", "dimension"]
);
bad!(
    applying_to_a_fact_table,
    |w| {
        let f = fixture("worked/customers-2026-01-01.csv");
        v(&[
            "apply",
            "orders",
            "--effective",
            "2026-01-01",
            f.to_str().unwrap(),
        ])
    },
    ["orders", "not a dimension"]
);
bad!(
    query_of_an_unknown_table,
    |w| v(&["sql", "SELECT * FROM nope"]),
    ["nope"]
);
bad!(
    wall_clock_inside_a_run,
    |w| v(&[
        "run",
        "orders",
        "--date",
        "2026-03-15",
        "--sql",
        "SELECT now()"
    ]),
    ["now", "logical_date()"]
);
bad!(
    time_travel_beyond_the_log,
    |w| v(&["sql", "SELECT * FROM orders", "--version", "orders=99"]),
    ["orders", "99"]
);
bad!(
    publishing_a_stage_that_does_not_exist,
    |w| v(&["stage", "publish", "orders", "nope"]),
    ["orders", "no stage \"nope\""]
);
bad!(
    compacting_a_dimension,
    |w| v(&["compact", "customers"]),
    ["customers", "dimension"]
);
bad!(
    adding_a_column_that_exists,
    |w| v(&["alter", "orders", "--add-column", "amount:float64"]),
    ["orders", "\"amount\" already exists", "schema version 0"]
);
bad!(
    a_format_with_a_schema_change,
    |w| v(&[
        "alter",
        "orders",
        "--format",
        "2",
        "--add-column",
        "tip:float64"
    ]),
    ["orders", "one schema change per alter"]
);
bad!(
    a_format_with_a_mirror,
    |w| v(&["alter", "orders", "--format", "2", "--mirror", "delta"]),
    ["orders", "--mirror is its own commit"]
);
bad!(
    an_unknown_mirror_format_in_a_list,
    |w| v(&["alter", "orders", "--mirror", "iceberg,hudi"]),
    [
        "orders",
        "--mirror",
        "unknown mirror format \"hudi\"",
        "delta,iceberg"
    ]
);
bad!(
    a_format_this_build_cannot_write,
    |w| v(&["alter", "orders", "--format", "3"]),
    ["orders", "format 2 to 3"]
);
bad!(
    dropping_the_partition_column,
    |w| v(&["alter", "orders", "--drop-column", "date"]),
    ["orders", "partition column"]
);
bad!(
    dropping_a_dimension_key,
    |w| v(&["alter", "customers", "--drop-column", "customer"]),
    ["customers", "key column"]
);
bad!(
    an_unsafe_type_change,
    |w| v(&["alter", "orders", "--widen-column", "amount:int32"]),
    ["orders", "not a safe widening"]
);
bad!(
    renaming_to_an_existing_name,
    |w| v(&["alter", "orders", "--rename-column", "customer:amount"]),
    ["orders", "\"amount\" already exists"]
);
bad!(
    adding_a_column_of_an_unknown_type,
    |w| v(&["alter", "orders", "--add-column", "tip:money"]),
    ["orders", "unknown type \"money\""]
);
bad!(
    serving_beyond_loopback_without_a_token,
    |w| v(&["serve", "--listen", "0.0.0.0:0"]),
    ["0.0.0.0:0", "without a token"]
);
bad!(
    serving_with_a_missing_token_file,
    |w| {
        let f = w.inputs.join("no-such-token");
        v(&["serve", "--token-file", f.to_str().unwrap()])
    },
    ["cannot read the token file", "no-such-token"]
);
bad!(
    serving_with_an_empty_token_file,
    |w| v(&["serve", "--token-file", &input(&w, "token", "\n")]),
    ["token file", "is empty"]
);
bad!(
    serving_tls_with_a_certificate_that_is_not_pem,
    |w| {
        let cert = input(&w, "cert.pem", "not a certificate\n");
        let key = input(&w, "key.pem", "not a key\n");
        v(&["serve", "--tls-cert", &cert, "--tls-key", &key])
    },
    ["--tls-cert", "cert.pem", "not a PEM file"]
);
bad!(
    serving_tls_with_a_key_that_is_not_a_key,
    |w| {
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let cert = input(&w, "cert.pem", pem);
        let key = input(&w, "key.pem", pem);
        v(&["serve", "--tls-cert", &cert, "--tls-key", &key])
    },
    ["--tls-cert/--tls-key", "cannot serve TLS"]
);
bad!(
    a_cluster_ca_that_is_not_pem,
    |w| {
        let pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let cert = input(&w, "cert.pem", pem);
        let key = input(&w, "key.pem", pem);
        let ca = input(&w, "ca.pem", "not a certificate\n");
        v(&[
            "cluster",
            "scheduler",
            "--bind",
            "127.0.0.1:0",
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--tls-ca",
            &ca,
        ])
    },
    ["--tls-cert/--tls-key/--tls-ca", "ca.pem", "not a PEM file"]
);
bad!(
    a_cluster_client_certificate_without_its_ca,
    |w| {
        let cert = input(&w, "cert.pem", "x");
        v(&[
            "sql",
            "SELECT 1",
            "--cluster",
            "df://127.0.0.1:1",
            "--cluster-cert",
            &cert,
        ])
    },
    ["--cluster-ca", "--cluster-key"]
);
bad!(
    an_executor_on_an_unspecified_address_without_an_external_host,
    |w| v(&["cluster", "executor", "--bind", "0.0.0.0:50999"]),
    ["0.0.0.0:50999", "--external-host"]
);
bad!(
    an_executor_on_port_0,
    |w| v(&[
        "cluster",
        "executor",
        "--bind",
        "127.0.0.1:0",
        "--grpc-port",
        "50998"
    ]),
    ["127.0.0.1:0", "port 0"]
);
bad!(
    a_cluster_address_without_df,
    |w| v(&["sql", "SELECT 1", "--cluster", "127.0.0.1:50050"]),
    ["127.0.0.1:50050", "df://HOST:PORT"]
);
bad!(
    a_backfill_budget_of_zero,
    |w| v(&["warehouse", "set", "max-backfill-runs", "0"]),
    ["max-backfill-runs", "at least 1"]
);
bad!(
    a_negative_run_budget,
    |w| v(&["warehouse", "set", "max-runs", "-1"]),
    ["max-runs", "-1", "at least 1"]
);
bad!(
    a_heavy_step_limit_of_zero,
    |w| v(&["warehouse", "set", "max-heavy-steps", "0"]),
    ["max-heavy-steps", "at least 1"]
);
bad!(
    a_run_budget_that_is_not_a_number,
    |w| v(&["warehouse", "set", "max-backfill-runs", "two"]),
    ["max-backfill-runs", "\"two\""]
);
bad!(
    a_lease_too_short_to_renew,
    |w| v(&["warehouse", "set", "lease-ms", "5"]),
    ["lease-ms", "at least 1000"]
);
bad!(
    a_pause_window_that_is_not_a_time,
    |w| v(&[
        "backfill",
        "orders",
        "--command",
        "true",
        "--pause-during",
        "25:00-03:00"
    ]),
    ["--pause-during", "25:00-03:00"]
);
bad!(
    a_memory_limit_that_is_not_a_size,
    |_w| v(&["sql", "SELECT 1", "--memory-limit", "lots"]),
    ["--memory-limit", "lots", "64MiB"]
);
bad!(
    a_memory_limit_for_a_cluster_client,
    |_w| v(&[
        "sql",
        "SELECT 1",
        "--memory-limit",
        "1GiB",
        "--cluster",
        "df://127.0.0.1:1"
    ]),
    ["--memory-limit", "--cluster"]
);
