//! Snapshot expiry: move the oldest version time travel may read.
//!
//! The log itself stays whole and readable (entries are small, and opening
//! a table never replays it, so no checkpoint is needed to keep opening
//! fast); what expiry changes is which snapshots may be read, and so which
//! files vacuum may delete.

use serde::Serialize;

use crate::commit::{commit, Change, PendingCommit};
use crate::error::{Error, Result};
use crate::format::RunInfo;
use crate::table::Table;

/// Which snapshots to keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// The last N versions (at least 1: the latest is always kept).
    Last(u64),
    /// Versions committed at or after this time (ms since the epoch), plus
    /// the one that was current at that time.
    Since(i64),
}

/// What an expiry did.
#[derive(Debug, Clone, Serialize)]
pub struct ExpireReport {
    pub table: String,
    pub previous_oldest: u64,
    pub oldest: u64,
    /// The commit recording the expiry (`None` when nothing changed).
    pub version: Option<u64>,
}

/// Expire the snapshots `keep` does not keep.
///
/// ```
/// # #[tokio::main] async fn main() -> logbook_core::Result<()> {
/// use logbook_core::maintenance::{expire, Keep};
/// use logbook_core::{Warehouse, schema::TableSchema};
/// let wh = Warehouse::open("memory://")?;
/// let t = wh.create_table("t", TableSchema::parse_spec("t", "date:date,n:int64", "date")?).await?;
/// let report = expire(&t, Keep::Last(1)).await?;
/// assert_eq!(report.oldest, 0);
/// # Ok(()) }
/// ```
pub async fn expire(table: &Table, keep: Keep) -> Result<ExpireReport> {
    let latest = table.latest().await?;
    let previous_oldest = latest.root().retained_from;
    let wanted = match keep {
        Keep::Last(0) => {
            return Err(Error::InvalidInput {
                table: table.name().to_string(),
                reason: "--keep-last must be at least 1 (the latest version is always kept)".into(),
            })
        }
        Keep::Last(n) => (latest.version() + 1).saturating_sub(n),
        Keep::Since(ms) => match table.as_of_timestamp(ms).await {
            Ok(s) => s.version(),
            Err(e) if e.kind() == crate::ErrorKind::NotFound => previous_oldest,
            Err(e) => return Err(e),
        },
    };
    let oldest = wanted.min(latest.version()).max(previous_oldest);
    if oldest == previous_oldest {
        return Ok(ExpireReport {
            table: table.name().to_string(),
            previous_oldest,
            oldest,
            version: None,
        });
    }
    let run = RunInfo::new(format!("expire-{}", table.inner.options.ids.next_id()));
    let pending = PendingCommit::new(latest.version(), run, Change::Retain { from: oldest });
    let info = commit(&table.inner, pending).await.map_err(|f| f.error)?;
    Ok(ExpireReport {
        table: table.name().to_string(),
        previous_oldest,
        oldest,
        version: Some(info.version),
    })
}
