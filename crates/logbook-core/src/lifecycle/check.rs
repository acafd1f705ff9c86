//! The integrity check: do a snapshot's files exist, read, and hold what the
//! manifest says?

use std::collections::HashMap;

use arrow_array::cast::AsArray;
use arrow_array::types::Date32Type;
use arrow_array::Array;
use chrono::NaiveDate;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use serde::Serialize;

use crate::dates::to_days;
use crate::error::{Error, Result};
use crate::format::{DataFile, PartitionEntry};
use crate::reader::{ObjectReader, ReadOptions};
use crate::scd2::Scd2State;
use crate::snapshot::Snapshot;
use crate::table::Table;

/// How thorough a check is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckDepth {
    /// One listing of `data/`: every file exists with its recorded size.
    Listing,
    /// Also read every footer, compare row counts, read the partition column
    /// of every file and check the dimension's interval invariants.
    Full,
}

/// What kind of problem a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    MissingFile,
    SizeMismatch,
    UnreadableFile,
    RowCountMismatch,
    RowOutsideDate,
    DimensionInvariant,
}

/// One problem, with the date and file it concerns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<NaiveDate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub detail: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(d) = self.date {
            write!(f, "partition {d}: ")?;
        }
        if let Some(file) = &self.file {
            write!(f, "file {file}: ")?;
        }
        f.write_str(&self.detail)
    }
}

/// Everything a check found in one snapshot.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub table: String,
    pub version: u64,
    pub files_checked: usize,
    pub problems: Vec<Problem>,
}

/// Check `snapshot` of `table`.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::lifecycle::{check, CheckDepth};
/// use logbook_core::{Warehouse, schema::TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let t = wh.create_table("t", TableSchema::parse_spec("t", "date:date,n:int64", "date")?).await?;
/// let report = check(&t, &t.latest().await?, CheckDepth::Full).await?;
/// assert!(report.problems.is_empty());
/// # Ok(()) }
/// ```
pub async fn check(table: &Table, snapshot: &Snapshot, depth: CheckDepth) -> Result<CheckReport> {
    let partitions = snapshot.partitions().await?;
    let dimension = snapshot.dimension_files();
    let files_checked = partitions.iter().map(|p| p.files.len()).sum::<usize>() + dimension.len();
    let mut problems = match depth {
        CheckDepth::Listing => listing_problems(table, &partitions, &dimension).await?,
        CheckDepth::Full => {
            let column = snapshot.schema().partition_column().map(str::to_string);
            // Owned inputs for each future: borrowing closures make the
            // whole `check` future not `Send` for every lifetime (a rustc
            // limitation), which a server's handlers need.
            let mut found: Vec<Problem> = futures::stream::iter(partitions.clone())
                .map(|p| {
                    let (table, snapshot, column) = (table.clone(), snapshot.clone(), column.clone());
                    async move { partition_problems(&table, &snapshot, &p, column.as_deref()).await }
                })
                .buffered(8)
                .try_collect::<Vec<_>>()
                .await?
                .into_iter()
                .flatten()
                .collect();
            found.extend(dimension_problems(table, snapshot, &dimension).await?);
            found
        }
    };
    problems.sort_by(|a, b| (a.date, &a.file).cmp(&(b.date, &b.file)));
    Ok(CheckReport {
        table: table.name().to_string(),
        version: snapshot.version(),
        files_checked,
        problems,
    })
}

async fn listing_problems(
    table: &Table,
    partitions: &[PartitionEntry],
    dimension: &[DataFile],
) -> Result<Vec<Problem>> {
    let listed = table.inner.list("data").await?;
    Ok(size_problems(table, listed, partitions, dimension))
}

/// The listing check of `partitions` alone (sorted by date, of a table
/// partitioned by `column`), as `status` shows it: the listing starts at
/// the first date's directory (S3 lists from there; other stores filter),
/// so its cost follows the dates asked about on stores that list in order.
/// A file outside `data/<column>=<date>/` (renamed partition column) makes
/// it list everything.
pub(crate) async fn partition_listing_problems(
    table: &Table,
    partitions: &[PartitionEntry],
    column: &str,
) -> Result<Vec<Problem>> {
    let Some(first) = partitions.first() else {
        return Ok(Vec::new());
    };
    let offset = format!("data/{column}={}", first.date);
    let files = || partitions.iter().flat_map(|p| &p.files);
    let listed = if files().all(|f| f.path.as_str() > offset.as_str()) {
        table.inner.list_after("data", &offset).await?
    } else {
        table.inner.list("data").await?
    };
    Ok(size_problems(table, listed, partitions, &[]))
}

