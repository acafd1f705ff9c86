//! The Flight SQL server, queried with arrow-flight's own
//! `FlightSqlServiceClient` over a loopback socket (the same cases as the
//! ADBC tests in tests/flight/, which scripts/flight-adbc.sh runs).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Date32Array, RecordBatch};
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{
    CommandGetDbSchemas, CommandGetTables, CommandStatementQuery, ProstMessageExt, SqlInfo,
};
use arrow_flight::{FlightDescriptor, FlightInfo};
use arrow_schema::{DataType, Field, Schema};
use futures::TryStreamExt;
use logbook::flight::{serve, ServerOptions};
use logbook::Warehouse;
use prost::Message;
use tokio::sync::oneshot;
use tonic::transport::Channel;

use crate::common::*;
use crate::query::world;

const TOKEN: &str = "t0ken";

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(wh: Warehouse, options: ServerOptions) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve(wh, options, listener, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        Self {
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn client(&self, token: Option<&str>) -> FlightSqlServiceClient<Channel> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", self.addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut c = FlightSqlServiceClient::new(channel);
        if let Some(t) = token {
            c.set_token(t.to_string());
        }
        c
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the server stops when asked")
            .unwrap();
    }
}

fn token_options() -> ServerOptions {
    ServerOptions {
        token: Some(TOKEN.into()),
        ..ServerOptions::default()
    }
}

/// Every batch of every endpoint of `info`.
async fn fetch(
    c: &mut FlightSqlServiceClient<Channel>,
    info: FlightInfo,
) -> Result<Vec<RecordBatch>, arrow_flight::error::FlightError> {
    let mut out = Vec::new();
    for ep in info.endpoint {
        let stream = c.do_get(ep.ticket.expect("a ticket")).await?;
        out.extend(stream.try_collect::<Vec<_>>().await?);
    }
    Ok(out)
}

async fn query(c: &mut FlightSqlServiceClient<Channel>, sql: &str) -> Vec<RecordBatch> {
    let info = c.execute(sql.to_string(), None).await.unwrap();
    fetch(c, info).await.unwrap()
}

