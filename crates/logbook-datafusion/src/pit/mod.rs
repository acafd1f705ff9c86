//! Point-in-time joins: facts joined to the dimension interval valid at
//! each fact's date, by binary search instead of a hash-join probe.
//!
//! `o.customer = c.customer AND o.date >= c.valid_from AND (c.valid_to IS
//! NULL OR o.date < c.valid_to)` plans, in DataFusion, as a hash join on the
//! key whose filter then discards every interval but one: each fact row
//! meets all of its key's versions. [`PointInTimeJoinRule`] recognises that
//! filter ([`pattern`]) and replaces the hash join with a
//! [`PointInTimeJoinExec`], which keeps each key's intervals sorted
//! ([`index`]) and finds the valid one directly. The result is the same
//! rows, for any table with that shape, overlapping intervals included.
//!
//! - [`pattern`]: which join filters are validity ranges.
//! - [`rule`]: the physical optimizer rule, and where it runs.
//! - [`exec`]: the plan node; [`stream`]: building once, probing per batch.
//! - [`index`]: keys to sorted intervals; [`keys`]: key encoding;
//!   [`slots`]: the hash table (open addressing) with prefetching.

pub mod exec;
pub mod index;
pub mod keys;
pub mod pattern;
pub mod rule;
pub mod slots;
pub mod stream;

pub use exec::{JoinSpec, PointInTimeJoinExec};
pub use rule::{with_point_in_time_join, PointInTimeJoinRule};
