"""The Flight SQL server queried with the official ADBC driver.

Run by scripts/flight-adbc.sh, which builds the demo warehouse (`logbook
demo`: customer c-17 moves from Berlin to Munich on 2026-02-15), starts
`logbook serve` with a token and passes its address, token and pid here.
"""

import argparse
import datetime
import sys
import unittest

import adbc_driver_flightsql.dbapi as flightsql
from adbc_driver_flightsql import DatabaseOptions
from adbc_driver_manager import Error as AdbcError

ARGS = None
CALL_HEADER = "adbc.flight.sql.rpc.call_header."
REGION_OF_C17 = "SELECT region FROM customers WHERE customer = 'c-17'"


def connect(token=None, cookies=True, headers=None, uri=None, ca=None):
    kwargs = {}
    if ca is not None:
        with open(ca) as f:
            kwargs[DatabaseOptions.TLS_ROOT_CERTS.value] = f.read()
    if token is not None:
        kwargs[DatabaseOptions.AUTHORIZATION_HEADER.value] = f"Bearer {token}"
    if cookies:
        # Keeps the session cookie the server sets on SET.
        kwargs[DatabaseOptions.WITH_COOKIE_MIDDLEWARE.value] = "true"
    for name, value in (headers or {}).items():
        kwargs[CALL_HEADER + name] = value
    return flightsql.connect(uri or ARGS.uri, db_kwargs=kwargs, autocommit=True)


def scalar(cur, sql, parameters=None):
    cur.execute(sql, parameters)
    rows = cur.fetchall()
    assert len(rows) == 1, rows
    return rows[0][0]


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM")


class FlightSqlWithAdbc(unittest.TestCase):
    def setUp(self):
        self.conn = connect(ARGS.token)
        self.cur = self.conn.cursor()

    def tearDown(self):
        self.cur.close()
        self.conn.close()

    def test_lists_tables_with_their_schemas(self):
        objects = self.conn.adbc_get_objects(depth="tables").read_all().to_pylist()
        catalogs = {c["catalog_name"]: c for c in objects}
        self.assertIn("logbook", catalogs)
        schemas = {s["db_schema_name"]: s for s in catalogs["logbook"]["catalog_db_schemas"]}
        tables = {t["table_name"] for t in schemas["public"]["db_schema_tables"]}
        self.assertTrue({"orders", "customers", "revenue_by_region"} <= tables, tables)
        schema = self.conn.adbc_get_table_schema("customers")
        self.assertEqual(schema.names, ["customer", "region", "valid_from", "valid_to"])
        self.assertIn("TABLE", self.conn.adbc_get_table_types())

    def test_as_of_query_at_a_logical_date_berlin_then_munich(self):
        # Before the move: the customer was in Berlin as of the date...
        self.cur.execute("SET logbook.logical_date = '2026-02-01'")
        self.assertEqual(scalar(self.cur, REGION_OF_C17), "Berlin")
        self.assertEqual(scalar(self.cur, "SELECT logical_date()"), datetime.date(2026, 2, 1))
        # ...and is in Munich in today's dimensions (a restated view).
        self.cur.execute("SET logbook.dimensions = 'current'")
        self.assertEqual(scalar(self.cur, REGION_OF_C17), "Munich")
        # The session is this connection's: another one sees the history.
        with connect(ARGS.token) as other, other.cursor() as cur:
            cur.execute(REGION_OF_C17 + " ORDER BY valid_from")
            self.assertEqual([r[0] for r in cur.fetchall()], ["Berlin", "Munich"])

    def test_per_statement_settings_by_header_without_cookies(self):
        headers = {"x-logbook-logical-date": "2026-02-01"}
        with connect(ARGS.token, cookies=False, headers=headers) as conn, conn.cursor() as cur:
            self.assertEqual(scalar(cur, REGION_OF_C17), "Berlin")
        headers["x-logbook-dimensions"] = "current"
        with connect(ARGS.token, cookies=False, headers=headers) as conn, conn.cursor() as cur:
            self.assertEqual(scalar(cur, REGION_OF_C17), "Munich")

    def test_a_run_context_refuses_the_wall_clock(self):
        self.cur.execute("SET logbook.logical_date = '2026-02-01'")
        with self.assertRaises(AdbcError) as e:
            self.cur.execute("SELECT now()")
        self.assertIn("logical_date()", str(e.exception))

    def test_time_travel_with_snapshot(self):
        latest = scalar(self.cur, "SELECT count(*) FROM orders")
        first = scalar(self.cur, "SELECT count(*) FROM snapshot('orders', 1)")
        dates = scalar(self.cur, "SELECT count(DISTINCT date) FROM snapshot('orders', 1)")
        self.assertEqual(dates, 1)
        self.assertLess(first, latest)

    def test_prepared_statement_with_a_parameter(self):
        day = datetime.date(2026, 2, 13)
        expected = scalar(self.cur, "SELECT count(*) FROM orders WHERE date = DATE '2026-02-13'")
        self.assertGreater(expected, 0)
        got = scalar(self.cur, "SELECT count(*) FROM orders WHERE date = ?", (day,))
        self.assertEqual(got, expected)
        # The same statement, re-bound.
        none = scalar(self.cur, "SELECT count(*) FROM orders WHERE date = ?", (datetime.date(2030, 1, 1),))
        self.assertEqual(none, 0)

    def test_refuses_a_request_without_the_token(self):
        for token in (None, "wrong-token"):
            with connect(token) as conn, conn.cursor() as cur:
                with self.assertRaises(AdbcError) as e:
                    cur.execute("SELECT 1")
                self.assertIn("UNAUTHENTICATED", str(e.exception))

    def test_refuses_writes(self):
        before = scalar(self.cur, "SELECT count(*) FROM orders")
        for sql in (
            "INSERT INTO orders VALUES (DATE '2026-02-13', 1, 'c-17', 1.0, 'paid')",
            "CREATE TABLE copy AS SELECT * FROM orders",
            "DROP TABLE orders",
        ):
            with self.assertRaises(AdbcError) as e:
                self.cur.execute(sql)
            self.assertIn("read-only", str(e.exception), sql)
        self.assertEqual(scalar(self.cur, "SELECT count(*) FROM orders"), before)

    def test_ten_million_rows_stream_with_bounded_server_memory(self):
        rows = 10_000_000
        before = peak_rss_kib(ARGS.server_pid)
        self.cur.execute(
            f"SELECT value, value * 2 AS doubled FROM generate_series(1, {rows})"
        )
        seen = 0
        for batch in self.cur.fetch_record_batch():
            seen += batch.num_rows
        self.assertEqual(seen, rows)
        grown_mib = (peak_rss_kib(ARGS.server_pid) - before) / 1024
        result_mib = rows * 16 / 2**20
        print(
            f"\n  server peak RSS grew {grown_mib:.0f} MiB for a {result_mib:.0f} MiB result",
            file=sys.stderr,
        )
        # Buffering the result would grow it by at least the result's size.
        self.assertLess(grown_mib, ARGS.max_growth_mib)


