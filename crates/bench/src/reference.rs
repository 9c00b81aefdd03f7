//! Reference caches for the simulator: published eviction policies that admit everything,
//! so `secondhit simulate` can set second-hit beside them in one table. They exist only
//! here (like `exact-second-hit`); the proxy never runs them.
//!
//! - `lru`: admit-all, least-recently-used eviction by bytes.
//! - `sieve`: SIEVE (Zhang et al., NSDI 2024), see [`sieve`].
//! - `w-tinylfu`: W-TinyLFU (Einziger et al., ACM ToS 2017) as Caffeine lays it out, see
//!   [`tinylfu`]. Its window admits every miss; the frequency sketch decides which objects
//!   leave the window for the main cache.
//! - `s3fifo`: S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
//!   SOSP 2023), as the paper's Algorithm 1 describes it and libCacheSim's `S3FIFO`
//!   implements it, size-aware: a small FIFO holding 10% of the bytes takes every new
//!   object; at its tail, an object hit while in it moves to the main FIFO (90%) and one
//!   not hit is evicted, its key remembered in a ghost FIFO (keys of up to 90% of the
//!   bytes, counted at the objects' sizes). A miss whose key is in the ghost goes straight
//!   to the main FIFO. The main FIFO is a CLOCK with a 2-bit frequency: a hit adds one (at
//!   most 3); at the tail, an object with frequency above 0 is put back at the head with
//!   one less, one with 0 is evicted. Eviction takes from the main FIFO while it holds more
//!   than its 90% (or the small one is empty), else from the small one. An object larger
//!   than the small FIFO is not cached, as in libCacheSim.
//!
//! All count each object at the size the simulator gives it (body plus the store's entry
//! overhead), inside the same byte budget as the store's index, and every insertion as one
//! disk write (a move from the small to the main FIFO is not a new write).

use std::collections::{HashMap, VecDeque};

use lru::LruCache;

pub mod sieve;
pub mod tinylfu;

use sieve::Sieve;
use tinylfu::WTinyLfu;

/// The names of the reference caches, in report order.
pub const REFERENCE_NAMES: [&str; 4] = ["s3fifo", "sieve", "w-tinylfu", "lru"];

/// A cache that decides admission and eviction itself, keyed by object id.
pub(super) trait ReferenceCache {
    /// The size `key` was inserted with (and the object's recency or frequency updated) if
    /// it is cached.
    fn lookup(&mut self, key: u64) -> Option<u64>;
    /// Caches `key` of `size` bytes after a miss (`key` is not cached), evicting to make
    /// room; false if the object is not cached (too large).
    fn insert(&mut self, key: u64, size: u64) -> bool;
    /// The bytes of the objects cached.
    fn used_bytes(&self) -> u64;
    /// The policy's name in reports.
    fn name(&self) -> &'static str;
}

/// A fresh reference cache `name` (see [`REFERENCE_NAMES`]) of `capacity` bytes.
pub(super) fn build(name: &str, capacity: u64) -> Option<Box<dyn ReferenceCache>> {
    match name {
        "s3fifo" => Some(Box::new(S3Fifo::new(capacity))),
        "sieve" => Some(Box::new(Sieve::new(capacity))),
        "w-tinylfu" => Some(Box::new(WTinyLfu::new(capacity))),
        "lru" => Some(Box::new(Lru::new(capacity))),
        _ => None,
    }
}

/// Admit-all LRU inside a byte budget.
pub(super) struct Lru {
    entries: LruCache<u64, u64>,
    capacity: u64,
    used: u64,
}

impl Lru {
    pub(super) fn new(capacity: u64) -> Lru {
        Lru {
            entries: LruCache::unbounded(),
            capacity,
            used: 0,
        }
    }
}

impl ReferenceCache for Lru {
    fn lookup(&mut self, key: u64) -> Option<u64> {
        self.entries.get(&key).copied()
    }

    fn insert(&mut self, key: u64, size: u64) -> bool {
        if size > self.capacity {
            return false;
        }
        while self.used + size > self.capacity {
            match self.entries.pop_lru() {
                Some((_, evicted)) => self.used -= evicted,
                None => break,
            }
        }
        self.used += size;
        self.entries.put(key, size);
        true
    }

    fn used_bytes(&self) -> u64 {
        self.used
    }

    fn name(&self) -> &'static str {
        "lru"
    }
}

/// The small FIFO's share of the bytes.
const SMALL_SHARE: f64 = 0.10;
/// The ghost FIFO remembers keys of objects adding up to this share of the bytes.
const GHOST_SHARE: f64 = 0.90;
/// The main FIFO's frequency counter saturates here (2 bits).
const MAX_FREQ: u8 = 3;

#[derive(Clone, Copy, Debug)]
struct Resident {
    size: u64,
    freq: u8,
}

