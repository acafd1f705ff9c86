//! The memory a `logbook sql` query may hold before its sorts, aggregates
//! and joins spill to disk, or fail saying so.
//!
//! Without a pool DataFusion's operators never spill: a query past the
//! machine's memory is killed by the kernel, with nothing said. The default
//! is DuckDB's: 80% of the machine's memory, the smaller of its physical
//! memory and its own cgroup v2 group's limit (a container's; a limit set
//! only on a parent group, or under cgroup v1, is not seen).
//! `--memory-limit` sets another. A join's build side cannot spill: past
//! the pool it fails saying so.

use logbook_datafusion::datafusion::prelude::SessionContext;

use crate::commands::CliError;

/// The share of the machine's memory a query may hold by default.
const DEFAULT_SHARE: f64 = 0.8;

/// 80% of the machine's memory; `None` where it cannot be read (then no
/// pool is set, as before).
pub fn default_limit() -> Option<usize> {
    let machine = [physical_memory(), cgroup_limit()]
        .into_iter()
        .flatten()
        .min()?;
    Some((machine as f64 * DEFAULT_SHARE) as usize)
}

/// Set `ctx`'s memory pool to `bytes` (DataFusion's own
/// `datafusion.runtime.memory_limit`, which `SET` in a query can change).
pub async fn apply(ctx: &SessionContext, bytes: usize) -> Result<(), CliError> {
    let kib = bytes.div_ceil(1024).max(1);
    let set = format!("SET datafusion.runtime.memory_limit = '{kib}K'");
    ctx.sql(&set)
        .await
        .map_err(|e| CliError::Input(format!("--memory-limit: {e}")))?;
    Ok(())
}

#[cfg(unix)]
fn physical_memory() -> Option<u64> {
    // SAFETY: sysconf reads a constant of the system; no memory is shared.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages > 0 && page > 0).then(|| pages as u64 * page as u64)
}

#[cfg(not(unix))]
fn physical_memory() -> Option<u64> {
    None
}

/// cgroup v2's `memory.max` for this process's group ("max": none).
fn cgroup_limit() -> Option<u64> {
    let group = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = group.lines().find_map(|l| l.strip_prefix("0::"))?;
    let max = std::fs::read_to_string(format!("/sys/fs/cgroup{path}/memory.max")).ok()?;
    max.trim().parse().ok()
}