fn strings(batches: &[RecordBatch], col: usize) -> Vec<String> {
    batches
        .iter()
        .flat_map(|b| {
            let a = b.column(col).as_string::<i32>();
            (0..b.num_rows())
                .map(|i| a.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The gRPC status a failed call carried.
fn status(e: &arrow_flight::error::FlightError) -> (tonic::Code, String) {
    match e {
        arrow_flight::error::FlightError::Tonic(s) => (s.code(), s.message().to_string()),
        other => panic!("not a status: {other}"),
    }
}

fn one_i64(batches: &[RecordBatch]) -> i64 {
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

const REGION_OF_C17: &str = "SELECT region FROM customers WHERE customer = 'c-17'";

#[tokio::test]
async fn browses_catalogs_schemas_tables_and_sql_info() {
    let (wh, _) = world().await;
    let server = Server::start(wh, token_options()).await;
    let mut c = server.client(Some(TOKEN)).await;

    let info = c.get_catalogs().await.unwrap();
    assert_eq!(strings(&fetch(&mut c, info).await.unwrap(), 0), ["logbook"]);
    let info = c
        .get_db_schemas(CommandGetDbSchemas {
            catalog: Some("logbook".into()),
            db_schema_filter_pattern: Some("pub%".into()),
        })
        .await
        .unwrap();
    assert_eq!(strings(&fetch(&mut c, info).await.unwrap(), 1), ["public"]);

    let info = c
        .get_tables(CommandGetTables {
            catalog: Some("logbook".into()),
            db_schema_filter_pattern: Some("public".into()),
            table_name_filter_pattern: None,
            table_types: vec!["TABLE".into()],
            include_schema: true,
        })
        .await
        .unwrap();
    let tables = fetch(&mut c, info).await.unwrap();
    assert_eq!(
        strings(&tables, 2),
        ["customers", "orders", "revenue_by_region"]
    );
    // The Arrow schema of each table travels with it (IPC-encoded).
    assert!(tables[0].column_by_name("table_schema").is_some());

    let info = c.get_table_types().await.unwrap();
    assert_eq!(
        strings(&fetch(&mut c, info).await.unwrap(), 0),
        ["TABLE", "VIEW"]
    );
    let info = c
        .get_sql_info(vec![
            SqlInfo::FlightSqlServerName,
            SqlInfo::FlightSqlServerReadOnly,
        ])
        .await
        .unwrap();
    assert_eq!(fetch(&mut c, info).await.unwrap()[0].num_rows(), 2);
    server.stop().await;
}

#[tokio::test]
async fn as_of_by_header_and_by_session_berlin_then_munich() {
    let (wh, _) = world().await;
    let server = Server::start(wh, token_options()).await;

    // Per call, by headers.
    let mut c = server.client(Some(TOKEN)).await;
    c.set_header("x-logbook-logical-date", "2026-03-15");
    assert_eq!(strings(&query(&mut c, REGION_OF_C17).await, 0), ["Berlin"]);
    c.set_header("x-logbook-dimensions", "current");
    assert_eq!(strings(&query(&mut c, REGION_OF_C17).await, 0), ["Munich"]);

    // Per session, by SET: the server answers with a cookie the client sends back.
    let mut c = server.client(Some(TOKEN)).await;
    let set = CommandStatementQuery {
        query: "SET logbook.logical_date = '2026-03-15'".into(),
        transaction_id: None,
    };
    let mut req = tonic::Request::new(FlightDescriptor::new_cmd(set.as_any().encode_to_vec()));
    req.metadata_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let resp = c.inner_mut().get_flight_info(req).await.unwrap();
    let cookie = resp.metadata().get("set-cookie").expect("a session cookie");
    let cookie = cookie
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert!(resp.into_inner().endpoint.is_empty(), "SET returns no rows");
    c.set_header("cookie", cookie.clone());
    assert_eq!(strings(&query(&mut c, REGION_OF_C17).await, 0), ["Berlin"]);
    let b = query(&mut c, "SELECT logical_date() AS d").await;
    let d = b[0]
        .column(0)
        .as_any()
        .downcast_ref::<Date32Array>()
        .unwrap();
    assert_eq!(d.value(0), days(date("2026-03-15")));

    // Without the session, the same query sees the dimension's whole history.
    let mut plain = server.client(Some(TOKEN)).await;
    assert_eq!(
        strings(&query(&mut plain, REGION_OF_C17).await, 0),
        ["Berlin", "Munich"]
    );
    // A session the server does not know is refused, not silently ignored.
    plain.set_header("cookie", "logbook_session=forgotten");
    let err = plain.execute(REGION_OF_C17.into(), None).await.unwrap_err();
    assert!(
        err.to_string().contains("SET your logbook settings again"),
        "{err}"
    );
    server.stop().await;
}

#[tokio::test]
async fn time_travel_and_planner_errors_reach_the_client() {
    let (wh, _) = world().await;
    let server = Server::start(wh, token_options()).await;
    let mut c = server.client(Some(TOKEN)).await;
    assert_eq!(
        one_i64(&query(&mut c, "SELECT count(*) FROM orders").await),
        12
    );
    assert_eq!(
        one_i64(&query(&mut c, "SELECT count(*) FROM snapshot('orders', 2)").await),
        6
    );
    let err = c
        .execute("SELECT nope FROM orders".into(), None)
        .await
        .unwrap_err();
    let (code, message) = status(&err);
    assert_eq!(code, tonic::Code::InvalidArgument);
    assert!(message.contains("nope"), "{message}");
    c.set_header("x-logbook-logical-date", "2026-03-15");
    let err = c
        .execute("SELECT now()".into(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("logical_date()"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn prepared_statement_with_a_parameter() {
    let (wh, _) = world().await;
    let server = Server::start(wh, token_options()).await;
    let mut c = server.client(Some(TOKEN)).await;
    let mut stmt = c
        .prepare("SELECT count(*) FROM orders WHERE date = ?".into(), None)
        .await
        .unwrap();
    assert_eq!(stmt.parameter_schema().unwrap().fields().len(), 1);
    for (d, n) in [("2026-03-15", 3), ("2026-03-17", 0)] {
        let params = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("$1", DataType::Date32, true)])),
            vec![Arc::new(Date32Array::from(vec![days(date(d))]))],
        )
        .unwrap();
        stmt.set_parameters(params).unwrap();
        let info = stmt.execute().await.unwrap();
        assert_eq!(one_i64(&fetch(&mut c, info).await.unwrap()), n, "{d}");
    }
    stmt.close().await.unwrap();
    server.stop().await;
}

/// A fetch runs the statement with the parameters bound when it was
/// described: bound again in between, the kept plan still answers for the
/// first ones, and a fetch that must plan again (no plan kept) is refused
/// rather than answered for parameters it was not described with. The
/// same parameters sent again (clients send them with every execution)
/// are not a change; a statement closed since refuses its tickets.
#[tokio::test]
async fn a_prepared_fetch_answers_for_the_parameters_it_was_described_with() {
    let (wh, _) = world().await;
    let bound = |d: &str| {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("$1", DataType::Date32, true)])),
            vec![Arc::new(Date32Array::from(vec![days(date(d))]))],
        )
        .unwrap()
    };
    for max_kept_plans in [256, 0] {
        let options = ServerOptions {
            max_kept_plans,
            ..token_options()
        };
        let server = Server::start(wh.clone(), options).await;
        let mut c = server.client(Some(TOKEN)).await;
        let sql = "SELECT count(*) FROM orders WHERE date = ?";
        let mut stmt = c.prepare(sql.into(), None).await.unwrap();
        stmt.set_parameters(bound("2026-03-15")).unwrap();
        let same = stmt.execute().await.unwrap();
        let first = stmt.execute().await.unwrap();
        assert_eq!(one_i64(&fetch(&mut c, same).await.unwrap()), 3);
        stmt.set_parameters(bound("2026-03-17")).unwrap();
        let second = stmt.execute().await.unwrap();
        assert_eq!(one_i64(&fetch(&mut c, second).await.unwrap()), 0);
        let first = fetch(&mut c, first).await;
        match max_kept_plans {
            0 => {
                let (code, message) = status(&first.unwrap_err());
                assert_eq!(code, tonic::Code::FailedPrecondition, "{message}");
                assert!(message.contains("GetFlightInfo again"), "{message}");
            }
            _ => assert_eq!(one_i64(&first.unwrap()), 3),
        }
        // Closed: its tickets are refused, plan kept or not.
        let last = stmt.execute().await.unwrap();
        stmt.close().await.unwrap();
        let (code, message) = status(&fetch(&mut c, last).await.unwrap_err());
        assert_eq!(code, tonic::Code::NotFound, "{message}");
        assert!(message.contains("not open"), "{message}");
        server.stop().await;
    }
}

#[tokio::test]
async fn refuses_calls_without_the_token_and_every_write() {
    let (wh, _) = world().await;
    let server = Server::start(wh.clone(), token_options()).await;
    for token in [None, Some("wrong")] {
        let mut c = server.client(token).await;
        let err = c.get_catalogs().await.unwrap_err();
        assert_eq!(status(&err).0, tonic::Code::Unauthenticated, "{token:?}");
        let err = c.execute("SELECT 1".into(), None).await.unwrap_err();
        assert_eq!(status(&err).0, tonic::Code::Unauthenticated, "{token:?}");
    }
    let mut c = server.client(Some(TOKEN)).await;
    for sql in [
        "CREATE TABLE x AS SELECT 1",
        "INSERT INTO orders VALUES (DATE '2026-03-15', 1, 'c-1', 1.0)",
        "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/hostname'",
        "COPY (SELECT 1) TO '/tmp/logbook-flight-copy.csv'",
    ] {
        for err in [
            c.execute(sql.into(), None).await.unwrap_err(),
            c.execute_update(sql.into(), None).await.unwrap_err(),
        ] {
            let (code, message) = status(&err);
            assert_eq!(code, tonic::Code::PermissionDenied, "{sql}");
            assert!(message.contains("read-only"), "{sql}: {message}");
        }
    }
    assert!(!std::path::Path::new("/tmp/logbook-flight-copy.csv").exists());
    // Nothing was written.
    let orders = wh.table("orders").await.unwrap();
    assert_eq!(orders.latest().await.unwrap().version(), 4);
    server.stop().await;
}

#[tokio::test]
async fn limits_on_result_rows() {
    let (wh, _) = world().await;
    let options = ServerOptions {
        max_result_rows: 10_000,
        ..ServerOptions::default()
    };
    let server = Server::start(wh, options).await;
    let mut c = server.client(None).await;
    // Under the limit: every row arrives.
    let b = query(&mut c, "SELECT value FROM generate_series(1, 10000)").await;
    assert_eq!(b.iter().map(|b| b.num_rows()).sum::<usize>(), 10_000);
    // Over it: the stream fails with the reason.
    let info = c
        .execute("SELECT value FROM generate_series(1, 1000000)".into(), None)
        .await
        .unwrap();
    let err = fetch(&mut c, info).await.unwrap_err().to_string();
    assert!(err.contains("more than 10000 rows"), "{err}");
    server.stop().await;
}

#[tokio::test]
async fn limits_concurrent_queries_and_frees_the_slot_when_a_client_goes() {
    let (wh, _) = world().await;
    let options = ServerOptions {
        max_concurrent_queries: 1,
        ..ServerOptions::default()
    };
    let server = Server::start(wh, options).await;
    let mut c = server.client(None).await;
    // A result far larger than the transport's buffers: it streams for as
    // long as the client reads, holding the server's only slot.
    let info = c
        .execute(
            "SELECT value FROM generate_series(1, 100000000)".into(),
            None,
        )
        .await
        .unwrap();
    let mut first = c
        .do_get(info.endpoint[0].ticket.clone().unwrap())
        .await
        .unwrap();
    assert!(first.try_next().await.unwrap().is_some());

    let mut other = server.client(None).await;
    let info2 = other.execute("SELECT 1".into(), None).await.unwrap();
    let err = fetch(&mut other, info2.clone())
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("queries are running"), "{err}");

    // The first client walks away mid-result: its slot frees.
    drop(first);
    let mut freed = false;
    for _ in 0..100 {
        if fetch(&mut other, info2.clone()).await.is_ok() {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(freed, "the slot of a cancelled stream was not released");
    server.stop().await;
}

#[tokio::test]
async fn stops_gracefully_while_idle() {
    let (wh, _) = world().await;
    let server = Server::start(wh, ServerOptions::default()).await;
    let mut c = server.client(None).await;
    assert_eq!(
        one_i64(&query(&mut c, "SELECT count(*) FROM orders").await),
        12
    );
    server.stop().await;
    assert!(c.get_catalogs().await.is_err(), "the server is gone");
}

/// A run committing date `d` of orders.
async fn commit_orders(orders: &logbook::Table, d: &str) {
    let run = logbook::RunInfo::new(format!("late-{d}"));
    let mut w = orders.replace_partition(date(d), run).await.unwrap();
    w.write(&crate::lifecycle::orders_batch(d)).await.unwrap();
    w.commit().await.unwrap();
}

/// `GetFlightInfo` plans against the tables' versions of that moment and
/// its ticket carries them: a commit that lands before `DoGet` does not
/// change what the fetch returns (a new `GetFlightInfo` sees it), whether
/// the fetch runs the plan kept for it or, on a server that keeps none,
/// plans again at the ticket's versions.
#[tokio::test]
async fn a_fetch_reads_the_versions_its_statement_was_planned_against() {
    let (wh, _) = world().await;
    let orders = wh.table("orders").await.unwrap();
    let sql = "SELECT count(*) FROM orders";
    for (max_kept_plans, d) in [(256, "2026-03-20"), (0, "2026-03-21")] {
        let options = ServerOptions {
            max_kept_plans,
            ..token_options()
        };
        let server = Server::start(wh.clone(), options).await;
        let mut c = server.client(Some(TOKEN)).await;
        let before = one_i64(&query(&mut c, sql).await);
        let info = c.execute(sql.to_string(), None).await.unwrap();
        commit_orders(&orders, d).await;
        let fetched = one_i64(&fetch(&mut c, info).await.unwrap());
        assert_eq!(fetched, before, "kept plans: {max_kept_plans}");
        assert!(one_i64(&query(&mut c, sql).await) > before);
        server.stop().await;
    }
}

/// `DoGet` runs the plan its `GetFlightInfo` made, without planning again:
/// an expiry in between (versions gone from the log, files kept until
/// vacuum) does not stop it. A second fetch of the ticket, whose plan was
/// taken, plans again at the ticket's versions: they expired, so it is
/// refused clearly rather than answered from another version.
#[tokio::test]
async fn a_fetch_runs_the_plan_made_for_it_and_a_second_fetch_plans_again() {
    let (wh, _) = world().await;
    let orders = wh.table("orders").await.unwrap();
    let server = Server::start(wh, token_options()).await;
    let mut c = server.client(Some(TOKEN)).await;
    let sql = "SELECT count(*) FROM orders";
    let before = one_i64(&query(&mut c, sql).await);
    let info = c.execute(sql.to_string(), None).await.unwrap();
    commit_orders(&orders, "2026-03-21").await;
    logbook::maintenance::expire::expire(&orders, logbook::maintenance::expire::Keep::Last(1))
        .await
        .unwrap();
    assert_eq!(one_i64(&fetch(&mut c, info.clone()).await.unwrap()), before);
    let (code, message) = status(&fetch(&mut c, info).await.unwrap_err());
    assert_eq!(code, tonic::Code::FailedPrecondition, "{message}");
    assert!(message.contains("GetFlightInfo again"), "{message}");
    server.stop().await;
}
