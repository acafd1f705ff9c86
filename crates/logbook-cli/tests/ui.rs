//! `logbook ui` as a user starts it: routes, JSON equal to the CLI's
//! `--json`, refusals (other methods, bad names, unknown tables, missing
//! token) and escaping of user-supplied text.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::*;
use serde_json::Value;

/// A running `logbook ui`, stopped when dropped.
struct Ui {
    child: Child,
    addr: String,
}

impl Ui {
    fn start(wh: &Path, extra: &[&str]) -> Ui {
        let mut child = Command::new(env!("CARGO_BIN_EXE_logbook"))
            .arg("--warehouse")
            .arg(wh)
            .args(["ui", "--listen", "127.0.0.1:0"])
            .args(extra)
            .env_remove("LOGBOOK_WAREHOUSE")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start logbook ui");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Ui { child, addr }
    }

    /// `(status, headers, body)` of one request.
    fn call(&self, method: &str, path: &str, headers: &[&str]) -> (u16, String, String) {
        let host = format!("Host: {}", self.addr);
        self.raw(method, path, &[&[host.as_str()][..], headers].concat())
    }

    /// [`Ui::call`] with exactly the headers given (no `Host` added).
    fn raw(&self, method: &str, path: &str, headers: &[&str]) -> (u16, String, String) {
        let mut s = TcpStream::connect(&self.addr).unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("Content-Length: 0\r\n\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = String::new();
        s.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head.to_string(), body.to_string())
    }

    fn get(&self, path: &str) -> (u16, String) {
        let (status, _, body) = self.call("GET", path, &[]);
        (status, body)
    }

    fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }
}

impl Drop for Ui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn cli_json(wh: &Path, args: &[&str]) -> Value {
    serde_json::from_str(&ok(&logbook(wh, args))).unwrap()
}

/// Two dates of orders, one rewritten with a code version holding markup,
/// and a stage restating one date.
fn warehouse() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wh = dir.path();
    create_orders(wh);
    for (date, file) in [
        ("2026-03-15", "orders-2026-03-15.csv"),
        ("2026-03-16", "orders-2026-03-16.csv"),
    ] {
        ok(&logbook(
            wh,
            &[
                "write",
                "orders",
                "--date",
                date,
                fixture(file).to_str().unwrap(),
                "--run-id",
                &format!("r-{date}"),
            ],
        ));
    }
    let fixed = fixture("orders-2026-03-15-fixed.csv");
    ok(&logbook(
        wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-15",
            fixed.to_str().unwrap(),
            "--run-id",
            "r2",
            "--code-version",
            "<script>alert(1)</script>",
        ],
    ));
    ok(&logbook(
        wh,
        &[
            "write",
            "orders",
            "--date",
            "2026-03-15",
            fixed.to_str().unwrap(),
            "--run-id",
            "s1",
            "--stage",
            "restate",
        ],
    ));
    dir
}

#[test]
fn every_api_answer_equals_the_clis_json() {
    let dir = warehouse();
    let wh = dir.path();
    let ui = Ui::start(wh, &[]);
    let range = ["--from", "2026-03-10", "--to", "2026-03-20"];
    assert_eq!(
        ui.json("/api/tables/orders/status?from=2026-03-10&to=2026-03-20"),
        cli_json(
            wh,
            &[&["status", "orders", "--json"][..], &range[..]].concat()
        )
    );
    assert_eq!(
        ui.json("/api/tables/orders/log"),
        cli_json(wh, &["log", "orders", "--json"])
    );
    assert_eq!(
        ui.json("/api/tables/orders/partitions"),
        cli_json(wh, &["partitions", "orders", "--json"])
    );
    assert_eq!(
        ui.json("/api/tables/orders/schema"),
        cli_json(wh, &["schema", "orders", "--json"])
    );
    assert_eq!(
        ui.json("/api/tables/orders/stages/restate"),
        cli_json(wh, &["stage", "diff", "orders", "restate", "--json"])
    );
    let count = ui.json("/api/tables");
    let tables = &count["tables"];
    assert_eq!(tables[0]["name"], "orders");
    assert_eq!(tables[0]["partitions"], 2);
    assert!(count["counted_ms"].as_i64().unwrap() > 0, "{count}");
}

