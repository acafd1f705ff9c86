//! Recording what a run's queries read.
//!
//! Every scan a run plans records, per table version: for date-partitioned
//! inputs the dates its filters asked for and the partitions it found (with
//! each partition's own version); for dimensions the date the rows were
//! resolved at and the version that last changed the dimension's rows.
//! Two things are made of it: the lineage stored with the commit, from
//! which `status` judges staleness, and the fingerprint of the data read,
//! from which a derived run id is made. The fingerprint uses partition and
//! dimension-data versions, not table versions, so a commit to another
//! date, a compaction or a property change does not make a re-run commit
//! the same rows again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use datafusion::common::config::ConfigOptions;
use datafusion::common::Result;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::AnalyzerRule;

use chrono::NaiveDate;
use logbook_core::{DateSpan, InputRead};

/// Collects every table version a run's scans read, and the plans it ran.
#[derive(Debug, Default)]
pub struct Lineage {
    reads: Mutex<BTreeMap<(String, u64), Entry>>,
    plans: Mutex<BTreeSet<String>>,
}

/// One scan's read of a table version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// A date-partitioned table: what the filters allowed, and the
    /// partitions found there with each one's version.
    Partitions {
        asked: DateSpan,
        found: Vec<(NaiveDate, u64)>,
        /// Read inside a stage: its name, and the dates found in it with
        /// the staged run that wrote each.
        staged: Option<(String, Vec<(NaiveDate, String)>)>,
    },
    /// A dimension: rows resolved at `at` (`None`: current rows or the
    /// whole history), as last changed by `data_version`.
    Dimension {
        at: Option<NaiveDate>,
        data_version: Option<u64>,
    },
}

#[derive(Debug, Default)]
struct Entry {
    found: Option<BTreeMap<NaiveDate, u64>>,
    asked: Vec<DateSpan>,
    dimension: bool,
    as_of: BTreeSet<NaiveDate>,
    undated: bool,
    data_version: Option<u64>,
    stage: Option<String>,
    staged: BTreeMap<NaiveDate, String>,
}

impl Lineage {
    /// Record a scan of `table` at `version`.
    pub fn record(&self, table: &str, version: u64, read: Read) {
        let mut reads = self.reads.lock().expect("lineage lock");
        let e = reads.entry((table.to_string(), version)).or_default();
        match read {
            Read::Partitions {
                asked,
                found,
                staged,
            } => {
                e.found.get_or_insert_with(Default::default).extend(found);
                if let Some((stage, dates)) = staged {
                    e.stage = Some(stage);
                    e.staged.extend(dates);
                }
                if !e.asked.contains(&asked) {
                    e.asked.push(asked);
                }
            }
            Read::Dimension { at, data_version } => {
                e.dimension = true;
                e.data_version = data_version;
                match at {
                    Some(d) => {
                        e.as_of.insert(d);
                    }
                    None => e.undated = true,
                }
            }
        }
    }

    /// Everything read so far, by table then version.
    pub fn inputs(&self) -> Vec<InputRead> {
        self.reads
            .lock()
            .expect("lineage lock")
            .iter()
            .map(|((table, version), e)| InputRead {
                table: table.clone(),
                version: *version,
                dates: e.found.as_ref().map(|d| d.keys().copied().collect()),
                asked: e.asked.clone(),
                dimension: e.dimension,
                as_of: e.as_of.iter().copied().collect(),
                undated: e.undated,
                stage: e.stage.clone(),
                staged: e.staged.clone(),
            })
            .collect()
    }

    /// Record a logical plan the run executed (its indented text).
    pub fn record_plan(&self, plan: &LogicalPlan) {
        let text = plan.display_indent().to_string();
        self.plans.lock().expect("lineage lock").insert(text);
    }

    /// The plans executed so far, sorted: what a run built with the
    /// DataFrame API (no query text) is identified by.
    pub fn plans(&self) -> Vec<String> {
        self.plans
            .lock()
            .expect("lineage lock")
            .iter()
            .cloned()
            .collect()
    }

    /// A canonical description of the data read: each partition with its
    /// own version, each dimension with the version that last changed its
    /// rows and the dates it was resolved at. Equal texts mean the same rows
    /// were read.
    pub fn data_read(&self) -> String {
        let reads = self.reads.lock().expect("lineage lock");
        let mut partitions: BTreeMap<&str, BTreeMap<NaiveDate, String>> = BTreeMap::new();
        let mut dimensions: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for ((table, _), e) in reads.iter() {
            if let Some(found) = &e.found {
                // A staged date has no version of its own yet: its run
                // names its rows.
                let named = found.iter().map(|(d, v)| match e.staged.get(d) {
                    Some(run) => (*d, format!("staged:{run}")),
                    None => (*d, v.to_string()),
                });
                partitions.entry(table).or_default().extend(named);
            }
            if e.dimension {
                let set = dimensions.entry(table).or_default();
                let data = e.data_version.map_or("none".to_string(), |v| v.to_string());
                for d in &e.as_of {
                    set.insert(format!("{data}@{d}"));
                }
                if e.undated {
                    set.insert(format!("{data}@all"));
                }
            }
        }
        let mut text = String::new();
        for (table, found) in partitions {
            text.push_str(&format!("partitions {table}:"));
            for (d, v) in found {
                text.push_str(&format!(" {d}={v}"));
            }
            text.push('\n');
        }
        for (table, reads) in dimensions {
            let reads: Vec<String> = reads.into_iter().collect();
            text.push_str(&format!("dimension {table}: {}\n", reads.join(" ")));
        }
        text
    }
}

/// Records every plan a run's session executes into its lineage (an
/// analyzer rule: it sees plans from SQL and from the DataFrame API alike).
#[derive(Debug)]
pub(crate) struct PlanRecorder(pub Arc<Lineage>);

impl AnalyzerRule for PlanRecorder {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        self.0.record_plan(&plan);
        Ok(plan)
    }

    fn name(&self) -> &str {
        "logbook_plan_recorder"
    }
}
