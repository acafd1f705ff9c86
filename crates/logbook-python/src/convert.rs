//! Arguments in and results out: dates and modes from the strings Python
//! passes, results as the JSON the CLI's `--json` prints.

use chrono::NaiveDate;
use logbook_core::DimensionMode;
use pyo3::prelude::*;

use crate::errors;

/// `value`, named `what`, as a date.
pub(crate) fn parse_date(what: &str, value: &str) -> PyResult<NaiveDate> {
    value
        .parse()
        .map_err(|_| errors::invalid(format!("{what} {value:?} is not a date (YYYY-MM-DD)")))
}

pub(crate) fn parse_mode(value: &str) -> PyResult<DimensionMode> {
    value.parse().map_err(errors::invalid)
}

pub(crate) fn to_json(value: &impl serde::Serialize) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| errors::LogbookError::new_err(e.to_string()))
}