#[test]
fn pages_render_the_calendar_lineage_and_stage_and_escape_user_text() {
    let dir = warehouse();
    let ui = Ui::start(dir.path(), &[]);
    let (status, home) = ui.get("/");
    assert_eq!(status, 200);
    assert!(home.contains(r#"href="/tables/orders""#), "{home}");

    let (status, page) = ui.get("/tables/orders?from=2026-03-14&to=2026-03-17");
    assert_eq!(status, 200);
    assert!(page.contains(r#"class="cell s-complete""#), "{page}");
    assert!(page.contains(r#"class="cell s-missing""#), "{page}");
    assert!(
        page.contains(r#"href="/tables/orders/partitions/2026-03-15""#),
        "{page}"
    );
    assert!(
        page.contains(r#"href="/tables/orders/stages/restate""#),
        "{page}"
    );

    let (status, page) = ui.get("/tables/orders/partitions/2026-03-15");
    assert_eq!(status, 200);
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("<script>alert"), "{page}");
    // The partition's history: both runs that wrote the date.
    assert!(
        page.contains("r-2026-03-15") && page.contains(">r2<"),
        "{page}"
    );

    let (status, page) = ui.get("/tables/orders/stages/restate");
    assert_eq!(status, 200);
    assert!(
        page.contains(r#"href="/tables/orders/partitions/2026-03-15""#),
        "{page}"
    );
    let (status, js) = ui.get("/assets/ui.js");
    assert_eq!(status, 200);
    assert!(js.contains("setTimeout"));
}

/// Every file of the warehouse with its bytes.
fn contents(wh: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = walk(wh)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn nothing_changes_through_the_ui_and_bad_names_are_refused() {
    let dir = warehouse();
    let wh = dir.path();
    let before = contents(wh);
    let ui = Ui::start(wh, &[]);
    for path in [
        "/",
        "/tables/orders",
        "/tables/orders/partitions/2026-03-15",
        "/tables/orders/stages/restate",
        "/api/tables",
        "/api/tables/orders/status",
        "/api/tables/orders/log",
        "/api/tables/orders/partitions",
        "/api/tables/orders/partitions/2026-03-15",
        "/api/tables/orders/schema",
        "/api/tables/orders/stages/restate",
    ] {
        assert_eq!(ui.get(path).0, 200, "{path}");
    }
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for path in [
            "/",
            "/api/tables",
            "/tables/orders",
            "/api/tables/orders/stages/restate",
        ] {
            let (status, _, _) = ui.call(method, path, &[]);
            assert_eq!(status, 405, "{method} {path}");
        }
    }
    assert_eq!(ui.get("/api/tables/nope/status").0, 404);
    assert_eq!(ui.get("/tables/nope").0, 404);
    assert_eq!(ui.get("/api/tables/orders/stages/nope").0, 404);
    // Opening a stage that does not exist must not create it.
    assert!(!walk(wh)
        .iter()
        .any(|p| p.to_string_lossy().contains("stages/nope")));
    assert_eq!(ui.get("/api/tables/..%2F..%2Fetc/status").0, 400);
    assert_eq!(ui.get("/tables/orders/partitions/yesterday").0, 400);
    let (status, body) = ui.get("/tables/%3Cb%3E");
    assert_eq!(status, 400);
    assert!(!body.contains("<b>"), "{body}");
    assert_eq!(
        ui.get("/api/tables/orders/status?from=2000-01-01&to=2026-03-20")
            .0,
        400
    );
    // Far-future dates are refused before any date is computed.
    assert_eq!(
        ui.get("/api/tables/orders/status?to=%2B262142-12-31").0,
        400
    );
    assert_eq!(ui.get("/tables/orders/partitions/%2B262142-12-31").0, 400);
    assert_eq!(ui.get("/api/tables/orders/stages/..%2Fx").0, 400);
    // A page on another name (DNS rebinding) is refused without a token.
    assert_eq!(ui.raw("GET", "/api/tables", &["Host: evil.example"]).0, 403);
    assert!(contents(wh) == before, "the UI wrote to the warehouse");
}

#[test]
fn a_token_is_required_when_given_and_a_link_sets_it_as_a_cookie() {
    let dir = warehouse();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let ui = Ui::start(dir.path(), &["--token-file", token.to_str().unwrap()]);
    assert_eq!(ui.get("/").0, 401);
    assert_eq!(ui.get("/api/tables").0, 401);
    assert_eq!(ui.call("GET", "/", &["Authorization: Bearer wrong"]).0, 401);
    assert_eq!(
        ui.call("GET", "/", &["Authorization: Bearer s3cret"]).0,
        200
    );
    let (status, head, _) = ui.call("GET", "/tables/orders?token=s3cret", &[]);
    assert_eq!(status, 303, "{head}");
    assert!(
        head.to_lowercase()
            .contains("set-cookie: logbook_ui_token=s3cret"),
        "{head}"
    );
    assert_eq!(
        ui.call(
            "GET",
            "/tables/orders",
            &["Cookie: logbook_ui_token=s3cret"]
        )
        .0,
        200
    );
}

#[test]
fn listening_beyond_loopback_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let err = refused(&logbook(dir.path(), &["ui", "--listen", "0.0.0.0:0"]));
    assert!(err.contains("without a token"), "{err}");
}

/// The live runs by class, on the home page and in the API: a production
/// run's announcement (as one on another machine leaves it), and none once
/// it is gone.
#[test]
fn the_home_page_shows_live_runs_by_class() {
    let dir = warehouse();
    let wh = dir.path();
    let live = wh.join("_logbook/production");
    std::fs::create_dir_all(&live).unwrap();
    std::fs::write(
        live.join("nightly.json"),
        r#"{"table":"revenue","date":"2026-03-21","run_id":"nightly-0321","beat":3,"lease_ms":600000,"started_ms":0}"#,
    )
    .unwrap();
    let ui = Ui::start(wh, &[]);
    let runs = ui.json("/api/runs");
    assert_eq!(
        runs["production"][0]["record"]["run_id"], "nightly-0321",
        "{runs}"
    );
    assert_eq!(runs["backfill"].as_array().unwrap().len(), 0, "{runs}");
    let (code, home) = ui.get("/");
    assert_eq!(code, 200);
    assert!(
        home.contains("Live runs") && home.contains("nightly-0321"),
        "{home}"
    );
    std::fs::remove_file(live.join("nightly.json")).unwrap();
    let (_, home) = ui.get("/");
    assert!(home.contains("No run is live."), "{home}");
}
