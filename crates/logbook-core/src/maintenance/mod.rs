//! Maintenance: compaction, snapshot expiry and vacuum, each safe beside
//! running writers, backfills and stages, each recorded in the log.

pub mod compact;
pub mod expire;
mod retained;
pub mod vacuum;

pub use compact::{
    compact, plan_compaction, CompactOptions, CompactPlan, CompactProgress, CompactReport,
};
pub use expire::{expire, ExpireReport, Keep};
pub use vacuum::{vacuum, VacuumOptions, VacuumReport, MIN_RETENTION_MS};
