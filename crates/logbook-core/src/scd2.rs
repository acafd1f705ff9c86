//! Validity intervals of a slowly changing dimension (SCD type 2), in memory.
//!
//! Each key has a sorted list of intervals `[from, to)` (days since the
//! epoch; `to: None` = still valid) with the key's attribute values over it.
//! Keys and attributes are held in Arrow's row format, so any number and type
//! of key columns compare and hash as bytes.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Date32Type;
use arrow_array::{Array, ArrayRef, Date32Array, RecordBatch};
use arrow_row::{OwnedRow, RowConverter, SortField};
use arrow_schema::SchemaRef;
use chrono::NaiveDate;

use crate::dates::{from_days, to_days};
use crate::error::{Error, Result};
use crate::format::DateRange;
use crate::schema::{TableSchema, VALID_FROM, VALID_TO};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    attrs: OwnedRow,
    from: i32,
    to: Option<i32>,
}

/// The whole history of a dimension.
pub(crate) struct Scd2State {
    table: String,
    schema: SchemaRef,
    key_cols: Vec<usize>,
    attr_cols: Vec<usize>,
    keys: RowConverter,
    attrs: RowConverter,
    intervals: BTreeMap<OwnedRow, Vec<Interval>>,
    /// Union of the business dates changed since loading.
    affected: Option<(i32, Option<i32>)>,
    changed_keys: usize,
}

impl Scd2State {
    /// An empty state for a dimension `schema`.
    pub fn new(table: &str, schema: &TableSchema) -> Result<Self> {
        let keys = schema.keys().ok_or_else(|| Error::InvalidInput {
            table: table.to_string(),
            reason: "is not a dimension (SCD2) table".into(),
        })?;
        let arrow = schema.arrow_schema();
        let key_cols: Vec<usize> = keys
            .iter()
            .map(|k| schema.index_of(k).expect("validated"))
            .collect();
        let attr_cols: Vec<usize> = (0..schema.columns.len())
            .filter(|i| !key_cols.contains(i))
            .filter(|i| ![VALID_FROM, VALID_TO].contains(&schema.columns[*i].name.as_str()))
            .collect();
        let converter = |cols: &[usize]| {
            RowConverter::new(
                cols.iter()
                    .map(|i| SortField::new(arrow.field(*i).data_type().clone()))
                    .collect(),
            )
            .map_err(|e| Error::arrow(format!("table {table}"), e))
        };
        Ok(Self {
            table: table.to_string(),
            keys: converter(&key_cols)?,
            attrs: converter(&attr_cols)?,
            schema: arrow,
            key_cols,
            attr_cols,
            intervals: BTreeMap::new(),
            affected: None,
            changed_keys: 0,
        })
    }

    fn arrow_err(&self, e: arrow_schema::ArrowError) -> Error {
        Error::arrow(format!("table {}", self.table), e)
    }

    /// Add stored rows (with validity columns) to the state.
    pub fn load(&mut self, batch: &RecordBatch) -> Result<()> {
        let (keys, attrs) = self.rows(batch)?;
        let from = batch
            .column(self.schema.index_of(VALID_FROM).expect("dimension"))
            .as_primitive::<Date32Type>();
        let to = batch
            .column(self.schema.index_of(VALID_TO).expect("dimension"))
            .as_primitive::<Date32Type>();
        for i in 0..batch.num_rows() {
            let interval = Interval {
                attrs: attrs.row(i).owned(),
                from: from.value(i),
                to: to.is_valid(i).then(|| to.value(i)),
            };
            self.intervals
                .entry(keys.row(i).owned())
                .or_default()
                .push(interval);
        }
        for ivs in self.intervals.values_mut() {
            ivs.sort_by_key(|iv| iv.from);
        }
        Ok(())
    }

    fn rows(&self, batch: &RecordBatch) -> Result<(arrow_row::Rows, arrow_row::Rows)> {
        let pick = |cols: &[usize]| -> Vec<ArrayRef> {
            cols.iter()
                .map(|i| {
                    batch
                        .column_by_name(self.schema.field(*i).name())
                        .expect("conformed")
                        .clone()
                })
                .collect()
        };
        let keys = self
            .keys
            .convert_columns(&pick(&self.key_cols))
            .map_err(|e| self.arrow_err(e))?;
        let attrs = self
            .attrs
            .convert_columns(&pick(&self.attr_cols))
            .map_err(|e| self.arrow_err(e))?;
        Ok((keys, attrs))
    }

    /// The first business date of the dimension's history, if it has any.
    pub fn history_start(&self) -> Option<NaiveDate> {
        self.intervals
            .values()
            .filter_map(|ivs| ivs.first().map(|iv| iv.from))
            .min()
            .map(crate::dates::from_days)
    }

