//! Which columns of a file are written without a dictionary: those whose
//! dictionary Parquet would drop anyway.
//!
//! parquet-rs dictionary-encodes every column, interning each value, until
//! the column's dictionary passes its page size limit (1 MiB by default);
//! then it falls back to plain encoding for the rest of the column chunk.
//! For a column of mostly distinct values (ids, timestamps, amounts in
//! cents) the interning up to the limit is wasted: 131,072 hash-table
//! inserts per 8-byte column and row group, then a dictionary page that
//! does not pay for itself. Measured on the 200,000-row order batches of
//! `benches/replace.rs` with `ArrowWriter` (2026-12-02): 55 ms and 4.32 MB
//! with dictionaries everywhere, 26 ms and 3.59 MB with the three columns
//! this rule picks written plain. In compaction the interning was a fifth
//! of the profile.
//!
//! The rule: before a file's first row group is encoded, [`plain_columns`]
//! looks at its first rows (up to [`SAMPLE_ROWS`], every row, so values
//! that repeat a few rows apart are seen; at most [`SAMPLE_VALUES`]
//! evenly spread when one batch brings more; fewer than [`MIN_VALUES`]
//! decide nothing), estimates each column's number of distinct values
//! from how often the sample repeats itself, at most the rows of a row
//! group, and writes plain the columns whose estimated dictionary would
//! pass the limit. Where values repeat (a status, a country, amounts that
//! cycle) the estimate stays small and the dictionary is kept; a sample
//! whose values cluster (sorted data) also looks repetitive, so mistakes
//! fall on the side of parquet's own behaviour. Only top-level, non-nested
//! columns with a dictionary enabled are considered; the rows written are
//! the same either way, only their encoding differs.
//!
//! Prior art: parquet-mr (Spark, Hive) writes the first page with a
//! dictionary and falls back when the dictionary-encoded page was not
//! smaller than the raw values. Here the writer cannot switch a column
//! once it has started, so it decides from a sample before.
//!
//! Alternatives: a sample of the first batch only (8,192 rows of the
//! bench's amounts cycle over 10,000 values and look distinct: those
//! would lose a dictionary worth 4x), learning from a previous row group
//! (a 200,000-row partition has only one), or a smaller dictionary limit
//! (it would also cut dictionaries that pay).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, UInt32Array};
use arrow_row::{RowConverter, SortField};
use arrow_schema::{ArrowError, DataType, Schema};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::{ColumnPath, SchemaDescriptor};

/// Rows a file's encoder waits for before deciding (fewer when the row
/// group or file ends first).
pub(crate) const SAMPLE_ROWS: usize = 16_384;

/// Bytes of rows (in memory) a file's encoder waits for at most before
/// deciding, so wide rows do not hold many megabytes back.
pub(crate) const SAMPLE_BYTES: usize = 8 << 20;

/// Values of each column looked at, at most.
pub(crate) const SAMPLE_VALUES: usize = SAMPLE_ROWS;

/// Fewer non-null values than this say too little: the column keeps its
/// dictionary (a file's first row group may be a few rows).
pub(crate) const MIN_VALUES: usize = 1_000;

/// The columns of `schema` (the file's Arrow schema, laid out as `descr`)
/// to write without a dictionary, judged on `sample` (see the module doc).
pub(crate) fn plain_columns(
    schema: &Schema,
    descr: &SchemaDescriptor,
    props: &WriterProperties,
    sample: &[Arc<RecordBatch>],
) -> Result<Vec<ColumnPath>, ArrowError> {
    let candidates: Vec<(usize, ColumnPath)> = (0..descr.num_columns())
        .filter_map(|leaf| {
            let field = descr.get_column_root_idx(leaf);
            let ty = schema.field(field).data_type();
            let path = descr.column(leaf).path().clone();
            let flat =
                !ty.is_nested() && !matches!(ty, DataType::Dictionary(..) | DataType::Boolean);
            (flat && props.dictionary_enabled(&path)).then_some((field, path))
        })
        .collect();
    let rows: usize = sample.iter().map(|b| b.num_rows()).sum();
    if candidates.is_empty() || rows == 0 {
        return Ok(Vec::new());
    }
    let stride = rows.div_ceil(SAMPLE_VALUES).max(1);
    let mut plain = Vec::new();
    // A dictionary is per row group: it never holds more values than that.
    let group_rows = props.max_row_group_row_count().unwrap_or(usize::MAX) as f64;
    for (field, path) in candidates {
        let values = sampled(sample, field, stride)?;
        let Some(bytes) = dictionary_bytes(&values, group_rows)? else {
            continue;
        };
        if bytes >= props.column_dictionary_page_size_limit(&path) as f64 {
            plain.push(path);
        }
    }
    Ok(plain)
}

