//! Injected time and identity.
//!
//! Production code never reads the system clock or draws random ids directly
//! (`clippy.toml` forbids it); it asks a [`Clock`] and an [`IdGenerator`], so
//! tests can replay a run deterministically.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use uuid::Uuid;

/// A source of wall-clock time in milliseconds since the Unix epoch.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    fn now_millis(&self) -> i64;

    /// Milliseconds since some fixed moment of this process, never going
    /// back or jumping with the wall clock: what leases are timed with
    /// (the run budget's). A test clock's is its wall time.
    fn elapsed_millis(&self) -> i64 {
        self.now_millis()
    }
}

/// The system clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[allow(clippy::disallowed_methods)]
    fn now_millis(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }

    fn elapsed_millis(&self) -> i64 {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_millis() as i64
    }
}

/// A clock that returns a fixed time until moved; for tests.
///
/// ```
/// use logbook_core::clock::{Clock, ManualClock};
/// let c = ManualClock::new(1_000);
/// c.advance(5);
/// assert_eq!(c.now_millis(), 1_005);
/// ```
#[derive(Debug, Default)]
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(millis: i64) -> Self {
        Self(AtomicI64::new(millis))
    }
    pub fn advance(&self, millis: i64) {
        self.0.fetch_add(millis, Ordering::SeqCst);
    }
    pub fn set(&self, millis: i64) {
        self.0.store(millis, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// A source of unique ids (file names, commit ids, staged directories).
pub trait IdGenerator: Send + Sync + std::fmt::Debug {
    fn next_id(&self) -> Uuid;
}

/// Random, time-ordered UUIDv7 ids.
#[derive(Debug, Default, Clone, Copy)]
pub struct UuidV7;

impl IdGenerator for UuidV7 {
    #[allow(clippy::disallowed_methods)]
    fn next_id(&self) -> Uuid {
        Uuid::now_v7()
    }
}

/// Sequential ids (`00000000-0000-0000-0000-000000000001`, ...); for tests.
#[derive(Debug, Default)]
pub struct SequentialIds(AtomicU64);

impl IdGenerator for SequentialIds {
    fn next_id(&self) -> Uuid {
        Uuid::from_u128(u128::from(self.0.fetch_add(1, Ordering::SeqCst) + 1))
    }
}
