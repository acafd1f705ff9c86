//! The messages logbook's plan nodes travel in (protobuf, through prost's
//! derive: no build script, no `.proto` file to keep in step).
//!
//! Expressions and schemas use DataFusion's own protobuf messages; logbook's
//! table schema and file lists use the JSON logbook's manifests are written
//! in, so they decode with the same code and the same checks.

use datafusion_proto::protobuf::{PhysicalExprNode, Schema};

/// One logbook node: exactly one field is set.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Node {
    #[prost(message, optional, tag = "1")]
    pub scan: Option<Scan>,
    #[prost(message, optional, tag = "2")]
    pub join: Option<Join>,
}

/// A `LogbookScanExec`: the files of one pinned table version.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Scan {
    #[prost(string, tag = "1")]
    pub table: String,
    #[prost(uint64, tag = "2")]
    pub version: u64,
    /// The `TableSchema` the query was planned with (JSON).
    #[prost(bytes = "vec", tag = "3")]
    pub table_schema: Vec<u8>,
    /// One group per output partition: each a JSON list of `DataFile`s.
    #[prost(bytes = "vec", repeated, tag = "4")]
    pub groups: Vec<Vec<u8>>,
    /// The schema the scan outputs.
    #[prost(message, optional, tag = "5")]
    pub schema: Option<Schema>,
    #[prost(message, optional, tag = "6")]
    pub validity: Option<Validity>,
    #[prost(string, tag = "7")]
    pub label: String,
    /// Planned filters over the table's columns (view types).
    #[prost(message, repeated, tag = "8")]
    pub filters: Vec<PhysicalExprNode>,
    /// Rows each partition may stop after (a limit the scheduler pushed
    /// into the scan).
    #[prost(uint64, optional, tag = "9")]
    pub limit: Option<u64>,
}

/// Which rows of a dimension a scan returns.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Validity {
    /// Rows still valid; otherwise rows valid on `day`.
    #[prost(bool, tag = "1")]
    pub current: bool,
    /// Days since the epoch.
    #[prost(int32, tag = "2")]
    pub day: i32,
}

/// A `PointInTimeJoinExec` (its two inputs travel as the node's children).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Join {
    /// Left keys, over the left input's schema.
    #[prost(message, repeated, tag = "1")]
    pub left_keys: Vec<PhysicalExprNode>,
    /// Right keys, over the right input's schema (as many as left keys).
    #[prost(message, repeated, tag = "2")]
    pub right_keys: Vec<PhysicalExprNode>,
    /// Whether the interval input is the right one (else the left).
    #[prost(bool, tag = "3")]
    pub interval_right: bool,
    #[prost(uint64, tag = "4")]
    pub point: u64,
    #[prost(uint64, tag = "5")]
    pub from: u64,
    #[prost(uint64, tag = "6")]
    pub to: u64,
    #[prost(bool, tag = "7")]
    pub open_end: bool,
    /// `inner`, `left` or `right` (the types a point-in-time join keeps).
    #[prost(string, tag = "8")]
    pub join_type: String,
    #[prost(bool, tag = "9")]
    pub nulls_equal: bool,
    #[prost(bool, tag = "10")]
    pub projected: bool,
    #[prost(uint64, repeated, tag = "11")]
    pub projection: Vec<u64>,
}
