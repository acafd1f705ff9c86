//! Delta checkpoints: every [`CHECKPOINT_INTERVAL`] versions, the whole
//! state of one Delta version in `<version>.checkpoint.parquet`, and
//! `_last_checkpoint` pointing at it, so a Delta reader opens the table from
//! the checkpoint plus fewer than 100 JSON entries however long the history.
//!
//! The state of Delta version `d` is exactly the logbook snapshot it mirrors,
//! so the checkpoint is built from that snapshot (protocol, metaData, the
//! `txn`, one `add` per live file), not by replaying the Delta log. It holds
//! no `remove` tombstones: they only tell a Delta VACUUM what it may delete,
//! and logbook's own vacuum owns the files. The columns are the subset of
//! Delta's checkpoint schema that readers need; deltalake 1.6, DuckDB's delta
//! extension and polars read it (checked in `tests/delta/`).
//!
//! The actions are encoded as JSON lines and decoded into the checkpoint's
//! Arrow schema by `arrow-json`, rather than built with nested array
//! builders: one encoding of each action for commits and checkpoints alike.
//!
//! [`CHECKPOINT_INTERVAL`]: super::delta_log::CHECKPOINT_INTERVAL

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema};
use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use serde_json::json;

use super::delta_commit::{add, declaration, live_files, txn};
use super::delta_log::{self, Action, DELTA_LOG};
use crate::error::{Error, Result};
use crate::handle::TableInner;
use crate::snapshot::Snapshot;

/// Write the checkpoint of Delta version `d`, which mirrors `snapshot`.
pub(crate) async fn write(table: &TableInner, d: u64, snapshot: &Snapshot) -> Result<()> {
    let schema = snapshot.schema();
    let ts = snapshot.timestamp_ms();
    let mut actions: Vec<Action> = declaration(table, schema).await?.into();
    actions.push(txn(snapshot));
    for f in live_files(snapshot).await?.values() {
        actions.push(Action::Add(add(schema, f, ts, false)));
    }
    let relative = delta_log::checkpoint_path(d);
    let bytes = encode(&actions).map_err(|e| Error::arrow(&relative, e))?;
    let store = table.location.store();
    let path = table.location.path(&relative);
    store
        .put(&path, PutPayload::from(bytes))
        .await
        .map_err(|e| Error::storage(&path, e))?;
    // Only a hint: readers list forward from it, so a stale one is harmless.
    let hint = table
        .location
        .path(&format!("{DELTA_LOG}/_last_checkpoint"));
    let body = json!({"version": d, "size": actions.len()}).to_string();
    store
        .put(&hint, PutPayload::from(body))
        .await
        .map_err(|e| Error::storage(&hint, e))?;
    Ok(())
}

fn encode(actions: &[Action]) -> std::result::Result<Bytes, arrow_schema::ArrowError> {
    let schema = Arc::new(checkpoint_schema());
    let mut lines = Vec::new();
    for a in actions {
        serde_json::to_writer(&mut lines, a).expect("actions serialise");
        lines.push(b'\n');
    }
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .with_batch_size(actions.len().max(1))
        .build_decoder()?;
    decoder.decode(&lines)?;
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, schema, None)
        .map_err(|e| arrow_schema::ArrowError::ExternalError(Box::new(e)))?;
    while let Some(batch) = decoder.flush()? {
        writer
            .write(&batch)
            .map_err(|e| arrow_schema::ArrowError::ExternalError(Box::new(e)))?;
    }
    writer
        .close()
        .map_err(|e| arrow_schema::ArrowError::ExternalError(Box::new(e)))?;
    Ok(Bytes::from(out))
}

/// The columns of a Delta checkpoint that logbook writes (all nullable: a
/// row holds one action).
fn checkpoint_schema() -> Schema {
    let s = |n: &str| Field::new(n, DataType::Utf8, true);
    let i64f = |n: &str| Field::new(n, DataType::Int64, true);
    let list = |n: &str| {
        Field::new(
            n,
            DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
            true,
        )
    };
    let map = |n: &str| {
        let entries = Field::new(
            "key_value",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Utf8, true),
            ])),
            false,
        );
        Field::new(n, DataType::Map(Arc::new(entries), false), true)
    };
    let strukt = |n: &str, fields: Vec<Field>| Field::new(n, DataType::Struct(fields.into()), true);
    Schema::new(vec![
        strukt(
            "txn",
            vec![s("appId"), i64f("version"), i64f("lastUpdated")],
        ),
        strukt(
            "add",
            vec![
                s("path"),
                map("partitionValues"),
                i64f("size"),
                i64f("modificationTime"),
                Field::new("dataChange", DataType::Boolean, true),
                s("stats"),
            ],
        ),
        strukt(
            "metaData",
            vec![
                s("id"),
                s("name"),
                strukt("format", vec![s("provider"), map("options")]),
                s("schemaString"),
                list("partitionColumns"),
                map("configuration"),
                i64f("createdTime"),
            ],
        ),
        strukt(
            "protocol",
            vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                list("readerFeatures"),
                list("writerFeatures"),
            ],
        ),
    ])
}
