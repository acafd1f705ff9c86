//! Business dates: conversions between `NaiveDate` and Arrow's `Date32` (days since 1970-01-01), and ranges of them.

use chrono::{Datelike, NaiveDate};
use serde::{Deserialize, Serialize};

/// A range of business dates `[from, to)`; `to: None` means open-ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DateRange {
    pub from: NaiveDate,
    #[serde(default)]
    pub to: Option<NaiveDate>,
}

impl DateRange {
    /// Does the range include `date`?
    pub fn contains(&self, date: NaiveDate) -> bool {
        self.from <= date && self.to.is_none_or(|to| date < to)
    }
}

const EPOCH_DAYS_CE: i32 = 719_163; // days from 0001-01-01 to 1970-01-01

/// Days since the Unix epoch.
///
/// ```
/// use logbook_core::dates::{from_days, to_days};
/// let d = chrono::NaiveDate::from_ymd_opt(2026, 3, 15).unwrap();
/// assert_eq!(from_days(to_days(d)), d);
/// assert_eq!(to_days(chrono::NaiveDate::from_ymd_opt(1970, 1, 2).unwrap()), 1);
/// ```
pub fn to_days(date: NaiveDate) -> i32 {
    date.num_days_from_ce() - EPOCH_DAYS_CE
}

/// The date `days` after the Unix epoch (saturating at chrono's range).
pub fn from_days(days: i32) -> NaiveDate {
    NaiveDate::from_num_days_from_ce_opt(days.saturating_add(EPOCH_DAYS_CE)).unwrap_or(
        if days < 0 {
            NaiveDate::MIN
        } else {
            NaiveDate::MAX
        },
    )
}

/// Yesterday (UTC) at `now_ms`: the last date whose daily run is due, the
/// default end of `status` and `plan` ranges.
pub fn yesterday(now_ms: i64) -> NaiveDate {
    let today = chrono::DateTime::from_timestamp_millis(now_ms)
        .map(|t| t.date_naive())
        .unwrap_or_default();
    today.pred_opt().unwrap_or(today)
}