/// `props` with a dictionary for none of `plain`.
pub(crate) fn without_dictionary(
    props: &WriterProperties,
    plain: &[ColumnPath],
) -> WriterProperties {
    plain
        .iter()
        .fold(props.clone().into_builder(), |b, path| {
            b.set_column_dictionary_enabled(path.clone(), false)
        })
        .build()
}

/// Every `stride`-th row of `sample`'s column `field`, as one array.
fn sampled(
    sample: &[Arc<RecordBatch>],
    field: usize,
    stride: usize,
) -> Result<ArrayRef, ArrowError> {
    if stride == 1 {
        // Every row (the usual case): one copy, not a take and then a copy.
        let parts: Vec<&dyn arrow_array::Array> =
            sample.iter().map(|b| b.column(field).as_ref()).collect();
        return arrow_select::concat::concat(&parts);
    }
    let mut parts = Vec::with_capacity(sample.len());
    let mut next = 0usize;
    let mut base = 0usize;
    for batch in sample {
        let end = base + batch.num_rows();
        let picks: UInt32Array = (next..end)
            .step_by(stride)
            .map(|at| (at - base) as u32)
            .collect();
        next += picks.len() * stride;
        base = end;
        parts.push(arrow_select::take::take(batch.column(field), &picks, None)?);
    }
    let parts: Vec<&dyn arrow_array::Array> = parts.iter().map(|a| a.as_ref()).collect();
    arrow_select::concat::concat(&parts)
}

/// The size the column's dictionary would likely reach, judged from
/// `values`; `None` when they are too few (or all null) to judge.
fn dictionary_bytes(values: &ArrayRef, group_rows: f64) -> Result<Option<f64>, ArrowError> {
    let seen = values.len() - values.null_count();
    if seen < MIN_VALUES {
        return Ok(None);
    }
    // A type the row format cannot hold keeps its dictionary, as before.
    let Ok(converter) = RowConverter::new(vec![SortField::new(values.data_type().clone())]) else {
        return Ok(None);
    };
    let rows = converter.convert_columns(std::slice::from_ref(values))?;
    // hashbrown's default hasher (foldhash), not std's SipHash: this runs
    // on the writer's path before any encoding starts, and SipHash was 7%
    // of a 200,000-row replace's profile.
    let mut distinct = hashbrown::HashSet::with_capacity(values.len());
    distinct.extend(
        (0..rows.num_rows())
            .filter(|i| values.is_valid(*i))
            .map(|i| rows.row(i)),
    );
    // Bytes per value as held in memory: the width of fixed-size values,
    // the length plus an offset for strings and binaries (as a plain
    // dictionary page stores them, a length before each).
    let size = values.to_data().get_slice_memory_size()? as f64 / values.len() as f64;
    let distinct = estimated_distinct(seen, distinct.len()).unwrap_or(f64::INFINITY);
    Ok(Some(distinct.min(group_rows) * size))
}

