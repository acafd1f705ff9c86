//! After a publish is decided: a plain entry on each table's part, so that
//! whoever reads the table's head next reads no decision.
//!
//! A part resolves through its publish's decision, one `GET` more for
//! every process that opens the table while the part is its head (a
//! handle keeps decisions it read, a fresh process has none). The seal is
//! version `part + 1`: the part's snapshot as a plain entry (its manifest,
//! no dates, the publish's mark, so a reader at an earlier warehouse point
//! still steps back over the part). Best effort and put-if-absent: if any
//! commit took that version first, it is plain or decided already, and
//! nothing is sealed.

use crate::format::{LogEntry, Operation, TxnState};
use crate::handle::TableInner;
use crate::log::Created;

/// Seal `table`'s part at `version` (decided committed), if it is still
/// the head: the create at `version + 1` finds out (no `HEAD` first: the
/// publisher waits for its seals).
pub(crate) async fn seal(table: &TableInner, version: u64) {
    if let Err(e) = try_seal(table, version).await {
        tracing::debug!(table = %table.name, version, error = %e, "publish decided; sealing its part failed (readers read the decision)");
    }
}

async fn try_seal(table: &TableInner, version: u64) -> crate::error::Result<()> {
    let part = table.read_entry(version).await?;
    if part
        .txn
        .as_ref()
        .is_none_or(|t| t.state != TxnState::Committed)
    {
        return Ok(());
    }
    let timestamp_ms = table.options.clock.now_millis().max(part.timestamp_ms + 1);
    let commit_id = table.options.ids.next_id();
    let sealed = LogEntry {
        publish: part.publish,
        ..LogEntry::unchanged(
            version + 1,
            commit_id,
            timestamp_ms,
            Operation::Seal,
            part.manifest.clone(),
        )
    };
    let bytes = table.encode(&sealed)?;
    let ours = |found: &[u8]| {
        let found: LogEntry =
            table.decode(&crate::format::layout::log_entry(version + 1), found)?;
        Ok(found.commit_id == commit_id)
    };
    if let Created::Ours = table.log.create(version + 1, bytes, ours).await? {
        table.saw(version + 1);
        table.write_hint(version + 1).await;
    }
    Ok(())
}
