//! W-TinyLFU (Einziger, Eytan, Friedman, Manes, "TinyLFU: A Highly Efficient Cache
//! Admission Policy", ACM Transactions on Storage 13(4), 2017), in the layout Caffeine
//! uses, byte-sized as Caffeine's weighted caches are.
//!
//! - A window LRU holding 1% of the bytes takes every new object.
//! - The main cache is a segmented LRU: probation (20% of the main bytes) and protected
//!   (80%). A hit in probation moves the object to protected; protected's overflow goes back
//!   to probation's most recent end.
//! - A count-min sketch of four rows of 4-bit counters estimates every key's frequency: every
//!   request adds one to the key's counters (a saturated counter stays at 15), and after ten
//!   additions per counter of a row all counters are halved, so the estimate ages. The rows
//!   are as wide as the next power of two above the cache's object count, and grow (starting
//!   afresh) as it grows, as Caffeine's `ensureCapacity` does.
//! - Objects pushed out of the window are candidates for the main cache. While the cache is
//!   over its bytes, the oldest candidate meets the main cache's victim (probation's least
//!   recent, or protected's when probation is empty): the one with the higher frequency
//!   stays, a tie keeps the victim (the paper's rule). One comparison evicts one object, so
//!   a large candidate may win over several victims in turn. Surviving candidates join
//!   probation.
//!
//! Left out, for a deterministic replay: Caffeine's hill climber (the window stays at 1%),
//! its random admission of warm candidates against hash flooding, and the doorkeeper (a
//! Bloom filter in front of the sketch that the paper makes optional).

use std::collections::VecDeque;

use lru::LruCache;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::ReferenceCache;

/// The window's share of the bytes.
const WINDOW_SHARE: f64 = 0.01;
/// Protected's share of the main cache's bytes.
const PROTECTED_SHARE: f64 = 0.80;
/// Rows of the count-min sketch.
const DEPTH: usize = 4;
/// A 4-bit counter's ceiling.
const MAX_COUNT: u8 = 15;
/// Additions per counter of a row before every counter is halved (Caffeine's sample size).
const SAMPLE_PER_COUNTER: u64 = 10;
/// The narrowest row, so that an empty cache still counts.
const MIN_WIDTH: usize = 16;

/// A count-min sketch of 4-bit counters that halves them periodically.
#[derive(Debug)]
pub(super) struct FrequencySketch {
    rows: [Vec<u8>; DEPTH],
    /// Increments that raised a counter since the last halving.
    pub(super) additions: u64,
}

impl FrequencySketch {
    fn new(width: usize) -> FrequencySketch {
        let width = width.max(MIN_WIDTH).next_power_of_two();
        FrequencySketch {
            rows: std::array::from_fn(|_| vec![0; width]),
            additions: 0,
        }
    }

    fn width(&self) -> usize {
        self.rows[0].len()
    }

    /// Widens the rows (counts start afresh) when the cache holds more objects than they have
    /// counters.
    fn ensure_capacity(&mut self, objects: usize) {
        if objects > self.width() {
            *self = FrequencySketch::new(objects);
        }
    }

    fn slot(&self, key: u64, row: usize) -> usize {
        xxh3_64_with_seed(&key.to_le_bytes(), row as u64) as usize & (self.width() - 1)
    }

    /// The estimate: the least of the key's counters.
    pub(super) fn frequency(&self, key: u64) -> u8 {
        (0..DEPTH)
            .map(|row| self.rows[row][self.slot(key, row)])
            .min()
            .unwrap_or(0)
    }

    /// Counts one request of `key`, halving every counter once the sample is full.
    pub(super) fn increment(&mut self, key: u64) {
        let mut added = false;
        for row in 0..DEPTH {
            let slot = self.slot(key, row);
            let counter = &mut self.rows[row][slot];
            if *counter < MAX_COUNT {
                *counter += 1;
                added = true;
            }
        }
        if added {
            self.additions += 1;
            if self.additions >= SAMPLE_PER_COUNTER * self.width() as u64 {
                self.halve();
            }
        }
    }

    fn halve(&mut self) {
        for row in &mut self.rows {
            for counter in row.iter_mut() {
                *counter /= 2;
            }
        }
        self.additions /= 2;
    }
}

/// One LRU segment and the bytes it holds.
struct Segment {
    entries: LruCache<u64, u64>,
    bytes: u64,
}

impl Segment {
    fn new() -> Segment {
        Segment {
            entries: LruCache::unbounded(),
            bytes: 0,
        }
    }