    /// Each row of `batch` (key and attribute columns) is its key's state
    /// from `effective` on. Returns how many keys changed.
    pub fn apply_changes(&mut self, effective: NaiveDate, batch: &RecordBatch) -> Result<usize> {
        let (keys, attrs) = self.rows(batch)?;
        self.reject_duplicate_keys(&keys)?;
        let e = to_days(effective);
        let mut changed = 0;
        for i in 0..batch.num_rows() {
            if self.set(keys.row(i).owned(), Some(attrs.row(i).owned()), e) {
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Close the interval of each key in `batch` (key columns) at `effective`.
    pub fn apply_deletes(&mut self, effective: NaiveDate, batch: &RecordBatch) -> Result<usize> {
        let pick: Vec<ArrayRef> = self
            .key_cols
            .iter()
            .map(|i| {
                batch
                    .column_by_name(self.schema.field(*i).name())
                    .expect("conformed")
                    .clone()
            })
            .collect();
        let keys = self
            .keys
            .convert_columns(&pick)
            .map_err(|e| self.arrow_err(e))?;
        let e = to_days(effective);
        let mut changed = 0;
        for i in 0..batch.num_rows() {
            if self.set(keys.row(i).owned(), None, e) {
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// `batch` is the complete state at `effective`: keys in it are changes,
    /// keys valid at `effective` but missing from it are deleted.
    pub fn apply_snapshot(&mut self, effective: NaiveDate, batch: &RecordBatch) -> Result<usize> {
        let (keys, _) = self.rows(batch)?;
        let present: std::collections::HashSet<OwnedRow> =
            (0..batch.num_rows()).map(|i| keys.row(i).owned()).collect();
        let mut changed = self.apply_changes(effective, batch)?;
        let e = to_days(effective);
        let gone: Vec<OwnedRow> = self
            .intervals
            .iter()
            .filter(|(k, ivs)| !present.contains(*k) && ivs.iter().any(|iv| covers(iv, e)))
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            if self.set(key, None, e) {
                changed += 1;
            }
        }
        Ok(changed)
    }

    fn reject_duplicate_keys(&self, keys: &arrow_row::Rows) -> Result<()> {
        let mut seen = std::collections::HashSet::new();
        for row in keys.iter() {
            if !seen.insert(row) {
                return Err(Error::DimensionInvariant {
                    table: self.table.clone(),
                    key: self.render_key(&row.owned()),
                    reason: "appears twice in one change; give each key one new state per effective date".into(),
                });
            }
        }
        Ok(())
    }

    /// Make `key` have `attrs` (or no row, for `None`) from day `e` until
    /// its next recorded change. Returns whether anything changed.
    fn set(&mut self, key: OwnedRow, attrs: Option<OwnedRow>, e: i32) -> bool {
        let ivs = self.intervals.entry(key).or_default();
        let covering = ivs.iter().position(|iv| covers(iv, e));
        let end = match (covering, attrs) {
            (Some(i), Some(attrs)) if ivs[i].attrs == attrs => return false,
            (Some(i), Some(attrs)) => {
                let end = ivs[i].to;
                if ivs[i].from == e {
                    ivs[i].attrs = attrs;
                } else {
                    ivs[i].to = Some(e);
                    ivs.insert(
                        i + 1,
                        Interval {
                            attrs,
                            from: e,
                            to: end,
                        },
                    );
                }
                end
            }
            (Some(i), None) => {
                let end = ivs[i].to;
                if ivs[i].from == e {
                    ivs.remove(i);
                } else {
                    ivs[i].to = Some(e);
                }
                end
            }
            (None, Some(attrs)) => {
                // New key, or a gap: valid until the key's next interval.
                let at = ivs.iter().position(|iv| iv.from > e).unwrap_or(ivs.len());
                let end = ivs.get(at).map(|iv| iv.from);
                ivs.insert(
                    at,
                    Interval {
                        attrs,
                        from: e,
                        to: end,
                    },
                );
                end
            }
            (None, None) => return false,
        };
        self.changed_keys += 1;
        self.affected = Some(match self.affected {
            None => (e, end),
            Some((from, to)) => (from.min(e), to.zip(end).map(|(a, b)| a.max(b))),
        });
        true
    }

    /// Business dates changed since loading.
    pub fn affected(&self) -> Option<DateRange> {
        self.affected.map(|(from, to)| DateRange {
            from: from_days(from),
            to: to.map(from_days),
        })
    }

    /// Check every key: intervals non-empty, ordered, non-overlapping, and
    /// at most one open.
    pub fn check_invariants(&self) -> Result<()> {
        for (key, ivs) in &self.intervals {
            for (i, iv) in ivs.iter().enumerate() {
                let fail = |reason: String| Error::DimensionInvariant {
                    table: self.table.clone(),
                    key: self.render_key(key),
                    reason,
                };
                if let Some(to) = iv.to {
                    if iv.from >= to {
                        return Err(fail(format!(
                            "interval [{}, {}) is empty: valid_from must be before valid_to",
                            from_days(iv.from),
                            from_days(to)
                        )));
                    }
                }
                if let Some(next) = ivs.get(i + 1) {
                    match iv.to {
                        None => {
                            return Err(fail(format!(
                                "has two open intervals (from {} and {})",
                                from_days(iv.from),
                                from_days(next.from)
                            )))
                        }
                        Some(to) if to > next.from => {
                            return Err(fail(format!(
                                "intervals overlap: [{}, {}) and one from {}",
                                from_days(iv.from),
                                from_days(to),
                                from_days(next.from)
                            )))
                        }
                        Some(_) => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Keys whose intervals changed since loading.
    pub fn changed_keys(&self) -> usize {
        self.changed_keys
    }

    fn render_key(&self, key: &OwnedRow) -> String {
        match self.keys.convert_rows([key.row()]) {
            Ok(cols) => cols
                .iter()
                .map(|c| {
                    arrow_cast::display::array_value_to_string(c, 0).unwrap_or_else(|_| "?".into())
                })
                .collect::<Vec<_>>()
                .join(", "),
            Err(_) => "?".into(),
        }
    }

    /// The whole state as rows of the table schema, sorted by key and date,
    /// in batches of at most `batch_rows`.
    pub fn to_batches(&self, batch_rows: usize) -> Result<Vec<RecordBatch>> {
        let all: Vec<(&OwnedRow, &Interval)> = self
            .intervals
            .iter()
            .flat_map(|(k, ivs)| ivs.iter().map(move |iv| (k, iv)))
            .collect();
        all.chunks(batch_rows.max(1))
            .map(|chunk| self.batch(chunk))
            .collect()
    }

    fn batch(&self, rows: &[(&OwnedRow, &Interval)]) -> Result<RecordBatch> {
        let keys = self
            .keys
            .convert_rows(rows.iter().map(|(k, _)| k.row()))
            .map_err(|e| self.arrow_err(e))?;
        let attrs = self
            .attrs
            .convert_rows(rows.iter().map(|(_, iv)| iv.attrs.row()))
            .map_err(|e| self.arrow_err(e))?;
        let from: ArrayRef = Arc::new(Date32Array::from_iter_values(
            rows.iter().map(|(_, iv)| iv.from),
        ));
        let to: ArrayRef = Arc::new(rows.iter().map(|(_, iv)| iv.to).collect::<Date32Array>());
        let mut columns: Vec<Option<ArrayRef>> = vec![None; self.schema.fields().len()];
        for (i, c) in self.key_cols.iter().zip(keys) {
            columns[*i] = Some(c);
        }
        for (i, c) in self.attr_cols.iter().zip(attrs) {
            columns[*i] = Some(c);
        }
        columns[self.schema.index_of(VALID_FROM).expect("dimension")] = Some(from);
        columns[self.schema.index_of(VALID_TO).expect("dimension")] = Some(to);
        let columns = columns
            .into_iter()
            .map(|c| c.expect("every column filled"))
            .collect();
        RecordBatch::try_new(self.schema.clone(), columns).map_err(|e| self.arrow_err(e))
    }
}

fn covers(iv: &Interval, e: i32) -> bool {
    iv.from <= e && iv.to.is_none_or(|to| e < to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::StringArray;

    fn stored(rows: &[(&str, &str, i32, Option<i32>)]) -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                "k",
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))) as ArrayRef,
            ),
            (
                "v",
                Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))) as ArrayRef,
            ),
            (
                "valid_from",
                Arc::new(Date32Array::from_iter_values(rows.iter().map(|r| r.2))) as ArrayRef,
            ),
            (
                "valid_to",
                Arc::new(rows.iter().map(|r| r.3).collect::<Date32Array>()) as ArrayRef,
            ),
        ])
        .unwrap()
    }

    fn state(rows: &[(&str, &str, i32, Option<i32>)]) -> Scd2State {
        let schema = TableSchema::parse_dimension_spec("d", "k:string,v:string", &["k"]).unwrap();
        let mut s = Scd2State::new("d", &schema).unwrap();
        s.load(&stored(rows)).unwrap();
        s
    }

    #[test]
    fn invariants_catch_overlaps_empty_intervals_and_two_open_ones() {
        assert!(state(&[("a", "x", 0, Some(10)), ("a", "y", 10, None)])
            .check_invariants()
            .is_ok());
        let cases = [
            (
                vec![("a", "x", 0, Some(10)), ("a", "y", 5, None)],
                "overlap",
            ),
            (vec![("a", "x", 10, Some(10))], "empty"),
            (vec![("a", "x", 0, None), ("a", "y", 5, None)], "two open"),
        ];
        for (rows, needle) in cases {
            let err = state(&rows).check_invariants().unwrap_err().to_string();
            assert!(err.contains(needle) && err.contains("key a"), "{err}");
        }
    }

    #[test]
    fn round_trips_through_batches_sorted_by_key_and_date() {
        let s = state(&[
            ("b", "y", 3, None),
            ("a", "x", 5, None),
            ("a", "w", 0, Some(5)),
        ]);
        let out = s.to_batches(2).unwrap();
        assert_eq!(
            out.iter().map(|b| b.num_rows()).collect::<Vec<_>>(),
            vec![2, 1]
        );
        let from: Vec<i32> = out
            .iter()
            .flat_map(|b| b.column(2).as_primitive::<Date32Type>().values().to_vec())
            .collect();
        assert_eq!(from, vec![0, 5, 3]);
    }
}
