//! Integration tests, in one binary so heavy dependencies link once.

mod cluster_codec;
mod commit_cost;
mod commit_retry;
mod common;
mod concurrency;
mod conformance;
mod counting_store;
mod crash;
mod dimension;
mod fault_store;
mod flight;
mod format;
mod heavy_steps;
mod iceberg_mirror;
mod lifecycle;
mod local_fs;
mod maintenance;
mod metadata_fuzz;
mod mirror;
mod multi_publish;
mod point_in_time;
mod pruning;
mod query;
mod racing_publishers;
mod read_cost;
mod replace;
mod run_budget;
mod run_identity;
mod schema_evolution;
mod stage;
mod staleness;
#[path = "../../benches/support/synthetic.rs"]
mod synthetic;
mod time_travel;
mod vacuum_guard;
mod validation;
