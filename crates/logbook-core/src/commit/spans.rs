//! The index above month manifests: which months the next root lists, and
//! in format 2 the span manifests between them.
//!
//! Format 1 roots list every month, so each commit rewrites a list that
//! grows with the table's age. Format 2 roots list five-year spans, each
//! listing its months: a commit rewrites only the spans holding a month it
//! changed (one, unless it crosses a span boundary), so its cost is bounded
//! by what it changes, not by the table's size, and reading one partition
//! costs one more GET (root, span, month). Spans are fixed by date, not
//! split as they fill like a B-tree's nodes: the same date is always under
//! the same span, so two versions' spans compare by path and nothing is
//! rebalanced. Alternatives measured against this in BENCHMARKS.md
//! ("Commit cost at 100,000 partitions"): one-year spans (the root grows
//! five times faster) and a deeper tree (one more GET per read, for a root
//! that is already small).

use std::collections::BTreeMap;

use bytes::Bytes;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::format::{layout, span_key_of_month, MonthRef, SpanManifest, SpanRef, FORMAT_SPANS};
use crate::handle::TableInner;
use crate::snapshot::Snapshot;

/// The index of the next root: its months (format 1) or spans (format 2).
pub(super) struct Index {
    pub months: Vec<MonthRef>,
    pub spans: Vec<SpanRef>,
    /// Span manifests to write, encoded, by path.
    pub writes: Vec<(String, Bytes)>,
}

/// The next version's index in `format`: the head's with the `changed`
/// months (by key) in place. A head in format 1 moving to format 2 has
/// every month placed under its span (the upgrade writes every span).
/// New span manifests go under the commit attempt's `attempt_id`.
/// `cache`: keep the span manifests written in the handle's cache (when
/// the commit's mirror entry reads them right after).
pub(super) async fn index(
    table: &TableInner,
    head: &Snapshot,
    format: u32,
    changed: BTreeMap<String, MonthRef>,
    attempt_id: Uuid,
    cache: bool,
) -> Result<Index> {
    if format < FORMAT_SPANS {
        let mut months: BTreeMap<String, MonthRef> = month_map(head.root().months.iter());
        months.extend(changed);
        return Ok(Index {
            months: months.into_values().collect(),
            spans: Vec::new(),
            writes: Vec::new(),
        });
    }
    let mut rewritten: BTreeMap<String, BTreeMap<String, MonthRef>> =
        head_spans(table, head, changed.keys().map(String::as_str))
            .await?
            .into_iter()
            .map(|(span, months)| (span, month_map(months.iter())))
            .collect();
    for (month, r) in changed {
        let span = span_of(table, head, &month)?;
        rewritten.entry(span).or_default().insert(month, r);
    }
    let mut spans: BTreeMap<String, SpanRef> = head
        .span_refs()
        .iter()
        .map(|s| (s.span.clone(), s.clone()))
        .collect();
    let mut writes = Vec::new();
    for (span, months) in rewritten {
        let manifest = SpanManifest {
            span: span.clone(),
            months: months.into_values().collect(),
        };
        let path = layout::span_manifest(attempt_id, &span);
        spans.insert(span, span_ref(&path, &manifest));
        writes.push((path.clone(), table.encode(&manifest)?));
        if cache {
            table.cache_span(path, manifest);
        }
    }
    Ok(Index {
        months: Vec::new(),
        spans: spans.into_values().collect(),
        writes,
    })
}

/// The months, as at the head, of every span the next version (in format
/// 2) rewrites: those holding a month of `changed`, or every month when a
/// format 1 head moves to spans.
async fn head_spans(
    table: &TableInner,
    head: &Snapshot,
    changed: impl Iterator<Item = &str>,
) -> Result<BTreeMap<String, Vec<MonthRef>>> {
    let mut spans: BTreeMap<String, Vec<MonthRef>> = BTreeMap::new();
    if head.root().format < FORMAT_SPANS {
        for m in &head.root().months {
            let span = span_of(table, head, &m.month)?;
            spans.entry(span).or_default().push(m.clone());
        }
        return Ok(spans);
    }
    for month in changed {
        let span = span_of(table, head, month)?;
        if spans.contains_key(&span) {
            continue;
        }
        let months = match head.span(&span).await? {
            Some(s) => s.months.clone(),
            None => Vec::new(),
        };
        spans.insert(span, months);
    }
    Ok(spans)
}

fn month_map<'a>(months: impl Iterator<Item = &'a MonthRef>) -> BTreeMap<String, MonthRef> {
    months.map(|m| (m.month.clone(), m.clone())).collect()
}

/// The span of `month`; a month key that is not `YYYY-MM` is corruption of
/// the head's manifests (the only place keys not made from a date come from).
fn span_of(table: &TableInner, head: &Snapshot, month: &str) -> Result<String> {
    span_key_of_month(month).ok_or_else(|| Error::Corrupt {
        table: table.name.clone(),
        path: head.entry().manifest.clone(),
        reason: format!("month key {month:?} is not YYYY-MM"),
    })
}

fn span_ref(path: &str, manifest: &SpanManifest) -> SpanRef {
    let sum = |f: fn(&MonthRef) -> u64| manifest.months.iter().map(f).sum();
    SpanRef {
        span: manifest.span.clone(),
        path: path.to_string(),
        partitions: sum(|m| u64::from(m.partitions)),
        rows: sum(|m| m.rows),
        files: sum(|m| m.files),
    }
}
