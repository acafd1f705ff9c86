//! The interval index: every key's validity intervals, sorted by start, so a
//! probe finds the interval valid at a point by binary search.
//!
//! Keys are compared as bytes ([`super::keys`]: one string column as its
//! UTF-8, anything else in arrow's row format); bounds are compared as `i64`
//! (see [`super::pattern::is_orderable`]).
//! A key whose intervals do not overlap (every SCD2 dimension, by its
//! invariants) is answered by one binary search and yields at most one
//! interval; a key whose intervals overlap (any other table with the same
//! shape) falls back to scanning the intervals that start at or before the
//! point, so the answer is the same as the hash join's either way.

use std::hash::BuildHasher;

use arrow_array::{Array, ArrayRef};
use datafusion::common::{DataFusionError, Result};
use hashbrown::DefaultHashBuilder;

use super::keys::{as_i64, null_rows, Encoded, KeyCodec};
use super::slots::{prefetch, Slots, EMPTY};

/// A null upper bound under `valid_to IS NULL OR ...`.
const OPEN: i64 = i64::MAX;

/// Intervals of the build side grouped by key.
///
/// Layout, chosen because a probe is bound by memory latency, not by
/// arithmetic (a profile of the 100,000-key benchmark showed 85% of probe
/// time on two cache misses): an open-addressing table of `(hash, offset)`
/// slots, and one arena in which each key's bytes and its intervals lie
/// together, so a probe touches one slot and one place in the arena; and
/// probes run in chunks that prefetch the slots, then the arena, of a whole
/// chunk before reading any of them, so the misses overlap. (A table of
/// our own rather than `hashbrown`'s, because prefetching needs the
/// slot's address before the lookup.)
///
/// ```text
/// arena at offset: key_len u32 | key bytes | overlapping u8 | n u32
///                  | n starts i64 | n ends i64 | n build rows u32
/// ```
#[derive(Debug)]
pub struct IntervalIndex {
    codec: KeyCodec,
    /// Whether null keys equal each other (`IS NOT DISTINCT FROM`).
    nulls_equal: bool,
    hasher: DefaultHashBuilder,
    /// Key hash to the key's offset in `arena`.
    table: Slots,
    arena: Vec<u8>,
    intervals: usize,
}

/// Build rows whose bounds are read as `i64` at a time.
const BOUNDS_CHUNK: usize = 8192;

/// Rows probed together: enough outstanding misses to keep memory busy.
const CHUNK: usize = 32;

/// The matches of one probe batch.
#[derive(Debug, Default)]
pub struct Matches {
    /// Build row of each match.
    pub build: Vec<u32>,
    /// With `keep_unmatched`: whether each match found an interval (`false`:
    /// an unmatched point, whose build columns are null).
    pub found: Option<Vec<bool>>,
    /// Probe row of each match, ascending.
    pub probe: Vec<u32>,
}

impl Matches {
    fn push(&mut self, build: u32, probe: u32) {
        self.build.push(build);
        self.probe.push(probe);
        if let Some(found) = &mut self.found {
            found.push(true);
        }
    }
}

/// Arena bytes per group besides its key: the key's length, the
/// overlapping flag and the interval count.
const GROUP_HEADER: usize = 4 + 1 + 4;
/// Arena bytes per interval: its start, end and build row.
const INTERVAL_BYTES: usize = 8 + 8 + 4;

/// Build rows grouped by key, before the arena is laid out.
struct Groups {
    /// Each group's key hash.
    hash: Vec<u64>,
    /// A row of each group (where its key bytes are).
    row: Vec<usize>,
    /// (group, start, end, build row) of every row that can match.
    entries: Vec<(u32, i64, i64, u32)>,
}

