//! The data files of one table version, read without its log.
//!
//! A scan planned in one process lists the files it reads; a cluster's
//! executor reads them in another. Opening the table there would read its
//! log again (and could find a later version): [`TableFiles`] instead names
//! the table and the version the planner pinned, and reads the listed files
//! from the table's directory, which holds them unchanged until vacuum
//! removes versions past retention. Nothing here checks that the files
//! belong to that version: the planner's snapshot did.

use std::sync::Arc;

use arrow_array::RecordBatch;
use futures::stream::BoxStream;

use crate::error::Result;
use crate::format::DataFile;
use crate::handle::TableInner;
use crate::reader::{read_files, ReadOptions, ScanHooks};
use crate::schema::TableSchema;
use crate::snapshot::Snapshot;
use crate::warehouse::Warehouse;

/// A table's data files at one version, readable without the table's log
/// ([`Snapshot::files`] where the snapshot is at hand,
/// [`Warehouse::table_files`] in another process).
#[derive(Clone)]
pub struct TableFiles {
    table: Arc<TableInner>,
    version: u64,
}

impl std::fmt::Debug for TableFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableFiles")
            .field("table", &self.table.name)
            .field("version", &self.version)
            .finish()
    }
}

impl TableFiles {
    /// The table's name.
    pub fn table_name(&self) -> &str {
        &self.table.name
    }

    /// The version the files were listed from.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Stream the rows of `files` (listed from this version), projected to
    /// `columns` and adapted to `schema`, skipping what `hooks` prunes, as
    /// [`Snapshot::scan_files_as`] does.
    pub fn scan_as(
        &self,
        schema: &TableSchema,
        files: Vec<DataFile>,
        columns: Option<&[&str]>,
        options: ReadOptions,
        hooks: ScanHooks,
    ) -> BoxStream<'static, Result<RecordBatch>> {
        read_files(&self.table, schema, files, columns, options, hooks)
    }
}

impl Snapshot {
    /// This version's files, to read without the snapshot.
    pub fn files(&self) -> TableFiles {
        TableFiles {
            table: self.table_inner().clone(),
            version: self.version(),
        }
    }
}

impl Warehouse {
    /// The files of table `name` at `version`, read from the table's
    /// directory without reading its log (no I/O here; a missing table or
    /// file fails when read, naming the file).
    pub fn table_files(&self, name: &str, version: u64) -> Result<TableFiles> {
        crate::names::validate_table_name(name)?;
        let table = TableInner::new(name, self.location().child(name)?, self.options().clone());
        Ok(TableFiles {
            table: Arc::new(table),
            version,
        })
    }
}
