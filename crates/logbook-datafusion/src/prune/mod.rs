//! Pruning: what a scan need not read, at three levels, tested with
//! DataFusion `PruningPredicate`s built once from the scan's filters (one
//! for their conjunction, one per column for pages).
//!
//! 1. `dates`: the partition column's filters choose partitions from
//!    the manifest (also recorded as a run's lineage).
//! 2. `files`: the manifest's per-file column bounds, at planning; a file
//!    that cannot match is never opened.
//! 3. `inside`: once a file's footer is read, its row groups by their
//!    bounds and bloom filters, and pages by the page index. Core's reader
//!    asks through its `FilePruner` hook and never fetches what is skipped.
//!
//! DataFusion still applies every filter to the rows read: pruning only
//! skips data that cannot match. Unknown bounds (older files, a bound that
//! will not cast) keep the data.

mod dates;
mod files;
mod inside;
mod predicate;

pub use dates::DateBounds;
pub(crate) use files::prune_files;
pub(crate) use inside::InsideFiles;
pub(crate) use predicate::ScanPredicate;
