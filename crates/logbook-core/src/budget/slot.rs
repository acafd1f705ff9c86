//! Backfill slots: leases created with put-if-absent, one generation at a
//! time (the lifecycle and guarantee are the `budget` module's).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::format::layout;

use super::keeper::Keeper;
use super::{encode, Objects, Observer};

impl SlotRecord {
    /// What a claimant asks to hold (its beat and start are set on claim).
    pub(crate) fn request(
        holder: String,
        table: Option<String>,
        date: Option<NaiveDate>,
        what: String,
        lease_ms: u64,
    ) -> Self {
        Self {
            holder,
            table,
            date,
            what,
            beat: 0,
            lease_ms,
            started_ms: 0,
            released: false,
        }
    }
}

/// Which slots: backfill runs' (`max-backfill-runs`, `max-runs`) or heavy
/// steps' (`max-heavy-steps`). Both work alike, each under its own prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pool {
    Runs,
    Heavy,
}

impl Pool {
    pub(crate) fn dir(self) -> &'static str {
        match self {
            Pool::Runs => layout::SLOTS_DIR,
            Pool::Heavy => layout::HEAVY_DIR,
        }
    }

    /// Generation `gen` of slot `k`.
    pub(crate) fn slot(self, k: u32, gen: u64) -> String {
        format!("{}/{k:04}/{gen:020}.json", self.dir())
    }
}

/// What a slot's generation says: who holds it, or that it was released.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotRecord {
    /// The holder's own id (a lease, not a run: one runner may hold several).
    pub holder: String,
    /// The table and date the run is for, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<NaiveDate>,
    /// Who holds it, for people: `backfill of revenue (pid 4242)`.
    pub what: String,
    /// Raised by every renewal: observers time the lease from its last change.
    pub beat: u64,
    pub lease_ms: u64,
    /// When the holder claimed it (its clock; display only).
    pub started_ms: i64,
    /// The holder gave the slot back.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
}

/// Which slot generation a run holds: how `logbook backfill` hands its
/// slot to the command it launches (`LOGBOOK_SLOT=k/gen`), so the command
/// can check, before it commits, that the slot is still the runner's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotTicket {
    pub slot: u32,
    pub generation: u64,
}

impl std::fmt::Display for SlotTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.slot, self.generation)
    }
}

impl std::str::FromStr for SlotTicket {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let parsed = s
            .split_once('/')
            .and_then(|(k, g)| Some((k.parse().ok()?, g.parse().ok()?)));
        let (slot, generation) = parsed.ok_or_else(|| Error::InvalidInput {
            table: "(warehouse)".into(),
            reason: format!("slot ticket {s:?}: expected SLOT/GENERATION, two whole numbers"),
        })?;
        Ok(Self { slot, generation })
    }
}

/// Fail unless `ticket`'s slot is still at its generation (no successor:
/// not taken over, not released). `what` names the run, for the error.
pub async fn check_ticket(
    warehouse: &crate::Warehouse,
    ticket: SlotTicket,
    what: &str,
) -> Result<()> {
    let objects = Objects {
        location: warehouse.location().clone(),
    };
    holds(&objects, ticket, what).await
}

/// [`check_ticket`] for a writer of a table at `table` (its warehouse is
/// the location above it).
pub(crate) async fn ticket_holds(
    table: &crate::StorageLocation,
    ticket: SlotTicket,
    what: &str,
) -> Result<()> {
    let location = table.parent().ok_or_else(|| Error::InvalidInput {
        table: what.to_string(),
        reason: "a backfill slot belongs to a warehouse, and this table is at a store's root"
            .into(),
    })?;
    holds(&Objects { location }, ticket, what).await
}

async fn holds(objects: &Objects, ticket: SlotTicket, what: &str) -> Result<()> {
    match superseded(objects, Pool::Runs, ticket.slot, ticket.generation).await? {
        false => Ok(()),
        true => Err(Error::SlotLost {
            what: what.to_string(),
            slot: ticket.slot,
            generation: ticket.generation,
        }),
    }
}