impl Groups {
    /// Group the rows by key through a provisional table whose slots hold
    /// group ids. That table is gone when this returns, before the arena
    /// and the final table are allocated; the bounds are read as `i64` a
    /// chunk of rows at a time (whole columns copied as `i64` were 4.5 of
    /// the build's 47 MiB on a 283k-row dimension).
    /// `skip`: rows whose key can never match.
    fn of(
        encoded: &Encoded,
        hasher: &DefaultHashBuilder,
        skip: Option<&[bool]>,
        (from, to): (&ArrayRef, &ArrayRef),
        open_end: bool,
    ) -> Result<Self> {
        let rows = from.len();
        let mut grouping = Slots::with_room_for(rows);
        let mut groups = Groups {
            hash: Vec::new(),
            row: Vec::new(),
            entries: Vec::with_capacity(rows),
        };
        for chunk in (0..rows).step_by(BOUNDS_CHUNK) {
            let len = BOUNDS_CHUNK.min(rows - chunk);
            let from = as_i64(&from.slice(chunk, len))?;
            let to = as_i64(&to.slice(chunk, len))?;
            for i in 0..len {
                let row = chunk + i;
                if skip.is_some_and(|s| s[row]) || from.is_null(i) {
                    continue;
                }
                let end = match (to.is_null(i), open_end) {
                    (false, _) => to.value(i),
                    (true, true) => OPEN,
                    (true, false) => continue,
                };
                let start = from.value(i);
                if start >= end {
                    continue;
                }
                let key = encoded.key(row);
                let hash = hasher.hash_one(key);
                let new = groups.hash.len() as u32;
                let group = grouping
                    .find_or_insert(hash, new, |g| encoded.key(groups.row[g as usize]) == key);
                if group == new {
                    groups.hash.push(hash);
                    groups.row.push(row);
                }
                groups.entries.push((group, start, end, row as u32));
            }
        }
        Ok(groups)
    }
}

impl IntervalIndex {
    /// Index the build rows: `keys` (one array per key column), and the
    /// bounds `from` (inclusive) and `to` (exclusive; null is open when
    /// `open_end`). Rows with a null key (unless `nulls_equal`), a null
    /// start, or an empty interval can never match and are left out.
    pub fn build(
        keys: &[ArrayRef],
        from: &ArrayRef,
        to: &ArrayRef,
        open_end: bool,
        nulls_equal: bool,
    ) -> Result<Self> {
        let codec = KeyCodec::new(keys, nulls_equal)?;
        let encoded = codec.encode(keys)?;
        let hasher = DefaultHashBuilder::default();
        let Groups {
            hash: group_hash,
            row: group_row,
            mut entries,
        } = Groups::of(
            &encoded,
            &hasher,
            null_rows(keys, nulls_equal).as_deref(),
            (from, to),
            open_end,
        )?;
        entries.sort_unstable();
        // One arena entry per group, then the final table, sized for the keys.
        let mut table = Slots::with_room_for(group_hash.len());
        // Sized exactly: grown by doubling, the arena peaked at twice its
        // size while copying (16 of the 24 MiB a 200k-key dimension's
        // index took to build) and kept up to half of it spare.
        // Offsets into it are u32s (`EMPTY` excluded): refused before
        // anything is allocated.
        let key_bytes: usize = group_row.iter().map(|&r| encoded.key(r).len()).sum();
        let size = group_hash.len() * GROUP_HEADER + key_bytes + entries.len() * INTERVAL_BYTES;
        if size >= EMPTY as usize {
            return Err(DataFusionError::ResourcesExhausted(
                "point-in-time join: dimension keys and intervals exceed 4 GiB".into(),
            ));
        }
        let mut arena = Vec::with_capacity(size);
        for list in entries.chunk_by(|a, b| a.0 == b.0) {
            let group = list[0].0 as usize;
            let key = encoded.key(group_row[group]);
            // Below `size`, so below `EMPTY`.
            let at = arena.len() as u32;
            let overlapping = list.windows(2).any(|w| w[0].2 > w[1].1);
            arena.extend_from_slice(&(key.len() as u32).to_le_bytes());
            arena.extend_from_slice(key);
            arena.push(overlapping as u8);
            arena.extend_from_slice(&(list.len() as u32).to_le_bytes());
            list.iter()
                .for_each(|e| arena.extend_from_slice(&e.1.to_le_bytes()));
            list.iter()
                .for_each(|e| arena.extend_from_slice(&e.2.to_le_bytes()));
            list.iter()
                .for_each(|e| arena.extend_from_slice(&e.3.to_le_bytes()));
            table.find_or_insert(group_hash[group], at, |_| false);
        }
        debug_assert_eq!(arena.len(), arena.capacity(), "the arena's size is exact");
        let intervals = entries.len();
        Ok(Self {
            codec,
            nulls_equal,
            hasher,
            table,
            arena,
            intervals,
        })
    }

    /// Number of distinct keys.
    pub fn keys(&self) -> usize {
        self.table.entries()
    }

    /// Number of intervals that can match.
    pub fn intervals(&self) -> usize {
        self.intervals
    }

    /// Bytes held, for the memory pool.
    pub fn size(&self) -> usize {
        self.codec.size() + self.arena.capacity() + self.table.size()
    }

