//! What clients browse: catalogs, schemas, tables (with their Arrow schemas),
//! table types and the server's SQL info.
//!
//! The warehouse is one catalog, `logbook`, whose schema `public` holds every
//! table (DataFusion's `information_schema` is listed beside it).

use arrow_array::RecordBatch;
use arrow_flight::sql::metadata::{SqlInfoData, SqlInfoDataBuilder};
use arrow_flight::sql::{
    CommandGetCatalogs, CommandGetDbSchemas, CommandGetTableTypes, CommandGetTables, SqlInfo,
};
use datafusion::datasource::TableType;
use datafusion::execution::context::SessionContext;
use logbook_core::Warehouse;
use logbook_datafusion::catalog::WarehouseSchema;
use logbook_datafusion::{datafusion, session, QueryOptions};
use tonic::Status;

use crate::query::{datafusion_status, query_status};
use logbook_datafusion::plain::plain_schema;

/// The catalog a warehouse appears as.
pub const CATALOG: &str = "logbook";

/// The table types this server reports.
const TABLE_TYPES: [&str; 2] = ["TABLE", "VIEW"];

fn arrow_status(e: arrow_flight::error::FlightError) -> Status {
    Status::internal(format!("cannot build the metadata result: {e}"))
}

fn table_type(t: TableType) -> &'static str {
    match t {
        TableType::Base | TableType::Temporary => "TABLE",
        TableType::View => "VIEW",
    }
}

async fn analyst_session(warehouse: &Warehouse) -> Result<SessionContext, Status> {
    session(warehouse, QueryOptions::default(), None)
        .await
        .map_err(query_status)
}

/// `GetCatalogs`.
pub fn catalogs(cmd: CommandGetCatalogs) -> Result<RecordBatch, Status> {
    let mut b = cmd.into_builder();
    b.append(CATALOG);
    b.build().map_err(arrow_status)
}

/// `GetDbSchemas`.
pub async fn schemas(
    warehouse: &Warehouse,
    cmd: CommandGetDbSchemas,
) -> Result<RecordBatch, Status> {
    let ctx = analyst_session(warehouse).await?;
    let mut b = cmd.into_builder();
    for catalog in ctx.catalog_names() {
        if let Some(c) = ctx.catalog(&catalog) {
            for schema in c.schema_names() {
                b.append(&catalog, schema);
            }
        }
    }
    b.build().map_err(arrow_status)
}

/// `GetTables`, with each table's Arrow schema when asked.
pub async fn tables(warehouse: &Warehouse, cmd: CommandGetTables) -> Result<RecordBatch, Status> {
    let ctx = analyst_session(warehouse).await?;
    let mut b = cmd.into_builder();
    for catalog in ctx.catalog_names() {
        let Some(c) = ctx.catalog(&catalog) else {
            continue;
        };
        for schema_name in c.schema_names() {
            let Some(schema) = c.schema(&schema_name) else {
                continue;
            };
            // A session lists the warehouse only when asked for every table.
            if let Some(warehouse) = schema.downcast_ref::<WarehouseSchema>() {
                warehouse.list().await.map_err(|e| query_status(e.into()))?;
            }
            for name in schema.table_names() {
                let Some(table) = schema.table(&name).await.map_err(datafusion_status)? else {
                    continue;
                };
                b.append(
                    &catalog,
                    &schema_name,
                    &name,
                    table_type(table.table_type()),
                    &plain_schema(&table.schema()),
                )
                .map_err(arrow_status)?;
            }
        }
    }
    b.build().map_err(arrow_status)
}

/// `GetTableTypes`.
pub fn table_types(cmd: CommandGetTableTypes) -> Result<RecordBatch, Status> {
    let mut b = cmd.into_builder();
    for t in TABLE_TYPES {
        b.append(t);
    }
    b.build().map_err(arrow_status)
}

/// What `GetSqlInfo` answers.
pub fn sql_info() -> SqlInfoData {
    let mut b = SqlInfoDataBuilder::new();
    b.append(SqlInfo::FlightSqlServerName, "logbook");
    b.append(SqlInfo::FlightSqlServerVersion, env!("CARGO_PKG_VERSION"));
    b.append(SqlInfo::FlightSqlServerArrowVersion, "59");
    b.append(SqlInfo::FlightSqlServerReadOnly, true);
    b.append(SqlInfo::FlightSqlServerSql, true);
    b.append(SqlInfo::FlightSqlServerSubstrait, false);
    b.append(SqlInfo::FlightSqlServerTransaction, 0i32);
    b.append(SqlInfo::FlightSqlServerCancel, false);
    b.append(SqlInfo::SqlDdlCatalog, false);
    b.append(SqlInfo::SqlDdlSchema, false);
    b.append(SqlInfo::SqlDdlTable, false);
    b.append(SqlInfo::SqlIdentifierQuoteChar, "\"");
    b.append(SqlInfo::SqlAllTablesAreSelectable, true);
    b.build().expect("static SQL info builds")
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;

    #[test]
    fn catalogs_and_table_types_answer() {
        let c = catalogs(CommandGetCatalogs {}).unwrap();
        assert_eq!(c.column(0).as_string::<i32>().value(0), CATALOG);
        let t = table_types(CommandGetTableTypes {}).unwrap();
        assert_eq!(t.num_rows(), TABLE_TYPES.len());
    }

    #[test]
    fn sql_info_says_read_only() {
        let info = sql_info();
        let batch = info
            .record_batch([SqlInfo::FlightSqlServerReadOnly as u32])
            .unwrap();
        assert_eq!(batch.num_rows(), 1);
    }
}
