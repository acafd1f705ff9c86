//! The HTML pages, rendered on the server with `maud` (every interpolated
//! string is escaped). Each page reads the same data its `/api` twin serves.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use chrono::{Datelike, NaiveDate};
use logbook_core::lifecycle::{DateStatus, PartitionState};
use logbook_core::{answers, DimensionMode, PartitionSummary, TableKind};
use maud::{html, Markup, DOCTYPE};

use crate::api::{self, Range};
use crate::{AppState, UiError};

const CSS: &str = include_str!("assets/ui.css");
const JS: &str = include_str!("assets/ui.js");

pub(crate) async fn css() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS)
}

pub(crate) async fn js() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
}

/// A page, or the error as a page with its status code.
fn page(title: &str, result: Result<Markup, UiError>) -> Response {
    let (status, body) = match result {
        Ok(body) => (StatusCode::OK, body),
        Err(e) => (e.status(), html! { p.error { (e.to_string()) } }),
    };
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · logbook" }
                link rel="stylesheet" href="/assets/ui.css";
                script src="/assets/ui.js" defer {}
            }
            body {
                header { a href="/" { "logbook" } " " span.title { (title) } }
                main { (body) }
            }
        }
    };
    (status, Html(doc.into_string())).into_response()
}

fn state_class(s: PartitionState) -> String {
    format!("s-{s}")
}

/// `/`: every table with its kind, partitions, latest version and the
/// count of dates in each state.
pub(crate) async fn home(State(state): State<Arc<AppState>>) -> Response {
    let body = async {
        let count = state.summaries.get().await?;
        let tables = &count.tables;
        // The live runs are read now; a failure says so, the count stays.
        let live = state.warehouse.live_runs().await;
        Ok(html! {
            p.counted {
                "Tables, versions and dates per state as counted at " (time(count.counted_ms))
                " (" (count.age().as_secs()) " s ago; a visit after "
                (crate::summaries::FRESH_FOR.as_secs()) " s starts a new count, reload to see it). "
                "A table's own page is always current."
            }
            @if let Some(e) = &count.recount_failed {
                p.error { "The latest recount failed, so this count is older: " (e) }
            }
            table.list {
                thead { tr {
                    th { "table" } th { "kind" } th { "partitions" } th { "version" } th { "committed" }
                    @for s in PartitionState::ALL { th.num { (s.to_string()) } }
                } }
                tbody { @for t in tables { tr {
                    td { a href=(format!("/tables/{}", t.name)) { (t.name) }
                        @if let Some(e) = &t.error { div.error { (e) } } }
                    td { (t.kind) }
                    td.num { (t.partitions) }
                    td.num { (t.version) }
                    td { (t.committed_ms.map(time).unwrap_or_default()) }
                    @for s in PartitionState::ALL {
                        @let n = t.states.get(&s.to_string()).copied().unwrap_or(0);
                        td.num.(state_class(s)) { @if n > 0 { (n) } }
                    }
                } } }
            }
            @if tables.is_empty() { p { "No tables yet." } }
            @match &live {
                Ok(live) => (live_runs(live)),
                Err(e) => p.error { "The live runs could not be read: " (e) },
            }
        })
    }
    .await;
    page("warehouse", body)
}

/// The runs live now, by class: production runs (backfills hold back
/// while any is live), the backfill slots held and the heavy steps under way.
fn live_runs(live: &logbook_core::budget::LiveRuns) -> Markup {
    html! {
        h2 { "Live runs" }
        table.list.live {
            thead { tr { th { "class" } th { "run" } th { "not renewed for" } } }
            tbody {
                @for p in &live.production { tr {
                    td { "production" @if p.record.waiting { " (waiting)" } }
                    td { (p.record.table) " " (p.record.date.to_string()) ", run " (p.record.run_id) }
                    td.num { (p.unrenewed_ms / 1000) " s" }
                } }
                @for (k, s) in &live.backfill { tr {
                    td { "backfill (slot " (k) ")" }
                    td { (s.record.what) }
                    td.num { (s.unrenewed_ms / 1000) " s" }
                } }
                @for (k, s) in &live.heavy { tr {
                    td { "heavy step (slot " (k) ")" }
                    td { (s.record.what) }
                    td.num { (s.unrenewed_ms / 1000) " s" }
                } }
            }
        }
        @if live.production.is_empty() && live.backfill.is_empty() && live.heavy.is_empty() { p { "No run is live." } }
    }
}

