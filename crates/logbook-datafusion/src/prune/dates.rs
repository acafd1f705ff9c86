//! Dates: which partitions do a scan's filters allow?

use std::collections::BTreeSet;

use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::scalar::ScalarValue;
use logbook_core::DateSpan;

/// The dates (days since the epoch) filters allow on one column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DateBounds {
    lo: Option<i32>,
    hi: Option<i32>,
    only: Option<BTreeSet<i32>>,
}

impl DateBounds {
    /// Bounds implied by the conjunction of `filters` on `column`. Filters
    /// that say nothing about the column allow every date.
    pub fn from_filters(filters: &[Expr], column: &str) -> Self {
        let mut b = Self::default();
        for f in filters {
            b.add(f, column);
        }
        b
    }

    /// Is `day` allowed?
    pub fn allows(&self, day: i32) -> bool {
        self.lo.is_none_or(|lo| day >= lo)
            && self.hi.is_none_or(|hi| day <= hi)
            && self.only.as_ref().is_none_or(|s| s.contains(&day))
    }

    /// The dates allowed, as recorded in a run's lineage.
    pub fn span(&self) -> DateSpan {
        let date = |d: i32| logbook_core::dates::from_days(d);
        DateSpan {
            from: self.lo.map(date),
            to: self.hi.map(date),
            only: self
                .only
                .as_ref()
                .map(|days| days.iter().copied().map(date).collect()),
        }
    }

    fn restrict_to(&mut self, days: BTreeSet<i32>) {
        self.only = Some(match self.only.take() {
            Some(s) => s.intersection(&days).copied().collect(),
            None => days,
        });
    }

    fn at_least(&mut self, d: i32) {
        self.lo = Some(self.lo.map_or(d, |lo| lo.max(d)));
    }

    fn at_most(&mut self, d: i32) {
        self.hi = Some(self.hi.map_or(d, |hi| hi.min(d)));
    }

    fn add(&mut self, e: &Expr, column: &str) {
        match e {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::And,
                right,
            }) => {
                self.add(left, column);
                self.add(right, column);
            }
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                let (op, d) = match (
                    is_column(left, column),
                    date(right),
                    is_column(right, column),
                    date(left),
                ) {
                    (true, Some(d), _, _) => (*op, d),
                    (_, _, true, Some(d)) => match op.swap() {
                        Some(op) => (op, d),
                        None => return,
                    },
                    _ => return,
                };
                match op {
                    Operator::Eq => self.restrict_to(BTreeSet::from([d])),
                    Operator::Gt => self.at_least(d + 1),
                    Operator::GtEq => self.at_least(d),
                    Operator::Lt => self.at_most(d - 1),
                    Operator::LtEq => self.at_most(d),
                    _ => {}
                }
            }
            Expr::Between(b) if !b.negated && is_column(&b.expr, column) => {
                if let (Some(lo), Some(hi)) = (date(&b.low), date(&b.high)) {
                    self.at_least(lo);
                    self.at_most(hi);
                }
            }
            Expr::InList(l) if !l.negated && is_column(&l.expr, column) => {
                let days: Option<BTreeSet<i32>> = l.list.iter().map(date).collect();
                if let Some(days) = days {
                    self.restrict_to(days);
                }
            }
            _ => {}
        }
    }
}

fn is_column(e: &Expr, column: &str) -> bool {
    matches!(e, Expr::Column(c) if c.name == column)
}

fn date(e: &Expr) -> Option<i32> {
    match e {
        Expr::Literal(ScalarValue::Date32(Some(d)), _) => Some(*d),
        Expr::Cast(c) => date(&c.expr),
        Expr::Literal(ScalarValue::Utf8(Some(s)), _) => s
            .parse::<chrono::NaiveDate>()
            .ok()
            .map(logbook_core::dates::to_days),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn d(s: &str) -> ScalarValue {
        ScalarValue::Date32(Some(logbook_core::dates::to_days(s.parse().unwrap())))
    }

    #[test]
    fn equality_ranges_and_lists_prune() {
        let day = |s: &str| logbook_core::dates::to_days(s.parse().unwrap());
        let b = DateBounds::from_filters(&[col("date").eq(lit(d("2026-03-15")))], "date");
        assert!(b.allows(day("2026-03-15")) && !b.allows(day("2026-03-16")));
        let b = DateBounds::from_filters(
            &[col("date")
                .gt_eq(lit(d("2026-03-10")))
                .and(lit(d("2026-03-12")).gt(col("date")))],
            "date",
        );
        assert!(
            !b.allows(day("2026-03-09"))
                && b.allows(day("2026-03-11"))
                && !b.allows(day("2026-03-12"))
        );
        let b = DateBounds::from_filters(
            &[col("date").in_list(vec![lit(d("2026-01-01")), lit(d("2026-02-01"))], false)],
            "date",
        );
        assert!(b.allows(day("2026-02-01")) && !b.allows(day("2026-01-15")));
        let b = DateBounds::from_filters(&[col("amount").gt(lit(5))], "date");
        assert!(b.allows(0), "a filter on another column prunes nothing");
        let b = DateBounds::from_filters(&[col("date").not_eq(lit(d("2026-01-01")))], "date");
        assert!(
            b.allows(day("2026-01-01")),
            "!= is not used for pruning (kept, filtered later)"
        );
    }
}