/// Does slot `k` hold a generation after `generation`? One listing of the
/// slot: successors delete the generations before them, so looking for
/// `generation + 1` alone could miss a successor's successor.
async fn superseded(objects: &Objects, pool: Pool, k: u32, generation: u64) -> Result<bool> {
    let dir = format!("{}/{k:04}/", pool.dir());
    let listed = objects.list(&dir).await?;
    Ok(listed.iter().any(|path| {
        path.rsplit('/')
            .next()
            .and_then(|leaf| leaf.strip_suffix(".json"))
            .and_then(|g| g.parse::<u64>().ok())
            .is_some_and(|g| g > generation)
    }))
}

/// The generations of each slot of `pool`, oldest first, from one listing.
pub(crate) async fn heads(objects: &Objects, pool: Pool) -> Result<BTreeMap<u32, Vec<u64>>> {
    let mut slots: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for path in objects.list(pool.dir()).await? {
        let parsed = path
            .strip_prefix(pool.dir())
            .and_then(|rest| rest.strip_prefix('/'))
            .and_then(|rest| rest.strip_suffix(".json"))
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(k, g)| Some((k.parse::<u32>().ok()?, g.parse::<u64>().ok()?)));
        if let Some((k, gen)) = parsed {
            slots.entry(k).or_default().push(gen);
        }
    }
    for gens in slots.values_mut() {
        gens.sort_unstable();
    }
    Ok(slots)
}

/// Slot record `path`, if there. One that does not decode (written by
/// something else, or damaged) counts as held by an unknown holder, so it
/// expires like a dead holder's instead of stopping every claimant.
pub(crate) async fn read_record(objects: &Objects, path: &str) -> Result<Option<SlotRecord>> {
    let Some(bytes) = objects.get(path).await? else {
        return Ok(None);
    };
    Ok(Some(serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        tracing::warn!(path, error = %e, "an unreadable backfill slot record; it expires as a dead holder's would");
        SlotRecord {
            holder: "?".into(),
            table: None,
            date: None,
            what: format!("an unreadable slot record ({path})"),
            beat: bytes.len() as u64,
            lease_ms: super::RunBudget::default().lease_ms,
            started_ms: 0,
            released: false,
        }
    })))
}

/// What one look at the slots found.
pub(crate) enum Look {
    /// This claimant now holds a slot.
    Took(SlotLease),
    /// Every slot below the capacity is held, by these.
    Full(Vec<SlotRecord>),
}

/// Try once to take a slot for `request`, while fewer than `capacity` are
/// held: every slot counts, also one numbered at or above the capacity
/// (held before the budget shrank, or beside more production runs), and
/// the claim takes the lowest free number below it.
pub(crate) async fn try_claim(
    objects: &Objects,
    pool: Pool,
    capacity: u32,
    request: &SlotRecord,
    observer: &mut Observer,
    clock: &Arc<dyn Clock>,
) -> Result<Look> {
    let slots = heads(objects, pool).await?;
    let mut held = Vec::new();
    // Free slots below the capacity: (number, next generation).
    let mut free = Vec::new();
    for (&k, gens) in &slots {
        let Some(&gen) = gens.last() else { continue };
        let path = pool.slot(k, gen);
        let next = match read_record(objects, &path).await? {
            // Replaced meanwhile: the next look sees its successor.
            None => continue,
            Some(found) if found.released => gen + 1,
            Some(found) if observer.expired(&path, found.beat, found.lease_ms) => {
                tracing::warn!(slot = k, generation = gen, holder = %found.what, "a backfill slot's lease expired; taking it over");
                if k >= capacity {
                    // Above the budget: retire it, so it stops counting.
                    retire(objects, pool, k, gen, found).await?;
                    continue;
                }
                gen + 1
            }
            Some(found) => {
                held.push(found);
                continue;
            }
        };
        if k < capacity {
            free.push((k, next));
        }
    }
    if held.len() as u64 >= u64::from(capacity) {
        return Ok(Look::Full(held));
    }
    // A number never used is as good as any: the lowest one.
    if let Some(k) = (0..capacity).find(|k| !slots.contains_key(k)) {
        free.push((k, 0));
    }
    free.sort_unstable();
    for (k, next) in free {
        let now = clock.elapsed_millis();
        let mut record = request.clone();
        record.started_ms = clock.now_millis();
        record.beat = 0;
        let path = pool.slot(k, next);
        if !objects.create(&path, encode(&path, &record)?).await? {
            continue;
        }
        // Generations are deleted once superseded, so a claimant that
        // listed long ago can create one again: only the slot's latest
        // generation is held.
        if superseded(objects, pool, k, next).await? {
            let _ = objects.delete(&path).await;
            continue;
        }
        // Earlier generations are history now (best effort: a listing
        // finds the latest whatever is left).
        for &old in slots.get(&k).map(Vec::as_slice).unwrap_or_default() {
            let _ = objects.delete(&pool.slot(k, old)).await;
        }
        return Ok(Look::Took(SlotLease::new(
            objects.clone(),
            pool,
            k,
            next,
            record,
            now,
            clock.clone(),
        )));
    }
    Ok(Look::Full(held))
}