fn time(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

/// A calendar of `dates`, one row per month, one cell per date, linked to
/// the partition's page; reasons in the cell's title and listed below.
fn calendar(table: &str, dates: &[DateStatus], range: &Range) -> Markup {
    let mut months: Vec<(String, Vec<&DateStatus>)> = Vec::new();
    for d in dates {
        let key = format!("{:04}-{:02}", d.date.year(), d.date.month());
        match months.last_mut() {
            Some((k, v)) if *k == key => v.push(d),
            _ => months.push((key, vec![d])),
        }
    }
    let url = format!(
        "/api/tables/{table}/status?{}to={}",
        range.from.map_or(String::new(), |f| format!("from={f}&")),
        range.to()
    );
    html! {
        div.calendar data-status=(url) {
            @for (month, days) in &months {
                div.month {
                    span.label { (month) }
                    div.days {
                        @for d in days {
                            a.cell.(state_class(d.state))
                                href=(format!("/tables/{table}/partitions/{}", d.date))
                                title=(cell_title(d))
                                data-date=(d.date.to_string())
                                style=(format!("grid-column: {}", d.date.day()))
                            { (d.date.day()) }
                        }
                    }
                }
            }
        }
        div.legend { @for s in PartitionState::ALL { span.cell.(state_class(s)) {} " " (s.to_string()) " " } }
    }
}

fn cell_title(d: &DateStatus) -> String {
    let mut t = format!("{} {}", d.date, d.state);
    for r in &d.reasons {
        t.push_str(&format!("\n{r}"));
    }
    for p in &d.problems {
        t.push_str(&format!("\n{p}"));
    }
    for r in &d.runs {
        t.push_str(&format!("\n{}", run_text(r)));
    }
    t
}

fn run_text(r: &logbook_core::lifecycle::RunningWrite) -> String {
    let what = if r.abandoned {
        "abandoned run"
    } else {
        "running"
    };
    format!(
        "{what} {} since {}",
        r.marker.run_id,
        time(r.marker.started_ms)
    )
}

/// Rows per date as a bar chart (inline SVG): the bad day stands out.
fn rows_chart(parts: &[PartitionSummary]) -> Markup {
    let max = parts.iter().map(|p| p.rows).max().unwrap_or(0).max(1) as f64;
    let w = 4.0;
    let width = (parts.len() as f64 * w).max(w);
    html! {
        svg.chart viewBox=(format!("0 0 {width} 100")) preserveAspectRatio="none" role="img" aria-label="rows per date" {
            @for (i, p) in parts.iter().enumerate() {
                @let h = p.rows as f64 / max * 100.0;
                rect x=(i as f64 * w) y=(100.0 - h) width=(w * 0.8) height=(h) {
                    title { (p.date) ": " (p.rows) " rows" }
                }
            }
        }
    }
}

/// `/tables/{name}`: the calendar, then properties, schema, recent log
/// entries and stages.
pub(crate) async fn table(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
    Query(range): Query<Range>,
) -> Response {
    let body = async {
        let t = api::open(&state, &name).await?;
        let snap = t.latest().await?;
        let schema = snap.schema().clone();
        let props = snap.properties().clone();
        // The latest 20 entries only: one read per entry.
        let log = t.history_from(snap.version().saturating_sub(19)).await?;
        let stages = t.stages().await?;
        let partitioned = matches!(schema.kind, TableKind::Partitioned { .. });
        let (dates, parts) = if partitioned {
            (
                api::date_statuses(&state, &name, &range).await?,
                answers::partitions(&t, None).await?,
            )
        } else {
            (Vec::new(), Vec::new())
        };
        let column = |id: &u32| {
            schema
                .columns
                .iter()
                .find(|c| c.id == *id)
                .map_or(format!("#{id}"), |c| c.name.clone())
        };
        Ok(html! {
            @if partitioned {
                h2 { "Dates" }
                (calendar(&name, &dates, &range))
                @let open: Vec<&DateStatus> = dates.iter().filter(|d| d.state != PartitionState::Complete).collect();
                @if !open.is_empty() {
                    ul.reasons { @for d in open {
                        li {
                            a href=(format!("/tables/{name}/partitions/{}", d.date)) { (d.date) }
                            " " span.(state_class(d.state)) { (d.state.to_string()) }
                            @for r in &d.reasons { div { (r.to_string()) } }
                            @for p in &d.problems { div { (p.to_string()) } }
                            @for r in &d.runs { div { (run_text(r)) } }
                        }
                    } }
                }
                h2 { "Rows per date" }
                (rows_chart(&parts))
            } @else {
                p { "A dimension (SCD2) keyed by " (dimension_keys(&schema.kind)) "." }
            }
            h2 { "Properties" }
            dl {
                dt { "version" } dd { (snap.version()) }
                dt { "schedule start" } dd { (props.schedule_start.map_or("first committed date".into(), |d| d.to_string())) }
                dt { "each date reads the previous" } dd { (props.depends_on_previous) }
                dt { "sorted by" } dd { (props.sort_by.iter().map(column).collect::<Vec<_>>().join(", ")) }
                dt { "bloom filters" } dd { (props.bloom_filters.iter().map(column).collect::<Vec<_>>().join(", ")) }
                dt { "mirror" } dd { (mirrors_shown(&props)) }
            }
            h2 { "Schema (version " (schema.version) ")" }
            table.list {
                thead { tr { th { "field id" } th { "column" } th { "type" } th { "nullable" } } }
                tbody { @for c in &schema.columns { tr {
                    td.num { (c.id) } td { (c.name) } td { (c.ty.name()) } td { (c.nullable) }
                } } }
            }
            h2 { "Log (latest 20)" }
            table.list {
                thead { tr { th { "version" } th { "committed" } th { "operation" } th { "dates" } th { "run" } th { "rows" } } }
                tbody { @for e in log.iter().rev() { tr {
                    td.num { (e.version) }
                    td { (time(e.timestamp_ms)) }
                    td { (e.operation.to_string()) @if let Some(c) = &e.change { " (" (c) ")" } }
                    td { (dates_text(&e.dates)) }
                    td.mono { (e.run.as_ref().map_or("", |r| r.run_id.as_str())) }
                    td.num { (e.rows_added) }
                } } }
            }
            h2 { "Stages" }
            @if stages.is_empty() { p { "None." } }
            ul { @for s in &stages { li {
                a href=(format!("/tables/{name}/stages/{}", s.name)) { (s.name) }
                " from version " (s.base_version)
                @if let Some(v) = s.published { " (published at " (v) ")" }
            } } }
        })
    }
    .await;
    page(&name, body)
}

fn dimension_keys(kind: &TableKind) -> String {
    match kind {
        TableKind::Scd2 { keys } => keys.join(", "),
        TableKind::Partitioned { .. } => String::new(),
    }
}

fn dates_text(dates: &[NaiveDate]) -> String {
    match (dates.first(), dates.last(), dates.len()) {
        (_, _, 0) => String::new(),
        (Some(a), _, 1) => a.to_string(),
        (Some(a), Some(b), n) => format!("{a}..{b} ({n})"),
        _ => String::new(),
    }
}

fn mode(m: Option<DimensionMode>) -> &'static str {
    match m {
        Some(DimensionMode::AsOf) => "as-of: the corrected original (dimensions as they stood)",
        Some(DimensionMode::Current) => "current: restated (today's dimensions)",
        None => "no dimensions read",
    }
}

