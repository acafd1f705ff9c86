//! Plans kept between a statement's `GetFlightInfo` and its `DoGet`.
//!
//! Path: `GetFlightInfo` opens the tables, parses and plans the SQL (it
//! needs the result's schema), keeps the plan here under a fresh id and
//! puts the id in the ticket beside the SQL, the settings and the version
//! of every table. `DoGet` runs a copy of the plan, and forgets it once the
//! copy has started streaming: the tables are opened and the SQL parsed
//! and planned once (the fetch still optimises the plan and makes the
//! physical one, as any execution does), and the fetch reads exactly the
//! snapshots described, whatever commits, expiries or schema changes
//! landed in between. A plan answers only the ticket it was kept for (the
//! ticket's statement is kept with it and compared).
//!
//! Lifecycle: a fetch that finds no plan (a second fetch of the ticket, a
//! plan evicted past the capacity or older than [`PLAN_TTL`], a restart)
//! plans again at the ticket's versions: the same rows while those versions
//! are retained, and otherwise a refusal, never rows of another version;
//! a prepared statement bound to other parameters since is refused the
//! same way (the ticket holds a digest of those it was described with),
//! and one closed since is refused whether or not its plan is kept. A
//! fetch that fails before streaming leaves the plan for its retry.
//!
//! Why bounded in time: a kept plan holds its snapshots, and vacuum keeps a
//! superseded file for its retention (an hour at the least unless forced).
//! A plan waits minutes for its fetch; the fetch itself then runs as long
//! as any query, with the same exposure to a vacuum.
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

#[derive(Debug)]
struct Kept {
    plan: DataFrame,
    /// The statement of the ticket it was kept for.
    statement: Vec<u8>,
    at: Instant,
}

#[derive(Debug, Default)]
struct Waiting {
    plans: HashMap<String, Kept>,
    /// The ids of `plans`, oldest first.
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

    fn lock(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `plan` for the fetch of the ticket describing `statement`; the
    /// id to put in the ticket, or `None` when this server keeps no plans.
    pub fn keep(&self, plan: DataFrame, statement: Vec<u8>) -> Option<String> {
        if self.capacity == 0 {
            return None;
        }
        let id = self.ids.next_id().simple().to_string();
        let mut w = self.lock();
        w.drop_expired(self.ttl);
        while w.plans.len() >= self.capacity {
            let Some(oldest) = w.order.pop_front() else {
                break;
            };
            w.plans.remove(&oldest);
        }
        let at = Instant::now();
        let kept = Kept {
            plan,
            statement,
            at,
        };
        w.plans.insert(id.clone(), kept);
        w.order.push_back(id.clone());
        Some(id)
    }

    /// A copy of the plan kept under `id` for `statement`; `None` if there
    /// is none (forgotten, evicted, expired, or kept for another ticket).
    pub fn get(&self, id: &str, statement: &[u8]) -> Option<DataFrame> {
        let mut w = self.lock();
        w.drop_expired(self.ttl);
        let kept = w.plans.get(id)?;
        (kept.statement == statement).then(|| kept.plan.clone())
    }

    /// Forget the plan kept under `id` (its fetch is streaming).
    pub fn forget(&self, id: &str) {
        let mut w = self.lock();
        if w.plans.remove(id).is_some() {
            w.order.retain(|kept| kept != id);
        }
    }

    /// Plans waiting now.
    pub fn len(&self) -> usize {
        self.lock().plans.len()
    }

    /// Whether no plan is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Waiting {
    /// Forget the plans older than `ttl` (they are the oldest).
    fn drop_expired(&mut self, ttl: Duration) {
        while let Some(id) = self.order.front() {
            match self.plans.get(id) {
                Some(kept) if kept.at.elapsed() <= ttl => break,
                _ => {
                    let id = self.order.pop_front().expect("a front");
                    self.plans.remove(&id);
                }
            }
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
    async fn a_plan_answers_its_own_ticket_until_forgotten_and_the_oldest_goes() {
        let p = PlannedStatements::new(Arc::new(SequentialIds::default()), 2, PLAN_TTL);
        let one = p.keep(df(1).await, b"one".to_vec()).unwrap();
        let two = p.keep(df(2).await, b"two".to_vec()).unwrap();
        assert!(p.get(&two, b"one").is_none(), "another ticket's plan");
        assert_eq!(value(p.get(&two, b"two").unwrap()).await, 2);
        assert_eq!(
            value(p.get(&two, b"two").unwrap()).await,
            2,
            "until forgotten"
        );
        p.forget(&two);
        assert!(p.get(&two, b"two").is_none());
        let three = p.keep(df(3).await, b"three".to_vec()).unwrap();
        let four = p.keep(df(4).await, b"four".to_vec()).unwrap();
        assert!(p.get(&one, b"one").is_none(), "the oldest was evicted");
        assert_eq!(p.len(), 2);
        assert_eq!(value(p.get(&three, b"three").unwrap()).await, 3);
        p.forget(&three);
        p.forget(&four);
        assert!(p.is_empty());
        assert!(p.lock().order.is_empty(), "no id outlives its plan");
    }

    #[tokio::test]
    async fn an_expired_plan_is_not_run_and_no_capacity_keeps_nothing() {
        let p = PlannedStatements::new(Arc::new(SequentialIds::default()), 8, Duration::ZERO);
        let id = p.keep(df(1).await, vec![]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        assert!(p.get(&id, &[]).is_none());
        assert!(p.is_empty(), "an expired plan goes when looked for");
        p.keep(df(2).await, vec![]).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        p.keep(df(3).await, vec![]).unwrap();
        assert_eq!(p.len(), 1, "expired plans go when another is kept");

        let none = PlannedStatements::new(Arc::new(SequentialIds::default()), 0, PLAN_TTL);
        assert!(none.keep(df(1).await, vec![]).is_none());
    }
}