/// End slot `k` at `gen` (an expired holder's, numbered above the budget)
/// by creating its successor marked released.
async fn retire(
    objects: &Objects,
    pool: Pool,
    k: u32,
    gen: u64,
    mut record: SlotRecord,
) -> Result<()> {
    record.released = true;
    record.beat += 1;
    let path = pool.slot(k, gen + 1);
    objects.create(&path, encode(&path, &record)?).await?;
    Ok(())
}

/// What the holder knows of its own lease.
#[derive(Debug)]
struct Renewals {
    lease_ms: u64,
    /// When the last two renewals that landed were sent (the claim counts;
    /// the clock's monotonic milliseconds).
    sent: Mutex<(i64, i64)>,
    /// A renewal found a successor, or none landed for a whole lease: the
    /// slot is, or may be, someone else's.
    lost: AtomicBool,
    /// Told once `lost` is set (see [`SlotLease::lost`]).
    told: tokio::sync::watch::Sender<bool>,
}

impl Renewals {
    fn set_lost(&self) {
        self.lost.store(true, Ordering::SeqCst);
        self.told.send_replace(true);
    }

    fn landed(&self, sent_ms: i64) {
        let mut sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        *sent = (sent.1, sent_ms);
    }

    /// Until when no observer can have timed the lease out: an observer
    /// that last saw the beat before the latest started timing it no
    /// earlier than that beat was sent.
    fn safe_until(&self) -> i64 {
        let sent = self.sent.lock().unwrap_or_else(|e| e.into_inner());
        sent.0 + self.lease_ms as i64
    }
}

/// A held backfill slot. Renew it ([`SlotLease::keep_renewed`] for a
/// background renewal, [`SlotLease::renew`] by hand), check it before
/// committing, release it at the end (dropping it without releasing
/// leaves it to expire).
#[derive(Debug)]
pub struct SlotLease {
    objects: Objects,
    pool: Pool,
    slot: u32,
    generation: u64,
    record: Arc<Mutex<SlotRecord>>,
    renewals: Arc<Renewals>,
    clock: Arc<dyn Clock>,
    keeper: Option<Keeper>,
}

impl SlotLease {
    fn new(
        objects: Objects,
        pool: Pool,
        slot: u32,
        generation: u64,
        record: SlotRecord,
        claimed_ms: i64,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let renewals = Renewals {
            lease_ms: record.lease_ms,
            sent: Mutex::new((claimed_ms, claimed_ms)),
            lost: AtomicBool::new(false),
            told: tokio::sync::watch::channel(false).0,
        };
        Self {
            objects,
            pool,
            slot,
            generation,
            record: Arc::new(Mutex::new(record)),
            renewals: Arc::new(renewals),
            clock,
            keeper: None,
        }
    }

    /// The ticket a launched command checks (see [`check_ticket`]).
    pub fn ticket(&self) -> SlotTicket {
        SlotTicket {
            slot: self.slot,
            generation: self.generation,
        }
    }

