//! Which commit last changed a dimension's rows at each business date,
//! kept in the dimension's root (format 2) so that `status` judges a run's
//! read without reading the log since it.
//!
//! A run that resolved a dimension at date `d` after reading version `v`
//! is stale exactly when some later commit changed the rows valid at `d`,
//! that is when the latest commit affecting `d` is after `v`. So the index
//! keeps, for each business date, the latest commit that affected it: a
//! sorted list of disjoint pieces `[from, to)` each naming that commit and
//! the range it affected. A commit affecting `[a, b)` replaces what the
//! pieces said there. Changes effective from a date onwards (`to` open,
//! the usual SCD2 change) replace every later piece, so the list stays a
//! few pieces long; changes to many separate closed ranges lengthen it, and
//! past [`MAX_PIECES`] the index is dropped and `status` reads the log as
//! format 1 did.
//!
//! Alternatives: all `(version, range)` pairs in the root (exact first
//! change after any read, but the root grows with history and every
//! dimension commit rewrites it); a separate index object per commit (one
//! more write per commit, and still a walk over the commits since a read).
//! A stale reason names the latest change after the read, where the log
//! walk names the first; both are changes the run did not see.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::dates::DateRange;

/// Past this many pieces the index is dropped (see the module doc).
pub const MAX_PIECES: usize = 4096;

/// For each business date, the latest commit that changed the rows valid
/// then. Dates no commit changed are in no piece.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangeIndex {
    /// Disjoint, sorted by `from`.
    pub pieces: Vec<ChangePiece>,
}

/// Business dates `[from, to)` (`to: None`: open) last changed by the
/// commit of `version`, which affected `affected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangePiece {
    pub from: NaiveDate,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<NaiveDate>,
    pub version: u64,
    pub affected: DateRange,
}

impl ChangeIndex {
    /// The index after the commit of `version` changed the rows valid in
    /// `affected`; `None` once it would exceed [`MAX_PIECES`].
    pub fn with_change(&self, version: u64, affected: DateRange) -> Option<ChangeIndex> {
        if affected.to.is_some_and(|to| to <= affected.from) {
            return Some(self.clone());
        }
        let before = |d: NaiveDate| d < affected.from;
        let after = |d: NaiveDate| affected.to.is_some_and(|to| d >= to);
        let mut pieces = Vec::with_capacity(self.pieces.len() + 2);
        for p in &self.pieces {
            // The part of `p` before the change, and the part after it.
            if before(p.from) {
                let to = match p.to {
                    Some(to) if to <= affected.from => Some(to),
                    _ => Some(affected.from),
                };
                pieces.push(ChangePiece { to, ..*p });
            }
            if let Some(end) = affected.to {
                if p.to.is_none_or(|to| to > end) {
                    let from = if after(p.from) { p.from } else { end };
                    pieces.push(ChangePiece { from, ..*p });
                }
            }
        }
        pieces.push(ChangePiece {
            from: affected.from,
            to: affected.to,
            version,
            affected,
        });
        pieces.sort_by_key(|p| p.from);
        (pieces.len() <= MAX_PIECES).then_some(ChangeIndex { pieces })
    }

    /// The latest commit that changed the rows valid at `date`, with the
    /// range it affected.
    pub fn latest_at(&self, date: NaiveDate) -> Option<(u64, DateRange)> {
        let i = self.pieces.partition_point(|p| p.from <= date);
        let p = self.pieces[..i].last()?;
        p.to.is_none_or(|to| date < to)
            .then_some((p.version, p.affected))
    }

    /// The latest commit that changed any rows, with the range it affected.
    pub fn latest(&self) -> Option<(u64, DateRange)> {
        self.pieces
            .iter()
            .max_by_key(|p| p.version)
            .map(|p| (p.version, p.affected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(day: u32) -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 3, day).unwrap()
    }

    fn range(from: u32, to: Option<u32>) -> DateRange {
        DateRange {
            from: d(from),
            to: to.map(d),
        }
    }

    /// The latest version changing each of days 1..=28 by brute force over
    /// the list of changes.
    fn brute(changes: &[(u64, DateRange)]) -> Vec<Option<u64>> {
        (1..=28)
            .map(|day| {
                changes
                    .iter()
                    .filter(|(_, r)| r.contains(d(day)))
                    .map(|(v, _)| *v)
                    .max()
            })
            .collect()
    }

    #[test]
    fn the_index_answers_as_the_list_of_changes_does() {
        // Closed, open, nested, overlapping, touching and repeated ranges.
        let changes: Vec<(u64, DateRange)> = vec![
            (1, range(5, Some(10))),
            (2, range(8, None)),
            (3, range(3, Some(6))),
            (4, range(12, Some(14))),
            (5, range(14, Some(15))),
            (6, range(1, Some(2))),
            (7, range(9, Some(13))),
            (8, range(20, None)),
            (9, range(9, Some(13))),
            (10, range(2, Some(3))),
        ];
        let mut index = ChangeIndex::default();
        for (i, (v, r)) in changes.iter().enumerate() {
            index = index.with_change(*v, *r).unwrap();
            let found: Vec<Option<u64>> = (1..=28)
                .map(|day| index.latest_at(d(day)).map(|(v, _)| v))
                .collect();
            assert_eq!(found, brute(&changes[..=i]), "after change {v}");
            let sorted = index
                .pieces
                .windows(2)
                .all(|w| w[0].to.is_some_and(|to| to <= w[1].from));
            assert!(
                sorted,
                "pieces overlap after change {v}: {:?}",
                index.pieces
            );
        }
        assert_eq!(index.latest(), Some((10, range(2, Some(3)))));
        assert_eq!(index.latest_at(d(9)), Some((9, range(9, Some(13)))));
    }

    #[test]
    fn open_ended_changes_keep_the_index_short() {
        let mut index = ChangeIndex::default();
        for v in 1..=1000u64 {
            let from = d(1) + chrono::Days::new(v % 300);
            index = index.with_change(v, DateRange { from, to: None }).unwrap();
        }
        assert!(index.pieces.len() <= 300, "{} pieces", index.pieces.len());
    }

    #[test]
    fn past_the_limit_the_index_is_dropped() {
        let mut index = Some(ChangeIndex::default());
        for v in 0..=MAX_PIECES as u64 {
            let from = d(1) + chrono::Days::new(2 * v);
            let to = Some(from + chrono::Days::new(1));
            index = index.and_then(|i| i.with_change(v, DateRange { from, to }));
        }
        assert_eq!(index, None);
    }
}
