//! The one predicate every level prunes with, built once per scan.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arrow_schema::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::DFSchema;
use datafusion::logical_expr::utils::split_conjunction;
use datafusion::logical_expr::Expr;
use datafusion::physical_expr::utils::{collect_columns, conjunction};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};

/// A scan's pushed-down filters as pruning predicates over the table's
/// columns (by their current names; files are matched by field id).
#[derive(Debug)]
pub(crate) struct ScanPredicate {
    /// The conjunction of every filter that could be planned.
    pub(crate) whole: Arc<PruningPredicate>,
    /// One predicate per conjunct that tests a single column. Pages of
    /// different columns start at different rows, so the page index is
    /// consulted column by column and the row selections intersected
    /// (DataFusion's own Parquet source does the same).
    pub(crate) per_column: Vec<(String, Arc<PruningPredicate>)>,
    pub(crate) counts: PruneCounts,
    /// The planned filters the predicates were built from (what a plan
    /// sent to another process carries, to build them again there).
    pub(crate) conjuncts: Vec<Arc<dyn PhysicalExpr>>,
}

impl ScanPredicate {
    /// `None` when no filter can prune (none given, or none plannable).
    /// A filter DataFusion cannot plan on its own (a subquery) is left out,
    /// which only prunes less: DataFusion still applies every filter.
    /// Pages are not tested on `constant` (the partition column: every
    /// row of a file has the same date, and the dates were pruned
    /// already), so a date filter alone does not fetch page indexes.
    pub(crate) fn new(
        filters: &[Expr],
        schema: &SchemaRef,
        state: &dyn Session,
        constant: Option<&str>,
    ) -> Option<Self> {
        let df_schema = DFSchema::try_from(schema.as_ref().clone()).ok()?;
        let conjuncts: Vec<Arc<dyn PhysicalExpr>> = filters
            .iter()
            .flat_map(split_conjunction)
            .filter_map(|e| state.create_physical_expr(e.clone(), &df_schema).ok())
            .collect();
        Self::from_conjuncts(conjuncts, schema, constant)
    }

    /// The predicate of planned filters (`new` plans them from a query's
    /// expressions; a decoded plan has them planned already).
    pub(crate) fn from_conjuncts(
        conjuncts: Vec<Arc<dyn PhysicalExpr>>,
        schema: &SchemaRef,
        constant: Option<&str>,
    ) -> Option<Self> {
        if conjuncts.is_empty() {
            return None;
        }
        let build = |e: Arc<dyn PhysicalExpr>| {
            PruningPredicateBuilder::new()
                .with_file_schema(schema.clone())
                .build(e)
        };
        // Conjuncts on one column are joined (`id >= a AND id <= b` is one
        // test of each page, not two).
        let mut by_column: Vec<(String, Vec<Arc<dyn PhysicalExpr>>)> = Vec::new();
        for e in &conjuncts {
            let columns = collect_columns(e);
            let mut names = columns.iter().map(|c| c.name().to_string());
            if let (Some(name), None) = (names.next(), names.next()) {
                if Some(name.as_str()) == constant {
                    continue;
                }
                match by_column.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, es)) => es.push(e.clone()),
                    None => by_column.push((name, vec![e.clone()])),
                }
            }
        }
        let per_column = by_column
            .into_iter()
            .filter_map(|(name, es)| build(conjunction(es)).map(|p| (name, p)))
            .collect();
        let whole = build(conjunction(conjuncts.clone()))?;
        Some(Self {
            whole,
            per_column,
            counts: PruneCounts::default(),
            conjuncts,
        })
    }
}

/// What pruning skipped, for `EXPLAIN ANALYZE`.
#[derive(Debug, Default)]
pub(crate) struct PruneCounts {
    pub(crate) files: AtomicU64,
    pub(crate) row_groups_by_statistics: AtomicU64,
    pub(crate) row_groups_by_bloom_filter: AtomicU64,
    pub(crate) row_groups_by_page_index: AtomicU64,
    pub(crate) pages: AtomicU64,
    pub(crate) pages_pruned: AtomicU64,
}

impl PruneCounts {
    pub(crate) fn add(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// `(metric name, value)` pairs.
    pub(crate) fn values(&self) -> [(&'static str, u64); 6] {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            ("files_pruned", l(&self.files)),
            (
                "row_groups_pruned_statistics",
                l(&self.row_groups_by_statistics),
            ),
            (
                "row_groups_pruned_bloom_filter",
                l(&self.row_groups_by_bloom_filter),
            ),
            (
                "row_groups_pruned_page_index",
                l(&self.row_groups_by_page_index),
            ),
            ("pages_tested", l(&self.pages)),
            ("pages_pruned", l(&self.pages_pruned)),
        ]
    }
}
