//! SQL functions of a run: the run's logical date and data interval, and
//! wall-clock functions that refuse to plan inside a run.

use std::sync::Arc;

use arrow_schema::{DataType, TimeUnit};
use chrono::NaiveDate;
use datafusion::common::{plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

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
            "{}() reads the wall clock, so re-running this job for a past date would give a different answer; \
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
