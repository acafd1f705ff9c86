//! The open-addressing hash table of the interval index.
//!
//! Our own rather than `hashbrown`'s because a probe prefetches a slot by
//! its address before looking it up, so that the cache misses of a chunk of
//! rows overlap; `hashbrown` does not expose slot addresses.

/// A slot: the high half of a key's hash and a `u32` value (the key's
/// arena offset). Eight bytes, not the sixteen a `u64` hash padded out
/// to: the low half already chose the slot, and equal tags are told apart
/// by the caller's key check anyway, so storing it would only double the
/// table (8 of a 200k-key dimension's 24 MiB index).
#[derive(Debug, Clone, Copy)]
struct Slot {
    tag: u32,
    value: u32,
}

/// The part of a hash a slot keeps (the low bits pick the slot).
fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// The value of a free slot; never stored.
pub const EMPTY: u32 = u32::MAX;

/// Power-of-two sized, at most half full, linear probing. Equal hashes are
/// told apart by the caller's `same` check on the stored value.
#[derive(Debug)]
pub struct Slots {
    slots: Vec<Slot>,
    mask: usize,
}

impl Slots {
    /// A table with room for `n` entries.
    pub fn with_room_for(n: usize) -> Self {
        let mask = (n * 2).next_power_of_two().max(16) - 1;
        Self {
            slots: vec![
                Slot {
                    tag: 0,
                    value: EMPTY
                };
                mask + 1
            ],
            mask,
        }
    }

    /// Number of entries.
    pub fn entries(&self) -> usize {
        self.slots.iter().filter(|s| s.value != EMPTY).count()
    }

    /// Bytes held.
    pub fn size(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>()
    }

    /// The value stored for `hash` that `same` accepts, or `value` (not
    /// `EMPTY`) newly inserted.
    pub fn find_or_insert(&mut self, hash: u64, value: u32, same: impl Fn(u32) -> bool) -> u32 {
        let mut i = hash as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s.value == EMPTY {
                self.slots[i] = Slot {
                    tag: tag(hash),
                    value,
                };
                return value;
            }
            if s.tag == tag(hash) && same(s.value) {
                return s.value;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Start loading the slot where a lookup of `hash` begins.
    pub fn prefetch(&self, hash: u64) {
        prefetch(&self.slots[hash as usize & self.mask]);
    }

    /// The first slot, in probe order, that is free or holds `hash`'s tag, and
    /// its value (`EMPTY` if free): where [`Slots::find_from`] starts.
    pub fn first_with_hash(&self, hash: u64) -> (usize, u32) {
        let mut i = hash as usize & self.mask;
        loop {
            let s = self.slots[i];
            if s.value == EMPTY || s.tag == tag(hash) {
                return (i, s.value);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The value for `hash` that `same` accepts, probing on from slot `i`.
    pub fn find_from(&self, mut i: usize, hash: u64, same: impl Fn(u32) -> bool) -> Option<u32> {
        loop {
            let s = self.slots[i];
            if s.value == EMPTY {
                return None;
            }
            if s.tag == tag(hash) && same(s.value) {
                return Some(s.value);
            }
            i = (i + 1) & self.mask;
        }
    }
}

/// Ask the CPU to start loading `value`'s cache line.
#[inline(always)]
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it reads nothing and cannot fault, and
    // the pointer comes from a live reference. SSE is part of x86_64.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((value as *const T).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_hashes_are_told_apart_by_value() {
        let mut t = Slots::with_room_for(4);
        let same = |want: u32| move |v: u32| v == want;
        assert_eq!(t.find_or_insert(7, 1, same(1)), 1);
        assert_eq!(t.find_or_insert(7, 2, same(2)), 2);
        assert_eq!(t.find_or_insert(7, 9, same(1)), 1);
        assert_eq!(t.entries(), 2);
        let (i, first) = t.first_with_hash(7);
        assert_eq!(first, 1);
        assert_eq!(t.find_from(i, 7, same(2)), Some(2));
        assert_eq!(t.find_from(i, 7, same(3)), None);
        // Another tag starting where 7's run lies passes over it.
        assert_eq!(t.first_with_hash((1 << 32) | 8).1, EMPTY);
    }

    #[test]
    fn hashes_equal_in_their_high_half_are_told_apart_by_value() {
        // One tag for all three (a twice): a slot's tag only filters, the
        // caller's check decides.
        let mut t = Slots::with_room_for(4);
        let same = |want: u32| move |v: u32| v == want;
        let (a, b) = ((5 << 32) | 1, (5 << 32) | 2);
        assert_eq!(t.find_or_insert(a, 1, same(1)), 1);
        assert_eq!(t.find_or_insert(b, 2, same(2)), 2);
        assert_eq!(t.find_or_insert(a, 3, same(3)), 3);
        let (i, _) = t.first_with_hash(a);
        assert_eq!(t.find_from(i, a, same(3)), Some(3));
        assert_eq!(t.find_from(i, a, same(2)), Some(2));
        assert_eq!(t.find_from(i, a, same(4)), None);
        assert_eq!(t.entries(), 3);
    }

    #[test]
    fn a_slot_is_eight_bytes() {
        assert_eq!(Slots::with_room_for(100).size(), 256 * 8);
    }
}
