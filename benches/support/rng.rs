//! Deterministic pseudo-random data for the benches.

/// A small deterministic generator (xorshift), so every system and every run
/// sees the same data.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
