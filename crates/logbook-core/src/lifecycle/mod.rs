//! Partition lifecycle: the state of every scheduled date, computed from the
//! log and the lineage every commit records (nothing extra is kept in sync).
//!
//! - [`state`]: the states and stale reasons, and [`status`] which computes them;
//! - [`check`](mod@check): the integrity check that finds corrupt partitions;
//! - [`plan`](mod@plan): which dates a backfill must recompute, in which order.

pub mod check;
pub mod plan;
pub mod state;

pub use check::{check, CheckDepth, CheckReport, Problem, ProblemKind};
pub use plan::{plan, Plan, PlanStep, Selection};
pub use state::{
    status, status_asked, status_in, DateStatus, InputChange, PartitionState, RunningWrite,
    StaleReason, TableStatus,
};
