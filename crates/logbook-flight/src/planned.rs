//! Plans kept between a statement's `GetFlightInfo` and its `DoGet`.
//!
//! Path: `GetFlightInfo` opens the tables, parses and plans the SQL (it
//! needs the result's schema), keeps the plan here under a fresh id and
//! puts the id in the ticket beside the SQL, the settings and the version
//! of every table. `DoGet` takes the plan back and runs it: the statement
//! is planned once, and the fetch reads exactly the snapshots described,
//! whatever commits, expiries or schema changes landed in between.
//!
//! Lifecycle: a plan is taken once. A second fetch of the same ticket, a
//! plan evicted (the oldest goes past the capacity) or expired (older than
//! [`PLAN_TTL`]), or a ticket from before a restart is planned again at the
//! ticket's versions; a version expired since is then refused, never
//! answered from another version. So the cache is only ever a saving.
//!
//! Why bounded in time: a kept plan holds its snapshots, and vacuum deletes
//! a superseded file after its retention (an hour at the least). A plan
//! kept for minutes cannot outlive the files it reads.
//!
//! Alternatives: sending the plan itself in the ticket (DataFusion's
//! protobuf form) would survive restarts, but needs the table providers
//! serialisable and lets a client hand the server a plan it did not make;
//! keeping every plan until its client closes the session leaks plans of
//! clients that never fetch.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use datafusion::dataframe::DataFrame;
use logbook_core::clock::IdGenerator;
use logbook_datafusion::datafusion;

/// How long a plan waits for its fetch. Clients fetch right after
/// `GetFlightInfo`; a later fetch plans again.
pub const PLAN_TTL: Duration = Duration::from_secs(300);

/// The plans waiting for their fetch.
#[derive(Debug)]
pub struct PlannedStatements {
    ids: Arc<dyn IdGenerator>,
    capacity: usize,
    ttl: Duration,
    inner: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    plans: HashMap<String, (DataFrame, Instant)>,
    /// Ids in the order they were kept (ids already taken are skipped).
    order: VecDeque<String>,
}

impl PlannedStatements {
    /// At most `capacity` plans (0 keeps none), each for at most `ttl`.
    pub fn new(ids: Arc<dyn IdGenerator>, capacity: usize, ttl: Duration) -> Self {
        Self {
            ids,
            capacity,
            ttl,
            inner: Mutex::new(Waiting::default()),
        }
    }

    /// Keep `plan` for its fetch; the id to put in the ticket, or `None`
    /// when this server keeps no plans.
    pub fn keep(&self, plan: DataFrame) -> Option<String> {
        if self.capacity == 0 {
            return None;
        }
        let id = self.ids.next_id().simple().to_string();
        let mut w = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        w.drop_expired(now, self.ttl);
        while w.plans.len() >= self.capacity {
            let Some(oldest) = w.order.pop_front() else {
                break;
            };
            w.plans.remove(&oldest);
        }
        w.plans.insert(id.clone(), (plan, now));
        w.order.push_back(id.clone());
        Some(id)
    }

    /// The plan kept under `id`, once; `None` if it was taken, evicted or
    /// has expired (the caller plans again).
    pub fn take(&self, id: &str) -> Option<DataFrame> {
        let mut w = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (plan, kept) = w.plans.remove(id)?;
        (kept.elapsed() <= self.ttl).then_some(plan)
    }

    /// Plans waiting now.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .plans
            .len()
    }

    /// Whether no plan is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Waiting {
    /// Forget plans older than `ttl`, and ids already taken, from the front.
    fn drop_expired(&mut self, now: Instant, ttl: Duration) {
        while let Some(id) = self.order.front() {
            match self.plans.get(id) {
                Some((_, kept)) if now.duration_since(*kept) <= ttl => break,
                Some(_) => {
                    self.plans.remove(id);
                }
                None => {}
            }
            self.order.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use datafusion::prelude::SessionContext;
    use logbook_core::clock::SequentialIds;

    async fn df(n: i64) -> DataFrame {
        SessionContext::new()
            .sql(&format!("SELECT {n} AS n"))
            .await
            .unwrap()
    }

    async fn value(df: DataFrame) -> i64 {
        let batches = df.collect().await.unwrap();
        batches[0].column(0).as_primitive::<Int64Type>().value(0)
    }

    #[tokio::test]
    async fn a_plan_is_taken_once_and_the_oldest_goes_past_the_capacity() {
        let p = PlannedStatements::new(Arc::new(SequentialIds::default()), 2, PLAN_TTL);
        let one = p.keep(df(1).await).unwrap();
        let two = p.keep(df(2).await).unwrap();
        assert_eq!(value(p.take(&two).unwrap()).await, 2);
        assert!(p.take(&two).is_none(), "taken once");
        let three = p.keep(df(3).await).unwrap();
        let four = p.keep(df(4).await).unwrap();
        assert!(p.take(&one).is_none(), "the oldest was evicted");
        assert_eq!(p.len(), 2);
        assert_eq!(value(p.take(&three).unwrap()).await, 3);
        assert_eq!(value(p.take(&four).unwrap()).await, 4);
        assert!(p.is_empty());
    }

    #[tokio::test]
    async fn an_expired_plan_is_not_run_and_no_capacity_keeps_nothing() {
        let p = PlannedStatements::new(Arc::new(SequentialIds::default()), 8, Duration::ZERO);
        let id = p.keep(df(1).await).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        assert!(p.take(&id).is_none());
        p.keep(df(2).await).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        p.keep(df(3).await).unwrap();
        assert_eq!(p.len(), 1, "expired plans go when another is kept");

        let none = PlannedStatements::new(Arc::new(SequentialIds::default()), 0, PLAN_TTL);
        assert!(none.keep(df(1).await).is_none());
    }
}