/// How many distinct values a column likely holds when `seen` values of it
/// held `distinct` distinct ones: the `n` for which `seen` draws from `n`
/// equally likely values give `distinct` distinct ones on average
/// (`n * (1 - e^(-seen/n)) = distinct`). `None` (unbounded) when nothing
/// repeated.
fn estimated_distinct(seen: usize, distinct: usize) -> Option<f64> {
    if distinct >= seen {
        return None;
    }
    let (seen, distinct) = (seen as f64, distinct as f64);
    let expected = |n: f64| n * (1.0 - (-seen / n).exp());
    // `expected` grows with n from below `distinct` (at n = distinct)
    // towards `seen`: find where it crosses.
    let (mut low, mut high) = (distinct, distinct * 2.0);
    while expected(high) < distinct {
        low = high;
        high *= 2.0;
    }
    for _ in 0..60 {
        let mid = (low + high) / 2.0;
        match expected(mid) < distinct {
            true => low = mid,
            false => high = mid,
        }
    }
    Some(high)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{Float64Array, Int64Array, StringArray};
    use arrow_schema::Field;
    use parquet::arrow::ArrowSchemaConverter;

    /// The columns `plain_columns` picks for `columns`, in batches of 8,192.
    fn picked(columns: Vec<(&str, ArrayRef)>, props: WriterProperties) -> Vec<String> {
        let batch = RecordBatch::try_from_iter(columns).unwrap();
        let descr = ArrowSchemaConverter::new()
            .convert(&batch.schema())
            .unwrap();
        let sample: Vec<Arc<RecordBatch>> = (0..batch.num_rows())
            .step_by(8192)
            .map(|at| Arc::new(batch.slice(at, 8192.min(batch.num_rows() - at))))
            .collect();
        plain_columns(&batch.schema(), &descr, &props, &sample)
            .unwrap()
            .iter()
            .map(|p| p.string())
            .collect()
    }

    fn default_props() -> WriterProperties {
        WriterProperties::builder().build()
    }

    #[test]
    fn distinct_values_are_written_plain_and_repeating_ones_keep_their_dictionary() {
        let rows = SAMPLE_ROWS as i64;
        let picked = picked(
            vec![
                (
                    "id",
                    Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef,
                ),
                // Cycles over 10,000 values: distinct within one batch,
                // repeating across the sample.
                (
                    "amount",
                    Arc::new(Float64Array::from_iter_values(
                        (0..rows).map(|i| (i * 31 % 10_000) as f64),
                    )),
                ),
                // 1,000 long URLs: a 500 KB dictionary that pays 16 times.
                (
                    "url",
                    Arc::new(StringArray::from_iter_values(
                        (0..rows).map(|i| format!("{:0>500}", i * 7 % 1000)),
                    )),
                ),
                // A million possible customers, drawn at random.
                (
                    "customer",
                    Arc::new(StringArray::from_iter_values((0..rows).map(|i| {
                        format!(
                            "c-{}",
                            (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000
                        )
                    }))),
                ),
                (
                    "status",
                    Arc::new(StringArray::from_iter_values(
                        (0..rows).map(|i| ["new", "paid"][i as usize % 2]),
                    )),
                ),
                (
                    "empty",
                    Arc::new(Int64Array::from(vec![None; rows as usize])),
                ),
            ],
            default_props(),
        );
        assert_eq!(picked, ["id", "customer"]);
    }

    #[test]
    fn each_column_is_judged_by_its_own_settings() {
        let ids = || Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef;
        let repeating = Arc::new(Int64Array::from_iter_values((0..1000).map(|i| i % 100)));
        let props = WriterProperties::builder()
            .set_column_dictionary_enabled(ColumnPath::from("a"), false)
            .set_column_dictionary_page_size_limit(ColumnPath::from("b"), 100)
            .build();
        let columns = vec![
            ("a", ids()),
            ("b", repeating.clone()),
            ("c", ids()),
            ("d", repeating),
        ];
        assert_eq!(picked(columns, props), ["b", "c"]);
    }

    #[test]
    fn a_dictionary_that_fits_for_a_whole_row_group_is_kept() {
        let ids = || Arc::new(Int64Array::from_iter_values(0..SAMPLE_ROWS as i64)) as ArrayRef;
        let small_groups = WriterProperties::builder()
            .set_max_row_group_row_count(Some(100_000))
            .build();
        // 100,000 distinct 8-byte values fit under 1 MiB; 1,048,576 do not.
        assert!(picked(vec![("id", ids())], small_groups).is_empty());
        assert_eq!(picked(vec![("id", ids())], default_props()), ["id"]);
    }

    #[test]
    fn values_repeating_a_few_rows_apart_keep_their_dictionary() {
        // Sorted data: each value three times in a row.
        let runs = Arc::new(Int64Array::from_iter_values(
            (0..SAMPLE_ROWS as i64).map(|i| i / 3),
        ));
        assert!(picked(vec![("sorted", runs as ArrayRef)], default_props()).is_empty());
    }

    #[test]
    fn more_rows_than_sampled_are_judged_on_every_nth() {
        // 50,000 rows (one slice larger than the sample): every 4th row.
        let rows = 50_000i64;
        let ids = Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef;
        let cycling = Arc::new(Float64Array::from_iter_values(
            (0..rows).map(|i| (i * 31 % 10_000) as f64),
        ));
        assert_eq!(
            picked(vec![("id", ids), ("amount", cycling)], default_props()),
            ["id"]
        );
    }

    #[test]
    fn a_sample_of_a_few_rows_keeps_every_dictionary() {
        let ids = Arc::new(Int64Array::from_iter_values(0..(MIN_VALUES as i64 - 1))) as ArrayRef;
        assert!(picked(vec![("id", ids)], default_props()).is_empty());
    }

    #[test]
    fn nested_columns_are_left_alone() {
        let ids = Arc::new(Int64Array::from_iter_values(0..1000)) as ArrayRef;
        let nested = arrow_array::StructArray::from(vec![(
            Arc::new(Field::new("a", DataType::Int64, false)),
            ids.clone(),
        )]);
        let picked = picked(
            vec![("s", Arc::new(nested) as ArrayRef), ("id", ids)],
            default_props(),
        );
        assert_eq!(picked, ["id"]);
    }

    #[test]
    fn the_estimate_follows_the_number_of_values_drawn_from() {
        assert_eq!(estimated_distinct(100, 100), None);
        // 4,096 draws from 1,000 values give about 983 distinct ones.
        let n = estimated_distinct(4096, 983).unwrap();
        assert!((950.0..1050.0).contains(&n), "{n}");
        // Few repeats: about seen^2 / (2 * repeats).
        let n = estimated_distinct(4096, 4096 - 64).unwrap();
        assert!((120_000.0..140_000.0).contains(&n), "{n}");
    }
}