    /// Find, for every probe row, the intervals of its key that contain its
    /// point. With `keep_unmatched`, a probe row with none yields one
    /// unmatched entry (the outer join's null-padded row).
    pub fn probe(
        &self,
        keys: &[ArrayRef],
        points: &ArrayRef,
        keep_unmatched: bool,
    ) -> Result<Matches> {
        let encoded = self.codec.encode(keys)?;
        let skip = null_rows(keys, self.nulls_equal);
        let points = as_i64(points)?;
        let n = points.len();
        let mut out = Matches {
            build: Vec::with_capacity(n),
            found: keep_unmatched.then(|| Vec::with_capacity(n)),
            probe: Vec::with_capacity(n),
        };
        let hashes: Vec<u64> = (0..n)
            .map(|row| self.hasher.hash_one(encoded.key(row)))
            .collect();
        let live = |row: usize| !(skip.as_ref().is_some_and(|s| s[row]) || points.is_null(row));
        let mut first = [0usize; CHUNK];
        for chunk in (0..n).step_by(CHUNK) {
            let rows = chunk..(chunk + CHUNK).min(n);
            for row in rows.clone() {
                self.table.prefetch(hashes[row]);
            }
            // The first slot holding the row's hash (or a free one); its
            // arena entry is prefetched before any key is compared.
            for row in rows.clone() {
                let (slot, at) = self.table.first_with_hash(hashes[row]);
                first[row - chunk] = slot;
                if at != EMPTY {
                    prefetch(&self.arena[at as usize]);
                }
            }
            for row in rows {
                let before = out.probe.len();
                if live(row) {
                    let key = encoded.key(row);
                    let same = |at: u32| self.key_at(at) == key;
                    if let Some(at) = self.table.find_from(first[row - chunk], hashes[row], same) {
                        self.matches_in(at as usize, points.value(row), row as u32, &mut out);
                    }
                }
                if out.probe.len() == before {
                    if let Some(found) = &mut out.found {
                        out.build.push(0);
                        out.probe.push(row as u32);
                        found.push(false);
                    }
                }
            }
        }
        Ok(out)
    }

    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.arena[at..at + 4].try_into().expect("4 bytes"))
    }

    fn i64_at(&self, at: usize) -> i64 {
        i64::from_le_bytes(self.arena[at..at + 8].try_into().expect("8 bytes"))
    }

    fn key_at(&self, at: u32) -> &[u8] {
        let at = at as usize;
        let len = self.u32_at(at) as usize;
        &self.arena[at + 4..at + 4 + len]
    }

    fn matches_in(&self, at: usize, point: i64, probe_row: u32, out: &mut Matches) {
        let key_len = self.u32_at(at) as usize;
        let flags = at + 4 + key_len;
        let overlapping = self.arena[flags] != 0;
        let n = self.u32_at(flags + 1) as usize;
        let starts = flags + 5;
        let ends = starts + 8 * n;
        let rows = ends + 8 * n;
        // Intervals 0..started start at or before the point.
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.i64_at(starts + 8 * mid) <= point {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let started = lo;
        // Disjoint and sorted: only the last one started can contain it.
        let first = if overlapping {
            0
        } else {
            started.saturating_sub(1)
        };
        for i in first..started {
            if point < self.i64_at(ends + 8 * i) {
                out.push(self.u32_at(rows + 4 * i), probe_row);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Date32Array, StringArray};

    use super::*;

    fn index(
        keys: Vec<Option<&str>>,
        from: Vec<Option<i32>>,
        to: Vec<Option<i32>>,
    ) -> IntervalIndex {
        let keys: ArrayRef = Arc::new(StringArray::from(keys));
        let from: ArrayRef = Arc::new(Date32Array::from(from));
        let to: ArrayRef = Arc::new(Date32Array::from(to));
        IntervalIndex::build(&[keys], &from, &to, true, false).unwrap()
    }

    fn probe(
        ix: &IntervalIndex,
        keys: Vec<Option<&str>>,
        points: Vec<Option<i32>>,
        outer: bool,
    ) -> Vec<(Option<u32>, u32)> {
        let keys: ArrayRef = Arc::new(StringArray::from(keys));
        let points: ArrayRef = Arc::new(Date32Array::from(points));
        let m = ix.probe(&[keys], &points, outer).unwrap();
        let found = m.found.unwrap_or_else(|| vec![true; m.build.len()]);
        m.build
            .into_iter()
            .zip(found)
            .map(|(b, f)| f.then_some(b))
            .zip(m.probe)
            .collect()
    }

    #[test]
    fn finds_the_interval_valid_at_each_point() {
        // a: [10, 20) row 0, [20, open) row 1; b: [5, 8) row 2.
        let ix = index(
            vec![Some("a"), Some("a"), Some("b")],
            vec![Some(10), Some(20), Some(5)],
            vec![Some(20), None, Some(8)],
        );
        assert_eq!(ix.keys(), 2);
        let got = probe(
            &ix,
            vec![
                Some("a"),
                Some("a"),
                Some("a"),
                Some("a"),
                Some("b"),
                Some("b"),
                Some("c"),
                None,
            ],
            vec![
                Some(9),
                Some(10),
                Some(19),
                Some(20),
                Some(8),
                Some(7),
                Some(10),
                Some(10),
            ],
            false,
        );
        assert_eq!(
            got,
            vec![(Some(0), 1), (Some(0), 2), (Some(1), 3), (Some(2), 5)]
        );
    }

    #[test]
    fn overlapping_intervals_yield_every_match_and_outer_keeps_the_rest() {
        // a: [1, 10) row 0 and [5, open) row 1 overlap; a null start never matches.
        let ix = index(
            vec![Some("a"), Some("a"), Some("a")],
            vec![Some(1), Some(5), None],
            vec![Some(10), None, None],
        );
        let got = probe(
            &ix,
            vec![Some("a"), Some("a"), Some("a"), Some("z")],
            vec![Some(0), Some(6), Some(11), None],
            true,
        );
        assert_eq!(
            got,
            vec![
                (None, 0),
                (Some(0), 1),
                (Some(1), 1),
                (Some(1), 2),
                (None, 3)
            ]
        );
    }

    #[test]
    fn the_arena_holds_no_spare_room() {
        // 3,000 keys of two intervals each: a doubling arena ends
        // with spare room at almost any size.
        let n = 6_000;
        let names: Vec<String> = (0..n).map(|i| format!("key-{}", i % 3_000)).collect();
        let ix = index(
            names.iter().map(|k| Some(k.as_str())).collect(),
            (0..n).map(Some).collect(),
            (0..n).map(|i| (i % 2 == 0).then_some(i + 1)).collect(),
        );
        assert_eq!(ix.keys(), 3_000);
        assert_eq!(ix.arena.len(), ix.arena.capacity());
    }

    #[test]
    fn rows_past_the_first_chunk_of_bounds_are_indexed_at_their_own_bounds() {
        // 3 chunks and a bit: row i is key i % 7,000's interval [i, i + 1),
        // each key's last one open, so key k's start at k, k + 7,000...
        let n = 3 * BOUNDS_CHUNK + 5;
        let names: Vec<String> = (0..n).map(|i| format!("k{}", i % 7_000)).collect();
        let ix = index(
            names.iter().map(|k| Some(k.as_str())).collect(),
            (0..n as i32).map(Some).collect(),
            (0..n as i32)
                .map(|i| (i as usize + 7_000 < n).then_some(i + 1))
                .collect(),
        );
        assert_eq!((ix.keys(), ix.intervals()), (7_000, n));
        let rows: Vec<usize> = vec![
            0,
            1,
            BOUNDS_CHUNK - 1,
            BOUNDS_CHUNK,
            2 * BOUNDS_CHUNK + 7,
            n - 1,
        ];
        let got = probe(
            &ix,
            rows.iter().map(|&r| Some(names[r].as_str())).collect(),
            rows.iter().map(|&r| Some(r as i32)).collect(),
            false,
        );
        let want: Vec<(Option<u32>, u32)> = rows
            .iter()
            .enumerate()
            .map(|(i, &r)| (Some(r as u32), i as u32))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_closed_end_ignores_rows_without_an_upper_bound() {
        let keys: ArrayRef = Arc::new(StringArray::from(vec!["a", "a"]));
        let from: ArrayRef = Arc::new(Date32Array::from(vec![1, 5]));
        let to: ArrayRef = Arc::new(Date32Array::from(vec![Some(5), None]));
        let ix =
            IntervalIndex::build(std::slice::from_ref(&keys), &from, &to, false, false).unwrap();
        let points: ArrayRef = Arc::new(Date32Array::from(vec![2, 6]));
        let m = ix.probe(&[keys], &points, false).unwrap();
        assert_eq!((m.build, m.probe, m.found), (vec![0], vec![0], None));
    }
}