/// `/tables/{name}/partitions/{date}`: the run that wrote it, with its
/// inputs linked, the partition's history, and why it is stale.
pub(crate) async fn partition(
    State(state): State<Arc<AppState>>,
    Path((name, date)): Path<(String, String)>,
) -> Response {
    let title = format!("{name} {date}");
    let body = async {
        let v = api::partition_view(&state, &name, &date).await?;
        let run = v.entry.as_ref().and_then(|e| e.run.as_ref());
        Ok(html! {
            p { span.(state_class(v.status.state)) { (v.status.state.to_string()) } }
            @if !v.status.reasons.is_empty() {
                h2 { "Why it is stale" }
                ul { @for r in &v.status.reasons { li { (r.to_string()) } } }
            }
            @if !v.status.problems.is_empty() {
                h2 { "Problems" }
                ul { @for p in &v.status.problems { li { (p.to_string()) } } }
            }
            @if !v.status.runs.is_empty() {
                h2 { "Writes in progress" }
                ul { @for r in &v.status.runs { li.mono { (run_text(r)) } } }
            }
            @if let Some(e) = &v.entry {
                h2 { "Run" }
                dl {
                    dt { "version" } dd { (e.version) }
                    dt { "rows" } dd { (e.rows) }
                    dt { "run id" } dd.mono { (run.map_or("", |r| r.run_id.as_str())) }
                    dt { "code version" } dd.mono { (run.and_then(|r| r.code_version.as_deref()).unwrap_or("")) }
                    dt { "dimensions" } dd { (mode(run.and_then(|r| r.dimensions))) }
                }
                @if let Some(q) = run.and_then(|r| r.query.as_deref()) {
                    h2 { "Query" }
                    pre { (q) }
                }
                @let inputs = run.map(|r| r.inputs.as_slice()).unwrap_or_default();
                @if !inputs.is_empty() {
                    h2 { "Inputs" }
                    table.list {
                        thead { tr { th { "table" } th { "version" } th { "read" } } }
                        tbody { @for i in inputs { tr {
                            td { a href=(format!("/tables/{}", i.table)) { (i.table) } }
                            td.num { (i.version) }
                            td {
                                @if let Some(ds) = &i.dates {
                                    @for d in ds { a href=(format!("/tables/{}/partitions/{d}", i.table)) { (d) } " " }
                                } @else if i.dimension {
                                    "dimension "
                                    @if i.undated { "(current rows: undated)" }
                                    @else { "as of " (i.as_of.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")) }
                                }
                            }
                        } } }
                    }
                }
            } @else {
                p { "No partition is committed for this date." }
            }
            h2 { "History" }
            table.list {
                thead { tr { th { "version" } th { "committed" } th { "operation" } th { "run" } } }
                tbody { @for l in &v.history { tr {
                    td.num { (l.entry.version) }
                    td { (time(l.entry.timestamp_ms)) }
                    td { (l.entry.operation.to_string()) }
                    td.mono { (l.entry.run.as_ref().map_or("", |r| r.run_id.as_str())) }
                } } }
            }
            p { a href=(format!("/tables/{name}")) { "back to " (name) } }
        })
    }
    .await;
    page(&title, body)
}

/// `/tables/{name}/stages/{stage}`: per staged date, rows and numeric
/// sums, main line vs stage (as `logbook stage diff` prints).
pub(crate) async fn stage(
    State(state): State<Arc<AppState>>,
    Path((name, stage)): Path<(String, String)>,
) -> Response {
    let title = format!("{name} stage {stage}");
    let body = async {
        let diff = api::stage_diff(&state, &name, &stage).await?;
        let columns: Vec<String> = diff
            .iter()
            .flat_map(|d| d.sums.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        Ok(html! {
            table.list {
                thead { tr {
                    th { "date" } th { "rows (main)" } th { "rows (stage)" }
                    @for c in &columns { th { (c) " (main)" } th { (c) " (stage)" } }
                } }
                tbody { @for d in &diff { tr {
                    td { a href=(format!("/tables/{name}/partitions/{}", d.date)) { (d.date) } }
                    td.num { (d.old_rows.map_or("-".into(), |n| n.to_string())) }
                    td.num { (d.new_rows) }
                    @for c in &columns {
                        @let (old, new) = d.sums.get(c).copied().unwrap_or((None, 0.0));
                        td.num { (old.map_or("-".into(), |v| format!("{v:.2}"))) }
                        td.num.(if old != Some(new) { "changed" } else { "" }) { (format!("{new:.2}")) }
                    }
                } } }
            }
            p { a href=(format!("/tables/{name}")) { "back to " (name) } }
        })
    }
    .await;
    page(&title, body)
}

/// The mirrors that are on, as the table page shows them.
fn mirrors_shown(props: &logbook_core::TableProperties) -> String {
    let on: Vec<String> = props
        .mirrors()
        .iter()
        .map(|m| m.format.to_string())
        .collect();
    match on.is_empty() {
        true => "none".into(),
        false => on.join(", "),
    }
}
