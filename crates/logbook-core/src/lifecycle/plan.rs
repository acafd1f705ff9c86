//! Backfill plans: which dates to recompute, why, and in which order.

use chrono::NaiveDate;
use serde::Serialize;

use crate::lifecycle::state::{PartitionState, StaleReason, TableStatus};

/// Which dates a plan selects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Selection {
    /// Every date that is not complete: missing, stale or corrupt (dates a
    /// live writer is running are left to it).
    #[default]
    Needed,
    /// Only stale (and corrupt) dates.
    Stale,
    /// Only missing dates.
    Missing,
    /// Every date in range, complete or not.
    All,
}

impl std::str::FromStr for Selection {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "needed" => Ok(Selection::Needed),
            "stale" => Ok(Selection::Stale),
            "missing" => Ok(Selection::Missing),
            "all" => Ok(Selection::All),
            other => Err(format!(
                "unknown selection {other:?}; use needed, stale, missing or all"
            )),
        }
    }
}

impl Selection {
    fn selects(self, state: PartitionState) -> bool {
        use PartitionState::*;
        match self {
            Selection::Needed => matches!(state, Missing | Stale | Corrupt),
            Selection::Stale => matches!(state, Stale | Corrupt),
            Selection::Missing => state == Missing,
            Selection::All => state != Running,
        }
    }
}

/// One date to recompute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    pub date: NaiveDate,
    pub state: PartitionState,
    pub reasons: Vec<StaleReason>,
    /// The planned date that must finish first (chains only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<NaiveDate>,
}

/// The dates to recompute, in date order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub table: String,
    /// The table is a chain: steps must run strictly in order.
    pub chain: bool,
    pub steps: Vec<PlanStep>,
    /// A chain's date that a live writer is running: every later date
    /// reads it, so none is planned until it finishes (plan again then).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocked_by: Option<NaiveDate>,
}

impl Plan {
    /// The dates of the plan, in order.
    pub fn dates(&self) -> Vec<NaiveDate> {
        self.steps.iter().map(|s| s.date).collect()
    }
}

/// Plan a backfill from a status. In a chain every step waits for the one
/// before it; otherwise steps are independent and may run in parallel.
///
/// When a chain has a date that must be recomputed, every later date
/// depends on it, so the plan includes the whole tail even if `status`
/// was computed before those dates were marked stale. A chain's plan stops
/// at a date that is running: the next date must wait for it.
pub fn plan(status: &TableStatus, selection: Selection) -> Plan {
    let mut steps: Vec<PlanStep> = Vec::new();
    let mut chain_broken = false;
    let mut blocked_by = None;
    for d in &status.dates {
        if status.depends_on_previous && d.state == PartitionState::Running {
            blocked_by = Some(d.date);
            break;
        }
        let selected = selection.selects(d.state)
            || (status.depends_on_previous && chain_broken && d.state != PartitionState::Running);
        if !selected {
            continue;
        }
        chain_broken = status.depends_on_previous;
        let after = if status.depends_on_previous {
            steps.last().map(|s| s.date)
        } else {
            None
        };
        steps.push(PlanStep {
            date: d.date,
            state: d.state,
            reasons: d.reasons.clone(),
            after,
        });
    }
    Plan {
        table: status.table.clone(),
        chain: status.depends_on_previous,
        steps,
        blocked_by,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lifecycle::state::DateStatus;

    fn day(d: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, d).unwrap()
    }

    fn status(chain: bool, states: &[PartitionState]) -> TableStatus {
        TableStatus {
            table: "t".into(),
            version: 9,
            depends_on_previous: chain,
            dates: states
                .iter()
                .enumerate()
                .map(|(i, s)| DateStatus {
                    date: day(i as u32 + 1),
                    state: *s,
                    reasons: vec![],
                    version: None,
                    problems: vec![],
                    runs: vec![],
                })
                .collect(),
        }
    }

    #[test]
    fn a_chain_stops_at_a_running_date_because_the_next_must_wait_for_it() {
        use PartitionState::*;
        let s = status(true, &[Stale, Running, Missing, Complete]);
        let p = plan(&s, Selection::Needed);
        assert_eq!(p.dates(), [day(1)], "{p:?}");
        assert_eq!(p.blocked_by, Some(day(2)));
        // Running first: nothing after it can start.
        let p = plan(&status(true, &[Running, Missing]), Selection::Needed);
        assert!(p.steps.is_empty() && p.blocked_by == Some(day(1)), "{p:?}");
        // Independent dates go around a running one.
        let p = plan(
            &status(false, &[Stale, Running, Missing]),
            Selection::Needed,
        );
        assert_eq!(p.dates(), [day(1), day(3)]);
        assert_eq!(p.blocked_by, None);
    }
}
