//! Recording what a run's queries read.

use std::collections::BTreeMap;
use std::sync::Mutex;

use chrono::NaiveDate;
use logbook_core::InputRead;

/// Collects every table version a run's scans read, with the dates read
/// after pruning for date-partitioned inputs.
#[derive(Debug, Default)]
pub struct Lineage {
    reads: Mutex<BTreeMap<(String, u64), Entry>>,
}

#[derive(Debug, Default)]
struct Entry {
    dates: Option<std::collections::BTreeSet<NaiveDate>>,
    dimension: bool,
}

impl Lineage {
    /// Record a scan of `table` at `version` (`dates: None` for dimensions).
    pub fn record(&self, table: &str, version: u64, dates: Option<Vec<NaiveDate>>) {
        let mut reads = self.reads.lock().expect("lineage lock");
        let e = reads.entry((table.to_string(), version)).or_default();
        match dates {
            Some(d) => e.dates.get_or_insert_with(Default::default).extend(d),
            None => e.dimension = true,
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
                dates: e.dates.as_ref().map(|d| d.iter().copied().collect()),
                dimension: e.dimension,
            })
            .collect()
    }
}
