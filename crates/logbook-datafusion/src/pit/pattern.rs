//! Recognising a validity-range predicate in a join filter.
//!
//! The pattern is the one a point-in-time join on an SCD2 dimension is
//! written with, in either operand order:
//!
//! ```text
//! p >= valid_from AND (valid_to IS NULL OR p < valid_to)   -- open end
//! p >= valid_from AND p < valid_to                         -- closed end
//! ```
//!
//! where `p` is a column of one input and `valid_from`/`valid_to` are columns
//! of the other, all three of the same orderable integer-like type. Anything
//! else (another conjunct, a cast, a function) is not recognised, and the
//! join stays a hash join.

use std::sync::Arc;

use arrow_schema::{DataType, Schema};
use datafusion::common::JoinSide;
use datafusion::logical_expr::Operator;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, IsNullExpr};
use datafusion::physical_expr::utils::split_conjunction;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::utils::JoinFilter;

/// Where the point and the interval bounds of a recognised filter live.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Validity {
    /// The input holding `valid_from` and `valid_to`.
    pub interval_side: JoinSide,
    /// Column index of the point (e.g. the fact's date) in the other input.
    pub point: usize,
    /// Column index of the inclusive lower bound in the interval input.
    pub from: usize,
    /// Column index of the exclusive upper bound in the interval input.
    pub to: usize,
    /// Whether a null upper bound means "still valid" (`valid_to IS NULL OR`).
    pub open_end: bool,
}

/// A column of the filter's intermediate schema, resolved to its input.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Side {
    side: JoinSide,
    index: usize,
}

/// Recognise `filter` as a validity range over `left` and `right`.
pub fn recognise(filter: &JoinFilter, left: &Schema, right: &Schema) -> Option<Validity> {
    let conjuncts = split_conjunction(filter.expression());
    let [a, b] = conjuncts.as_slice() else {
        return None;
    };
    let resolve = |expr: &Arc<dyn PhysicalExpr>| -> Option<Side> {
        let column = expr.downcast_ref::<Column>()?;
        let at = filter.column_indices().get(column.index())?;
        Some(Side {
            side: at.side,
            index: at.index,
        })
    };
    let (lower, upper) = match (lower_bound(a, &resolve), lower_bound(b, &resolve)) {
        (Some(l), None) => (l, upper_bound(b, &resolve)?),
        (None, Some(l)) => (l, upper_bound(a, &resolve)?),
        _ => return None,
    };
    let (point, from) = lower;
    let (upper_point, to, open_end) = upper;
    if point != upper_point
        || from.side != to.side
        || point.side == from.side
        || from.index == to.index
    {
        return None;
    }
    let schema_of = |side: JoinSide| match side {
        JoinSide::Left => left,
        _ => right,
    };
    let kind = |at: Side| {
        schema_of(at.side)
            .fields()
            .get(at.index)
            .map(|f| f.data_type())
    };
    let point_type = kind(point)?;
    if !is_orderable(point_type) || kind(from)? != point_type || kind(to)? != point_type {
        return None;
    }
    Some(Validity {
        interval_side: from.side,
        point: point.index,
        from: from.index,
        to: to.index,
        open_end,
    })
}

/// Types whose values are totally ordered as their `i64` representation.
pub fn is_orderable(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Date32
            | DataType::Date64
            | DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::Timestamp(_, _)
    )
}

/// `p >= from` or `from <= p`: returns (p, from).
fn lower_bound(
    expr: &Arc<dyn PhysicalExpr>,
    resolve: &impl Fn(&Arc<dyn PhysicalExpr>) -> Option<Side>,
) -> Option<(Side, Side)> {
    let b = expr.downcast_ref::<BinaryExpr>()?;
    let (l, r) = (resolve(b.left())?, resolve(b.right())?);
    match b.op() {
        Operator::GtEq => Some((l, r)),
        Operator::LtEq => Some((r, l)),
        _ => None,
    }
}

/// `p < to` / `to > p`, optionally `to IS NULL OR` either: returns (p, to, open_end).
fn upper_bound(
    expr: &Arc<dyn PhysicalExpr>,
    resolve: &impl Fn(&Arc<dyn PhysicalExpr>) -> Option<Side>,
) -> Option<(Side, Side, bool)> {
    let b = expr.downcast_ref::<BinaryExpr>()?;
    match b.op() {
        Operator::Lt => Some((resolve(b.left())?, resolve(b.right())?, false)),
        Operator::Gt => Some((resolve(b.right())?, resolve(b.left())?, false)),
        Operator::Or => {
            let (null_check, compare) = if b.left().downcast_ref::<IsNullExpr>().is_some() {
                (b.left(), b.right())
            } else {
                (b.right(), b.left())
            };
            let checked = resolve(null_check.downcast_ref::<IsNullExpr>()?.arg())?;
            let (point, to, _) = upper_bound(compare, resolve)?;
            (checked == to).then_some((point, to, true))
        }
        _ => None,
    }
}
