//! SQL functions of a run: the run's logical date and data interval, and
//! wall-clock functions that refuse to plan inside a run.

use std::sync::Arc;

use arrow_schema::{DataType, TimeUnit};
use chrono::NaiveDate;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Expr, LogicalPlan, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use datafusion::optimizer::AnalyzerRule;

/// Which of a run's time values a function returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum RunTime {
    LogicalDate,
    IntervalStart,
    IntervalEnd,
}

/// `logical_date()`, `data_interval_start()`, `data_interval_end()`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct RunTimeFunction {
    which: RunTime,
    name: &'static str,
    date: Option<NaiveDate>,
    signature: Signature,
}

fn utc_micros() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC")))
}

impl ScalarUDFImpl for RunTimeFunction {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        if self.date.is_none() {
            return plan_err!(
                "{}() is only defined inside a run: give a logical date (logbook sql --logical-date D, or a Run)",
                self.name
            );
        }
        Ok(match self.which {
            RunTime::LogicalDate => DataType::Date32,
            RunTime::IntervalStart | RunTime::IntervalEnd => utc_micros(),
        })
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Some(date) = self.date else {
            return plan_err!("{}() is only defined inside a run", self.name);
        };
        let micros = |d: NaiveDate| i64::from(logbook_core::dates::to_days(d)) * 86_400_000_000;
        Ok(ColumnarValue::Scalar(match self.which {
            RunTime::LogicalDate => ScalarValue::Date32(Some(logbook_core::dates::to_days(date))),
            RunTime::IntervalStart => {
                ScalarValue::TimestampMicrosecond(Some(micros(date)), Some(Arc::from("UTC")))
            }
            RunTime::IntervalEnd => ScalarValue::TimestampMicrosecond(
                Some(micros(date + chrono::Days::new(1))),
                Some(Arc::from("UTC")),
            ),
        }))
    }
}

/// A wall-clock function (`now()`, `current_date`, ...) inside a run: it
/// fails planning, because a replayed run must not depend on when it runs.
#[derive(Debug, PartialEq, Eq, Hash)]
struct WallClockRefused {
    name: &'static str,
    signature: Signature,
}

impl ScalarUDFImpl for WallClockRefused {
    fn name(&self) -> &str {
        self.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        plan_err!(
            "{}() reads the wall clock, so a replayed run for a past date would give a different answer; \
             use logical_date() (or data_interval_start() / data_interval_end()) instead",
            self.name
        )
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        plan_err!(
            "{}() is not allowed inside a run; use logical_date()",
            self.name
        )
    }
}

/// Names of the wall-clock functions refused inside a run.
pub const WALL_CLOCK_FUNCTIONS: [&str; 8] = [
    "now",
    "current_date",
    "current_time",
    "current_timestamp",
    "today",
    "localtime",
    "localtimestamp",
    "statement_timestamp",
];

/// The run-time functions for a session with logical date `date` (or none).
pub fn run_time_functions(date: Option<NaiveDate>) -> Vec<ScalarUDF> {
    [
        (RunTime::LogicalDate, "logical_date"),
        (RunTime::IntervalStart, "data_interval_start"),
        (RunTime::IntervalEnd, "data_interval_end"),
    ]
    .into_iter()
    .map(|(which, name)| {
        ScalarUDF::new_from_impl(RunTimeFunction {
            which,
            name,
            date,
            signature: Signature::nullary(Volatility::Immutable),
        })
    })
    .collect()
}

/// Functions that replace the wall-clock functions inside a run.
pub fn wall_clock_refusals() -> Vec<ScalarUDF> {
    WALL_CLOCK_FUNCTIONS
        .into_iter()
        .map(|name| {
            ScalarUDF::new_from_impl(WallClockRefused {
                name,
                signature: Signature::nullary(Volatility::Volatile),
            })
        })
        .collect()
}

/// Refuses, inside a run, any plan that calls a wall-clock function or a
/// volatile one (`random()`, `uuid()`...): a replayed date must give the
/// same rows.
///
/// The SQL planner already meets the refusing functions above; this rule
/// also catches plans built with the DataFrame API, whose expression
/// helpers (`expr_fn::now()`) carry DataFusion's own functions and never
/// look at the session's registry. It runs as an analyzer rule, before the
/// optimizer folds `now()` into a constant.
#[derive(Debug)]
pub(crate) struct ReplayGuard;

impl AnalyzerRule for ReplayGuard {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.apply_with_subqueries(|node| {
            node.apply_expressions(|e| {
                e.apply(|e| match e {
                    Expr::ScalarFunction(f) => {
                        refuse_unreplayable(f.func.name(), f.func.signature().volatility)
                    }
                    Expr::AggregateFunction(f) => {
                        refuse_unreplayable(f.func.name(), f.func.signature().volatility)
                    }
                    Expr::WindowFunction(w) => {
                        refuse_unreplayable(w.fun.name(), w.fun.signature().volatility)
                    }
                    _ => Ok(TreeNodeRecursion::Continue),
                })
            })
        })?;
        Ok(plan)
    }

    fn name(&self) -> &str {
        "logbook_replay_guard"
    }
}

fn refuse_unreplayable(name: &str, volatility: Volatility) -> Result<TreeNodeRecursion> {
    if WALL_CLOCK_FUNCTIONS.contains(&name) {
        return plan_err!(
            "{name}() reads the wall clock, so a replayed run for a past date would give a different answer; \
             use logical_date() (or data_interval_start() / data_interval_end()) instead"
        );
    }
    if volatility == Volatility::Volatile {
        return plan_err!(
            "{name}() gives a different value each time, so a replayed run would not give the same rows; \
             derive the value from the row and the run instead, e.g. a hash of the row's key and logical_date()"
        );
    }
    Ok(TreeNodeRecursion::Continue)
}