    fn push(&mut self, key: u64, size: u64) {
        self.bytes += size;
        self.entries.put(key, size);
    }

    fn pop_lru(&mut self) -> Option<(u64, u64)> {
        let (key, size) = self.entries.pop_lru()?;
        self.bytes -= size;
        Some((key, size))
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let size = self.entries.pop(&key)?;
        self.bytes -= size;
        Some(size)
    }
}

/// W-TinyLFU inside a byte budget (see the module docs).
pub(crate) struct WTinyLfu {
    window: Segment,
    probation: Segment,
    protected: Segment,
    window_capacity: u64,
    protected_capacity: u64,
    capacity: u64,
    pub(super) sketch: FrequencySketch,
}

impl WTinyLfu {
    /// An empty cache of `capacity` bytes: window 1%, protected 80% of the rest.
    pub(crate) fn new(capacity: u64) -> WTinyLfu {
        let window_capacity = ((capacity as f64 * WINDOW_SHARE) as u64).max(1);
        let main = capacity.saturating_sub(window_capacity);
        WTinyLfu {
            window: Segment::new(),
            probation: Segment::new(),
            protected: Segment::new(),
            window_capacity,
            protected_capacity: (main as f64 * PROTECTED_SHARE) as u64,
            capacity,
            sketch: FrequencySketch::new(MIN_WIDTH),
        }
    }

    /// The keys of each segment, least recent first, for tests: window, probation, protected.
    #[cfg(test)]
    pub(super) fn segments(&self) -> [Vec<u64>; 3] {
        [&self.window, &self.probation, &self.protected]
            .map(|segment| segment.entries.iter().rev().map(|(&k, _)| k).collect())
    }

    fn objects(&self) -> usize {
        self.window.entries.len() + self.probation.entries.len() + self.protected.entries.len()
    }

    /// Moves a probation hit to protected, demoting protected's least recent past its share.
    fn promote(&mut self, key: u64, size: u64) {
        self.protected.push(key, size);
        while self.protected.bytes > self.protected_capacity {
            match self.protected.pop_lru() {
                Some((demoted, demoted_size)) => self.probation.push(demoted, demoted_size),
                None => break,
            }
        }
    }

    /// Judges the window's overflow against the main cache's victims until the bytes fit,
    /// then lets the surviving candidates into probation.
    fn evict_main(&mut self, mut candidates: VecDeque<(u64, u64)>) {
        let mut pending: u64 = candidates.iter().map(|&(_, size)| size).sum();
        let used = |cache: &WTinyLfu, pending: u64| {
            cache.window.bytes + cache.probation.bytes + cache.protected.bytes + pending
        };
        while used(self, pending) > self.capacity {
            let victim_segment = if self.probation.entries.is_empty() {
                &mut self.protected
            } else {
                &mut self.probation
            };
            let victim = victim_segment.entries.peek_lru().map(|(&k, _)| k);
            match (candidates.front().copied(), victim) {
                (None, None) => break,
                (Some((candidate, size)), victim)
                    if victim.is_none_or(|victim| {
                        self.sketch.frequency(candidate) <= self.sketch.frequency(victim)
                    }) =>
                {
                    candidates.pop_front();
                    pending -= size;
                }
                _ => {
                    victim_segment.pop_lru();
                }
            }
        }
        for (key, size) in candidates {
            self.probation.push(key, size);
        }
    }
}

impl ReferenceCache for WTinyLfu {
    fn lookup(&mut self, key: u64) -> Option<u64> {
        self.sketch.increment(key);
        if let Some(&size) = self.window.entries.get(&key) {
            return Some(size);
        }
        if let Some(&size) = self.protected.entries.get(&key) {
            return Some(size);
        }
        let size = self.probation.remove(key)?;
        self.promote(key, size);
        Some(size)
    }

    fn insert(&mut self, key: u64, size: u64) -> bool {
        if size > self.capacity {
            return false;
        }
        self.window.push(key, size);
        self.sketch.ensure_capacity(self.objects());
        let mut candidates = VecDeque::new();
        while self.window.bytes > self.window_capacity {
            match self.window.pop_lru() {
                Some(candidate) => candidates.push_back(candidate),
                None => break,
            }
        }
        self.evict_main(candidates);
        true
    }

    fn used_bytes(&self) -> u64 {
        self.window.bytes + self.probation.bytes + self.protected.bytes
    }

    fn name(&self) -> &'static str {
        "w-tinylfu"
    }
}