/// S3-FIFO inside a byte budget (see the module docs).
pub(super) struct S3Fifo {
    resident: HashMap<u64, Resident>,
    small: VecDeque<u64>,
    main: VecDeque<u64>,
    small_bytes: u64,
    main_bytes: u64,
    small_capacity: u64,
    main_capacity: u64,
    /// Evicted keys in FIFO order, each with the insertion number that `ghost_members`
    /// must still hold for it to count: a ghost hit removes the key from `ghost_members`
    /// only, and its turn here is skipped when it comes.
    ghost: VecDeque<(u64, u64)>,
    /// The keys in the ghost: their insertion number and size.
    ghost_members: HashMap<u64, (u64, u64)>,
    ghost_bytes: u64,
    ghost_capacity: u64,
    ghost_insertions: u64,
}

impl S3Fifo {
    pub(super) fn new(capacity: u64) -> S3Fifo {
        let small_capacity = (capacity as f64 * SMALL_SHARE) as u64;
        S3Fifo {
            resident: HashMap::new(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            main_bytes: 0,
            small_capacity,
            main_capacity: capacity - small_capacity,
            ghost: VecDeque::new(),
            ghost_members: HashMap::new(),
            ghost_bytes: 0,
            ghost_capacity: (capacity as f64 * GHOST_SHARE) as u64,
            ghost_insertions: 0,
        }
    }

    fn used(&self) -> u64 {
        self.small_bytes + self.main_bytes
    }

    fn capacity(&self) -> u64 {
        self.small_capacity + self.main_capacity
    }

    /// Evicts one object: from the main FIFO while it is over its share (or the small one
    /// is empty), else from the small one.
    fn evict(&mut self) {
        if self.main_bytes > self.main_capacity || self.small.is_empty() {
            self.evict_main();
        } else {
            self.evict_small();
        }
    }

    /// Walks the small FIFO's tail until one object leaves the cache: hit objects move
    /// to the main FIFO, the first one not hit is evicted into the ghost.
    fn evict_small(&mut self) {
        while let Some(key) = self.small.pop_front() {
            let Some(object) = self.resident.get_mut(&key) else {
                continue;
            };
            self.small_bytes -= object.size;
            if object.freq >= 1 {
                object.freq = 0;
                self.main_bytes += object.size;
                self.main.push_back(key);
            } else {
                let size = object.size;
                self.resident.remove(&key);
                self.remember(key, size);
                return;
            }
        }
    }

    /// CLOCK over the main FIFO's tail: objects with a frequency go back to the head with
    /// one less, the first without one is evicted.
    fn evict_main(&mut self) {
        while let Some(key) = self.main.pop_front() {
            let Some(object) = self.resident.get_mut(&key) else {
                continue;
            };
            if object.freq >= 1 {
                object.freq -= 1;
                self.main.push_back(key);
            } else {
                self.main_bytes -= object.size;
                self.resident.remove(&key);
                return;
            }
        }
    }

    /// Puts `key` in the ghost FIFO, forgetting the oldest keys past its share.
    fn remember(&mut self, key: u64, size: u64) {
        self.ghost_insertions += 1;
        self.ghost.push_back((key, self.ghost_insertions));
        self.ghost_members
            .insert(key, (self.ghost_insertions, size));
        self.ghost_bytes += size;
        while self.ghost_bytes > self.ghost_capacity {
            let Some((old, turn)) = self.ghost.pop_front() else {
                break;
            };
            if let Some(&(member_turn, old_size)) = self.ghost_members.get(&old)
                && member_turn == turn
            {
                self.ghost_members.remove(&old);
                self.ghost_bytes -= old_size;
            }
        }
    }
}

impl ReferenceCache for S3Fifo {
    fn lookup(&mut self, key: u64) -> Option<u64> {
        let object = self.resident.get_mut(&key)?;
        object.freq = (object.freq + 1).min(MAX_FREQ);
        Some(object.size)
    }

    fn insert(&mut self, key: u64, size: u64) -> bool {
        if size >= self.small_capacity {
            return false;
        }
        // The ghost is asked before evicting, as the lookup of libCacheSim does: the
        // evictions below must not push the key out of it first. A ghost hit leaves the
        // key's turn in the ghost FIFO to be skipped when it comes.
        let ghost_hit = self.ghost_members.remove(&key);
        if let Some((_, ghost_size)) = ghost_hit {
            self.ghost_bytes -= ghost_size;
        }
        while self.used() + size > self.capacity() {
            self.evict();
        }
        if ghost_hit.is_some() {
            self.main_bytes += size;
            self.main.push_back(key);
        } else {
            self.small_bytes += size;
            self.small.push_back(key);
        }
        self.resident.insert(key, Resident { size, freq: 0 });
        true
    }

    fn used_bytes(&self) -> u64 {
        self.used()
    }

    fn name(&self) -> &'static str {
        "s3fifo"
    }
}

#[cfg(test)]
mod tests;
