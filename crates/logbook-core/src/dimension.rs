//! Changing a dimension (SCD2) table: apply changes, deletes or a full
//! state at an effective (business) date, as one commit.

use arrow_array::RecordBatch;
use chrono::NaiveDate;
use futures::TryStreamExt;

use crate::commit::{commit, DimensionChange, PendingCommit};
use crate::error::{Error, Result};
use crate::format::{layout, DateRange, RunInfo};
use crate::intent::Lease;
use crate::names::validate_run_id;
use crate::scd2::Scd2State;
use crate::schema::{VALID_FROM, VALID_TO};
use crate::staged_files::{delete_files, StagedFiles};
use crate::table::Table;
use crate::validate::conform;

const BATCH_ROWS: usize = 64 * 1024;

/// What a dimension change did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DimensionCommit {
    /// The version holding the result (the current version if nothing changed).
    pub version: u64,
    /// Keys whose intervals changed; 0 means nothing was committed.
    pub changed_keys: usize,
    /// Business dates whose resolved rows changed.
    pub affected: Option<DateRange>,
}

#[derive(Clone, Copy)]
enum Change<'a> {
    Upsert(&'a [RecordBatch]),
    Delete(&'a [RecordBatch]),
    Snapshot(&'a [RecordBatch]),
}

impl Table {
    /// Each row (key and attribute columns, no validity columns) is the new
    /// state of its key from `effective` on: the interval covering the date
    /// is closed there and a new one opened until the key's next change, so
    /// back-dated changes keep later versions. Applying the same change
    /// again changes nothing and commits nothing.
    ///
    /// ```
    /// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
    /// use std::sync::Arc;
    /// use arrow_array::{RecordBatch, StringArray};
    /// use logbook_core::{RunInfo, TableSchema, Warehouse};
    /// let wh = Warehouse::open("memory://")?;
    /// let schema = TableSchema::parse_dimension_spec("customers", "customer:string,region:string", &["customer"])?;
    /// let dim = wh.create_table("customers", schema).await?;
    /// let rows = |region: &str| RecordBatch::try_from_iter([
    ///     ("customer", Arc::new(StringArray::from(vec!["c-17"])) as _),
    ///     ("region", Arc::new(StringArray::from(vec![region])) as _),
    /// ]).unwrap();
    /// let jan = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    /// let mar = chrono::NaiveDate::from_ymd_opt(2026, 3, 20).unwrap();
    /// dim.apply_changes(jan, &[rows("Berlin")], RunInfo::new("load-1")).await?;
    /// let moved = dim.apply_changes(mar, &[rows("Munich")], RunInfo::new("load-2")).await?;
    /// assert_eq!(moved.affected.unwrap().from, mar);
    /// assert_eq!(dim.apply_changes(mar, &[rows("Munich")], RunInfo::new("load-3")).await?.changed_keys, 0);
    /// # Ok(()) }
    /// ```
    pub async fn apply_changes(
        &self,
        effective: NaiveDate,
        rows: &[RecordBatch],
        run: RunInfo,
    ) -> Result<DimensionCommit> {
        self.apply(effective, Change::Upsert(rows), run).await
    }

    /// Close the interval of each key listed (key columns; others ignored)
    /// at `effective`. Keys not valid at that date are left alone.
    pub async fn apply_deletes(
        &self,
        effective: NaiveDate,
        keys: &[RecordBatch],
        run: RunInfo,
    ) -> Result<DimensionCommit> {
        self.apply(effective, Change::Delete(keys), run).await
    }

    /// `rows` is the whole dimension as it stands at `effective`: logbook
    /// works out which keys changed, appeared or disappeared.
    pub async fn apply_snapshot(
        &self,
        effective: NaiveDate,
        rows: &[RecordBatch],
        run: RunInfo,
    ) -> Result<DimensionCommit> {
        self.apply(effective, Change::Snapshot(rows), run).await
    }

    async fn apply(
        &self,
        effective: NaiveDate,
        change: Change<'_>,
        run: RunInfo,
    ) -> Result<DimensionCommit> {
        validate_run_id(&run.run_id)?;
        // Vacuum keeps the directories this change stages into while it runs.
        let lease = Lease::start(self.inner.clone(), effective, &run.run_id).await;
        let outcome = self.apply_leased(effective, change, run, &lease).await;
        lease.end().await;
        outcome
    }

    async fn apply_leased(
        &self,
        effective: NaiveDate,
        change: Change<'_>,
        run: RunInfo,
        lease: &Lease,
    ) -> Result<DimensionCommit> {
        let inner = &self.inner;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let base = self.latest().await?;
            let schema = base.schema().clone();
            let mut state = Scd2State::new(&inner.name, &schema)?;
            let mut stored = base.scan_dimension().await?;
            while let Some(batch) = stored.try_next().await? {
                state.load(&batch)?;
            }
            let what = format!("dimension change at {effective}");
            let managed = [VALID_FROM, VALID_TO];
            let conformed = |batches: &[RecordBatch]| -> Result<Vec<RecordBatch>> {
                batches
                    .iter()
                    .map(|b| conform(&inner.name, &what, &schema, b, &managed))
                    .collect()
            };
            match change {
                Change::Upsert(rows) => {
                    for b in conformed(rows)? {
                        state.apply_changes(effective, &b)?;
                    }
                }
                Change::Snapshot(rows) => {
                    let all = concat(&schema, &conformed(rows)?, &inner.name)?;
                    state.apply_snapshot(effective, &all)?;
                }
                Change::Delete(keys) => {
                    if let Some(start) = state.history_start().filter(|s| effective < *s) {
                        return Err(Error::InvalidInput {
                            table: inner.name.clone(),
                            reason: format!(
                                "deletes effective {effective} are before the dimension's history begins ({start}): no key is valid then; check the date; nothing was committed"
                            ),
                        });
                    }
                    for b in keys {
                        check_keys(&inner.name, &schema, b)?;
                        state.apply_deletes(effective, b)?;
                    }
                }
            }
            if state.changed_keys() == 0 {
                return Ok(DimensionCommit {
                    version: base.version(),
                    changed_keys: 0,
                    affected: None,
                });
            }
            state.check_invariants()?;

            let dir = layout::dimension_dir(inner.options.ids.next_id());
            lease.hold(&dir).await;
            let mut staged = StagedFiles::new(inner.clone(), dir, &schema, base.properties());
            let mut rows = 0u64;
            for batch in state.to_batches(BATCH_ROWS)? {
                rows += batch.num_rows() as u64;
                lease.beat_if_due().await;
                if let Err(e) = staged.write(&batch).await {
                    staged.abort().await;
                    return Err(e);
                }
            }
            let files = staged.finish().await?;
            let paths: Vec<String> = files.iter().map(|f| f.path.clone()).collect();
            if let Err(e) = lease.confirm(&files, |_| effective).await {
                delete_files(inner, &paths).await;
                return Err(e);
            }
            let change_record = DimensionChange {
                files,
                rows,
                affected: state.affected(),
            };
            let pending = PendingCommit::new(
                base.content_version(),
                run.clone(),
                crate::commit::Change::Dimension(change_record),
            );
            match commit(inner, pending).await {
                Ok(info) => {
                    return Ok(DimensionCommit {
                        version: info.version,
                        changed_keys: state.changed_keys(),
                        affected: state.affected(),
                    })
                }
                Err(failure) => {
                    if !failure.ambiguous {
                        delete_files(inner, &paths).await;
                    }
                    // Someone else changed the dimension: recompute on top of it.
                    let retry = matches!(failure.error, Error::DimensionConflict { .. })
                        && !failure.ambiguous
                        && attempts < inner.options.max_commit_attempts;
                    if !retry {
                        return Err(failure.error);
                    }
                }
            }
        }
    }
}

fn check_keys(table: &str, schema: &crate::schema::TableSchema, batch: &RecordBatch) -> Result<()> {
    for key in schema.keys().expect("dimension") {
        let col = schema.column(key).expect("validated");
        let mismatch = |problem: String| Error::SchemaMismatch {
            table: table.to_string(),
            what: "dimension delete".into(),
            field: key.clone(),
            problem,
        };
        match batch.column_by_name(key) {
            None => return Err(mismatch("is missing from the input".into())),
            Some(a) if a.data_type() != &col.ty.arrow_type() => {
                return Err(mismatch(format!(
                    "has type {} but the key is {}",
                    a.data_type(),
                    col.ty.name()
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn concat(
    schema: &crate::schema::TableSchema,
    batches: &[RecordBatch],
    table: &str,
) -> Result<RecordBatch> {
    match batches.first() {
        None => {
            let arrow = schema.arrow_schema();
            let fields: Vec<_> = arrow
                .fields()
                .iter()
                .filter(|f| f.name() != VALID_FROM && f.name() != VALID_TO)
                .cloned()
                .collect();
            Ok(RecordBatch::new_empty(std::sync::Arc::new(
                arrow_schema::Schema::new(fields),
            )))
        }
        Some(first) => arrow_select::concat::concat_batches(&first.schema(), batches)
            .map_err(|e| Error::arrow(format!("table {table}"), e)),
    }
}
