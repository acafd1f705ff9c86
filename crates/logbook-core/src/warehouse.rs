//! A warehouse: a root holding tables by name (`<warehouse>/<table>/`).

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStore;

use crate::error::{Error, Result};
use crate::format::layout;
use crate::options::TableOptions;
use crate::schema::TableSchema;
use crate::storage::StorageLocation;
use crate::table::Table;

/// Tables by name under one root.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::{Warehouse, TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let schema = TableSchema::parse_spec("orders", "date:date,amount:int64", "date")?;
/// wh.create_table("orders", schema).await?;
/// assert_eq!(wh.list_tables().await?, vec!["orders".to_string()]);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Warehouse {
    location: StorageLocation,
    options: TableOptions,
    /// The heavy-step slot this handle's steps share (`budget/heavy.rs`).
    pub(crate) heavy: crate::budget::HeavyShare,
}

impl Warehouse {
    /// Open a warehouse at a URI with default options.
    pub fn open(uri: &str) -> Result<Self> {
        Ok(Self::new(
            StorageLocation::parse(uri)?,
            TableOptions::default(),
        ))
    }

    /// A warehouse at `location` whose tables use `options`.
    pub fn new(location: StorageLocation, options: TableOptions) -> Self {
        Self {
            location,
            options,
            heavy: Default::default(),
        }
    }

    /// The same warehouse, with tables opened using `options`.
    pub fn with_options(&self, options: TableOptions) -> Self {
        Self::new(self.location.clone(), options)
    }

    /// The options tables are opened with.
    pub fn options(&self) -> &TableOptions {
        &self.options
    }

    /// Where the warehouse lives.
    pub fn location(&self) -> &StorageLocation {
        &self.location
    }

    /// Create table `name`.
    pub async fn create_table(&self, name: &str, schema: TableSchema) -> Result<Table> {
        Table::create(
            self.location.child(name)?,
            name,
            schema,
            self.options.clone(),
        )
        .await
    }

    /// Create table `name` with a declared schedule and chain.
    pub async fn create_table_with_properties(
        &self,
        name: &str,
        schema: TableSchema,
        properties: crate::format::TableProperties,
    ) -> Result<Table> {
        Table::create_with_properties(
            self.location.child(name)?,
            name,
            schema,
            properties,
            self.options.clone(),
        )
        .await
    }

    /// Open table `name`.
    pub async fn table(&self, name: &str) -> Result<Table> {
        Table::open(self.location.child(name)?, name, self.options.clone()).await
    }

    /// Names of the tables in the warehouse, sorted: the directories of
    /// [`Warehouse::list_table_dirs`] that hold a log (checked 16 at a time).
    pub async fn list_tables(&self) -> Result<Vec<String>> {
        let dirs = self.list_table_dirs().await?;
        let checked: Vec<Option<String>> = futures::stream::iter(dirs)
            .map(|name| async move {
                let Ok(table) = self.location.child(&name) else {
                    return Ok(None);
                };
                let log_dir = table.path(layout::LOG_DIR);
                let mut entries = table.store().list(Some(&log_dir));
                let first = entries
                    .try_next()
                    .await
                    .map_err(|e| Error::storage(&log_dir, e))?;
                Ok::<_, Error>(first.map(|_| name))
            })
            .buffered(16)
            .try_collect()
            .await?;
        Ok(checked.into_iter().flatten().collect())
    }

    /// The directories at the warehouse's root, sorted, from one listing:
    /// every table, and any other directory there (opening one that holds
    /// no table fails with `TableNotFound`). For a caller that opens only
    /// the few tables it needs, one `LIST` instead of one per table.
    pub async fn list_table_dirs(&self) -> Result<Vec<String>> {
        let root = self.location.path("");
        let prefix = (!root.as_ref().is_empty()).then_some(&root);
        let listing = self
            .location
            .store()
            .list_with_delimiter(prefix)
            .await
            .map_err(|e| Error::storage(self.location.uri(), e))?;
        // Names no table can have (the warehouse's own `_logbook/`) are left out.
        let mut names: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|dir| dir.filename().map(str::to_string))
            .filter(|name| crate::names::validate_table_name(name).is_ok())
            .collect();
        names.sort();
        Ok(names)
    }
}