/// Files of `partitions` and `dimension` missing from `listed` or of
/// another size.
fn size_problems(
    table: &Table,
    listed: Vec<object_store::ObjectMeta>,
    partitions: &[PartitionEntry],
    dimension: &[DataFile],
) -> Vec<Problem> {
    let loc = &table.inner.location;
    let sizes: HashMap<String, u64> = listed
        .into_iter()
        .map(|o| (loc.relative(&o.location), o.size))
        .collect();
    let files = partitions
        .iter()
        .flat_map(|p| p.files.iter().map(move |f| (Some(p.date), f)))
        .chain(dimension.iter().map(|f| (None, f)));
    files
        .filter_map(|(date, f)| size_problem(date, f, sizes.get(&f.path).copied()))
        .collect()
}

fn size_problem(date: Option<NaiveDate>, file: &DataFile, found: Option<u64>) -> Option<Problem> {
    let (kind, detail) = match found {
        None => (ProblemKind::MissingFile, "is missing".to_string()),
        Some(size) if size != file.size => (
            ProblemKind::SizeMismatch,
            format!("has {size} bytes but the manifest records {}", file.size),
        ),
        Some(_) => return None,
    };
    Some(Problem {
        kind,
        date,
        file: Some(file.path.clone()),
        detail,
    })
}

async fn partition_problems(
    table: &Table,
    snapshot: &Snapshot,
    partition: &PartitionEntry,
    column: Option<&str>,
) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    let mut rows = 0u64;
    for file in &partition.files {
        match file_problems(table, snapshot, Some(partition.date), file, column).await {
            Ok(Some(p)) => problems.push(p),
            Ok(None) => rows += file.rows,
            Err(e) => return Err(e),
        }
    }
    if problems.is_empty() && rows != partition.rows {
        problems.push(Problem {
            kind: ProblemKind::RowCountMismatch,
            date: Some(partition.date),
            file: None,
            detail: format!(
                "files hold {rows} rows but the manifest records {} for the partition",
                partition.rows
            ),
        });
    }
    Ok(problems)
}

/// The first problem with one file, if any.
async fn file_problems(
    table: &Table,
    snapshot: &Snapshot,
    date: Option<NaiveDate>,
    file: &DataFile,
    column: Option<&str>,
) -> Result<Option<Problem>> {
    let problem = |kind, detail: String| {
        Ok(Some(Problem {
            kind,
            date,
            file: Some(file.path.clone()),
            detail,
        }))
    };
    let loc = &table.inner.location;
    let path = loc.path(&file.path);
    let size = match loc.store().head(&path).await {
        Ok(meta) => meta.size,
        Err(object_store::Error::NotFound { .. }) => {
            return problem(ProblemKind::MissingFile, "is missing".into())
        }
        Err(e) => return Err(Error::storage(&file.path, e)),
    };
    if let Some(p) = size_problem(date, file, Some(size)) {
        return Ok(Some(p));
    }
    let mut reader = ObjectReader::at(loc, path, size);
    let meta = match ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new()).await {
        Ok(m) => m,
        Err(e) => {
            return problem(
                ProblemKind::UnreadableFile,
                format!("footer does not read: {e}"),
            )
        }
    };
    let in_footer = meta.metadata().file_metadata().num_rows() as u64;
    if in_footer != file.rows {
        return problem(
            ProblemKind::RowCountMismatch,
            format!(
                "holds {in_footer} rows but the manifest records {}",
                file.rows
            ),
        );
    }
    let (Some(column), Some(date)) = (column, date) else {
        return Ok(None);
    };
    let day = to_days(date);
    let mut outside = 0usize;
    let mut batches =
        snapshot.scan_files(vec![file.clone()], Some(&[column]), ReadOptions::default());
    while let Some(batch) = batches.next().await {
        let batch = match batch {
            Ok(b) => b,
            Err(e) => return problem(ProblemKind::UnreadableFile, format!("does not read: {e}")),
        };
        let values = batch.column(0).as_primitive::<Date32Type>();
        outside += values.null_count()
            + values
                .iter()
                .filter(|v| v.is_some_and(|v| v != day))
                .count();
    }
    if outside > 0 {
        return problem(
            ProblemKind::RowOutsideDate,
            format!("{outside} row(s) have a {column} other than {date}"),
        );
    }
    Ok(None)
}

async fn dimension_problems(
    table: &Table,
    snapshot: &Snapshot,
    files: &[DataFile],
) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    for f in files {
        if let Some(p) = file_problems(table, snapshot, None, f, None).await? {
            problems.push(p);
        }
    }
    if !problems.is_empty() || files.is_empty() {
        return Ok(problems);
    }
    let mut state = Scd2State::new(table.name(), snapshot.schema())?;
    let mut batches = snapshot.scan_dimension().await?;
    let mut loaded = Ok(());
    while let Some(batch) = batches.next().await {
        loaded = batch.and_then(|b| state.load(&b));
        if loaded.is_err() {
            break;
        }
    }
    if let Err(e) = loaded.and_then(|_| state.check_invariants()) {
        problems.push(Problem {
            kind: ProblemKind::DimensionInvariant,
            date: None,
            file: None,
            detail: e.to_string(),
        });
    }
    Ok(problems)
}