class OverTls(unittest.TestCase):
    """The same server with `--tls-cert`/`--tls-key` (a certificate made by
    scripts/flight-adbc.sh): grpc+tls:// with the server's CA answers;
    another CA, a plain client, or no token is refused."""

    def setUp(self):
        if not ARGS.tls_uri:
            self.skipTest("no TLS server given")

    def test_queries_over_tls_with_the_servers_ca(self):
        with connect(ARGS.token) as plain, plain.cursor() as cur:
            want = scalar(cur, "SELECT count(*) FROM orders")
        with connect(ARGS.token, uri=ARGS.tls_uri, ca=ARGS.ca) as conn, conn.cursor() as cur:
            self.assertEqual(scalar(cur, "SELECT count(*) FROM orders"), want)
            cur.execute("SET logbook.logical_date = '2026-03-01'")
            self.assertEqual(scalar(cur, REGION_OF_C17), "Munich")

    def test_a_client_trusting_another_ca_is_refused(self):
        with self.assertRaisesRegex(AdbcError, "(?i)certificate|x509|authority"):
            with connect(ARGS.token, uri=ARGS.tls_uri, ca=ARGS.wrong_ca) as conn, conn.cursor() as cur:
                scalar(cur, "SELECT 1")

    def test_a_plain_client_is_refused(self):
        plain_uri = ARGS.tls_uri.replace("grpc+tls://", "grpc://")
        with self.assertRaisesRegex(AdbcError, "(?i)unavailable|connection|EOF|http2|frame"):
            with connect(ARGS.token, uri=plain_uri) as conn, conn.cursor() as cur:
                scalar(cur, "SELECT 1")

    def test_the_token_is_still_required(self):
        with self.assertRaisesRegex(AdbcError, "(?i)unauthenticated|token"):
            with connect(None, uri=ARGS.tls_uri, ca=ARGS.ca) as conn, conn.cursor() as cur:
                scalar(cur, "SELECT 1")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--uri", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--server-pid", type=int, required=True)
    p.add_argument("--max-growth-mib", type=float, default=64)
    p.add_argument("--tls-uri", help="the same warehouse served with TLS")
    p.add_argument("--ca", help="the TLS server's CA certificate (PEM)")
    p.add_argument("--wrong-ca", help="a CA that did not sign the server's certificate")
    ARGS, rest = p.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