    /// Renew every third of the lease from now on, on the lease keeper's
    /// own runtime (see `keeper`), until released or dropped.
    pub fn keep_renewed(mut self) -> Self {
        let every = Duration::from_millis((self.renewals.lease_ms / 3).max(1));
        let (objects, record, renewals, clock) = (
            self.objects.clone(),
            self.record.clone(),
            self.renewals.clone(),
            self.clock.clone(),
        );
        let (pool, slot, generation) = (self.pool, self.slot, self.generation);
        self.keeper = Some(Keeper::spawn(every, move || {
            let (objects, record, renewals, clock) = (
                objects.clone(),
                record.clone(),
                renewals.clone(),
                clock.clone(),
            );
            async move {
                match renew(
                    &objects,
                    pool,
                    slot,
                    generation,
                    &record,
                    &renewals,
                    clock.as_ref(),
                )
                .await
                {
                    Ok(()) => true,
                    // Lost: nothing left to renew.
                    Err(Error::SlotLost { .. }) => false,
                    // A failed renewal is tried again next tick, until none
                    // landed for a whole lease: then an observer may have
                    // timed it out, and the holder must stop.
                    Err(e) => {
                        tracing::warn!(slot, error = %e, "could not renew a backfill slot");
                        if clock.elapsed_millis() >= renewals.safe_until() {
                            renewals.set_lost();
                            return false;
                        }
                        true
                    }
                }
            }
        }));
        self
    }

    /// Resolves once the holder knows it lost the slot (a renewal found a
    /// successor, or none landed for a whole lease): whoever runs the work
    /// the slot was for should stop it.
    pub fn lost(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut told = self.renewals.told.subscribe();
        async move {
            let _ = told.wait_for(|lost| *lost).await;
        }
    }

    /// Renew now: raise the beat, then look for a successor.
    pub async fn renew(&self) -> Result<()> {
        renew(
            &self.objects,
            self.pool,
            self.slot,
            self.generation,
            &self.record,
            &self.renewals,
            self.clock.as_ref(),
        )
        .await
    }

    /// Fail (`SlotLost`) if the slot is no longer this holder's: a
    /// successor exists, or no renewal landed for long enough that an
    /// observer may have timed the lease out. Call it right before a commit.
    pub async fn ensure_held(&self) -> Result<()> {
        let what = self.describe();
        let lost = Error::SlotLost {
            what: what.clone(),
            slot: self.slot,
            generation: self.generation,
        };
        if self.clock.elapsed_millis() >= self.renewals.safe_until() {
            // Back from a pause longer than the lease: an observer may have
            // timed it out and be taking it over; it stays lost.
            self.renewals.set_lost();
        }
        if self.renewals.lost.load(Ordering::SeqCst) {
            return Err(lost);
        }
        match superseded(&self.objects, self.pool, self.slot, self.generation).await? {
            true => Err(lost),
            false => Ok(()),
        }
    }

    /// Give the slot back: create the successor saying released (nothing
    /// happens if someone took it over), then delete this generation.
    pub async fn release(mut self) {
        self.keeper = None;
        let mut record = self.describe_record();
        record.released = true;
        record.beat += 1;
        let next = self.pool.slot(self.slot, self.generation + 1);
        let released = match encode(&next, &record) {
            Ok(bytes) => self.objects.create(&next, bytes).await.map(|_| ()),
            Err(e) => Err(e),
        };
        if let Err(e) = released {
            tracing::warn!(slot = self.slot, error = %e, "could not release a backfill slot; it expires instead");
            return;
        }
        let _ = self
            .objects
            .delete(&self.pool.slot(self.slot, self.generation))
            .await;
    }

    fn describe_record(&self) -> SlotRecord {
        self.record
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn describe(&self) -> String {
        self.describe_record().what
    }
}

async fn renew(
    objects: &Objects,
    pool: Pool,
    slot: u32,
    generation: u64,
    record: &Mutex<SlotRecord>,
    renewals: &Renewals,
    clock: &dyn Clock,
) -> Result<()> {
    let path = pool.slot(slot, generation);
    let bytes = {
        let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
        record.beat += 1;
        encode(&path, &*record)?
    };
    let sent = clock.elapsed_millis();
    objects.put(&path, bytes).await?;
    renewals.landed(sent);
    if superseded(objects, pool, slot, generation).await? {
        renewals.set_lost();
        return Err(Error::SlotLost {
            what: record
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .what
                .clone(),
            slot,
            generation,
        });
    }
    Ok(())
}
