//! Before building on a head that is an undecided publish part: wait for
//! the decision, then abort the publish. A version built on an undecided
//! part would hold it or not whatever the warehouse later decides.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::format::TxnState;
use crate::handle::TableInner;

use super::{Decision, Outcome};

/// Make sure version `head` of `table` is decided: return at once when it
/// is not a publish part or is decided; otherwise wait up to the table's
/// `publish_wait_ms` (on this process's monotonic clock, from now) for
/// the publisher's decision, then decide the publish aborted. `own_stage`:
/// a part of a publish of this stage is a dead earlier attempt of the
/// caller's own publish, aborted without waiting.
pub(crate) async fn settle(table: &TableInner, head: u64, own_stage: Option<&str>) -> Result<()> {
    let entry = table.read_entry(head).await?;
    let Some(part) = entry.txn else {
        return Ok(());
    };
    if part.state != TxnState::Pending {
        return Ok(());
    }
    let publishes = table.publishes.as_ref().ok_or_else(|| Error::NoWarehouse {
        table: table.name.clone(),
        version: head,
        seq: part.seq,
    })?;
    let wait = match own_stage == Some(part.stage.as_str()) {
        true => Duration::ZERO,
        false => Duration::from_millis(table.options.publish_wait_ms),
    };
    let started = Instant::now();
    let mut pause = Duration::from_millis(10);
    while started.elapsed() < wait {
        if publishes.state(&part).await? != TxnState::Pending {
            return Ok(());
        }
        tokio::time::sleep(pause.min(wait.saturating_sub(started.elapsed()))).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    tracing::warn!(
        table = %table.name, version = head, seq = part.seq, stage = %part.stage,
        "a multi-table publish stayed undecided; aborting it"
    );
    let aborted = Decision {
        seq: part.seq,
        id: part.id,
        outcome: Outcome::Aborted,
        stage: part.stage.clone(),
        tables: Default::default(),
        timestamp_ms: table.options.clock.now_millis(),
    };
    // Whichever decision holds the number now, the part is decided.
    publishes.decide(&aborted).await?;
    Ok(())
}
