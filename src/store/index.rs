//! The in-memory index: key hash → newest committed fill, in eviction order,
//! inside a byte budget. Pure bookkeeping: no file is touched here; the store
//! unlinks what this module tells it to.
//!
//! # The eviction order: CLOCK with a 2-bit frequency
//!
//! Entries are kept in fill order (a FIFO), each with a small hit counter. A hit
//! adds one to its entry's counter, saturating at 3, and moves nothing. Eviction
//! looks at the oldest entry: one with a count above 0 is put back at the new end
//! with one less, and the first with 0 is evicted. This is the main queue of
//! S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
//! SOSP 2023), a CLOCK whose counter lets an entry hit several times survive
//! several passes. Since every entry here was already requested twice before it
//! was written (the admission filter's job, which plays S3-FIFO's small queue and
//! ghost), the store needs only that queue. Against LRU it keeps objects that are
//! hit again over objects that were written and never hit since, and on the
//! issue's CDN workloads it misses fewer objects and bytes (the simulator, which
//! runs this same index, shows it; see the README's tables). It also makes a hit
//! cheaper: one shard lock and a counter update, no list move and no shared
//! atomic.
//!
//! # Fill order without a global lock
//!
//! The index is split into [`SHARDS`] shards by key hash, each an unbounded
//! `Mutex<LruCache>` used as a FIFO (entries are only pushed at the new end,
//! read with `peek`, and taken from the old end); a hit locks only its key's
//! shard. Every fill and every put-back stamps its entry with the next value of
//! one global counter, taken while the shard lock is held, so inside a shard the
//! list order is stamp order and the globally oldest entry is the shard tail with
//! the smallest stamp. Eviction — on the fill path, never on a hit — peeks at
//! every shard's tail, one lock at a time, and handles the oldest; if a hit or a
//! fill changed that tail in between, it looks again.
//!
//! Entries found by the start-up scan carry stamp 0 and a count of 0 and are put
//! at the old end of their shard: the previous run's hits are not known, so they
//! go before anything filled since the restart unless they are hit.
//!
//! # The byte budget
//!
//! `used` counts the bytes of indexed entry files, of entry files removed from
//! the index but not yet unlinked, and of reservations held by fills in
//! progress. A reservation succeeds only if `used` stays within `max_bytes`;
//! when it does not fit, the store evicts ([`Index::pop_victim`]), unlinks the
//! file and only then gives its bytes back ([`Index::release_object`]), so the
//! files in `objects/` plus the reservations never exceed the budget.
//!
//! The byte counters are plain counters that publish no other memory, so they
//! use `Relaxed`; the budget check is one atomic read-modify-write on `used`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

use lru::LruCache;

/// Number of index shards. A power of two well above the core count keeps two
/// hits on different keys from meeting on one lock.
pub(crate) const SHARDS: usize = 32;

/// How often eviction looks again when fills keep changing the tail it chose.
const EVICT_ATTEMPTS: usize = 8;

/// A hit counter saturates here: 2 bits, as in S3-FIFO's main queue.
const MAX_HITS: u8 = 3;

/// One committed fill as the index knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fill {
    /// Names the file, with the key hash.
    pub fill_id: u64,
    /// Length of the entry file in bytes (header and body).
    pub size: u64,
}

/// What the index holds per key.
#[derive(Clone, Copy, Debug)]
struct Slot {
    fill: Fill,
    /// Fill order: larger is newer (a put-back counts as a fill); 0 for entries
    /// found by the scan.
    stamp: u64,
    /// Hits not yet spent by eviction passes, at most [`MAX_HITS`].
    hits: u8,
    /// Found by the start-up scan, i.e. written by an earlier run: any fill of
    /// this run is newer, whatever the fill ids say.
    scanned: bool,
}

/// The outcome of [`Index::place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// The key had no entry; now it has this one.
    New,
    /// This fill replaced an older one, which the caller must unlink.
    Replaced(Fill),
    /// A newer fill of the key is indexed; the caller must unlink this one.
    Lost,
}

/// Where an indexed fill comes from, which decides who wins a key: committed by this
/// run, or found on disk by the start-up scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Provenance {
    /// Committed by this run.
    Live,
    /// Found on disk by the start-up scan.
    Scanned,
}

/// A snapshot of the index's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub objects: u64,
    pub object_bytes: u64,
    pub reserved_bytes: u64,
    pub evictions: u64,
}

/// The sharded CLOCK index with its byte budget.
pub(crate) struct Index {
    shards: Box<[Mutex<LruCache<u128, Slot>>]>,
    /// The fill-order clock; see the module docs for why one counter suffices.
    clock: AtomicU64,
    /// `cache.max_size`.
    max_bytes: u64,
    /// Object bytes (including evicted files not yet unlinked) plus reservations.
    used: AtomicU64,
    /// Bytes of entry files accounted to `objects/`.
    object_bytes: AtomicU64,
    /// Bytes reserved by fills in progress.
    reserved: AtomicU64,
    /// Entries currently indexed.
    objects: AtomicU64,
    /// Entries evicted to make room, since start.
    evictions: AtomicU64,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("max_bytes", &self.max_bytes)
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}

impl Index {
    /// An empty index with a budget of `max_bytes`.
    pub(crate) fn new(max_bytes: u64) -> Index {
        Index {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(LruCache::unbounded()))
                .collect(),
            clock: AtomicU64::new(1),
            max_bytes,
            used: AtomicU64::new(0),
            object_bytes: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            objects: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    fn shard(&self, key_hash: u128) -> MutexGuard<'_, LruCache<u128, Slot>> {
        // The key hash is a uniform 128-bit hash: its low bits pick the shard.
        // Every critical section is a handful of list operations that cannot
        // panic half-way, so a poisoned lock still guards a consistent list.
        self.shards[key_hash as usize % SHARDS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The next fill-order stamp; call with the shard lock held.
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Relaxed)
    }

    /// The indexed fill of `key_hash`, with one more hit counted (the entry does
    /// not move).
    pub(crate) fn touch(&self, key_hash: u128) -> Option<Fill> {
        let mut shard = self.shard(key_hash);
        let slot = shard.peek_mut(&key_hash)?;
        slot.hits = (slot.hits + 1).min(MAX_HITS);
        Some(slot.fill)
    }

    /// The indexed fill of `key_hash`; no hit is counted.
    pub(crate) fn peek(&self, key_hash: u128) -> Option<Fill> {
        self.shard(key_hash).peek(&key_hash).map(|slot| slot.fill)
    }

    /// True if `key_hash` has an entry; no hit is counted.
    pub(crate) fn contains(&self, key_hash: u128) -> bool {
        self.shard(key_hash).contains(&key_hash)
    }

    /// Indexes a fill whose file is in `objects/`. A live fill beats a scanned
    /// one; between two of the same provenance the higher fill id wins. A new live
    /// fill goes to the new end with no hits, and a live fill replacing another
    /// keeps the replaced one's hits (they were the key's, not the file's); a
    /// scanned fill goes to the old end, and one replacing another keeps the
    /// replaced one's place.
    pub(crate) fn place(&self, key_hash: u128, fill: Fill, provenance: Provenance) -> Placed {
        let scanned = provenance == Provenance::Scanned;
        let mut shard = self.shard(key_hash);
        let old = shard.peek(&key_hash).copied();
        if let Some(old) = old {
            let wins = match (scanned, old.scanned) {
                (false, true) => true,
                (true, false) => false,
                _ => fill.fill_id > old.fill.fill_id,
            };
            if !wins {
                return Placed::Lost;
            }
            if scanned {
                if let Some(slot) = shard.peek_mut(&key_hash) {
                    slot.fill = fill;
                }
                return Placed::Replaced(old.fill);
            }
        }
        let stamp = if scanned { 0 } else { self.tick() };
        let slot = Slot {
            fill,
            stamp,
            hits: old.map_or(0, |old| old.hits),
            scanned,
        };
        shard.push(key_hash, slot);
        match old {
            Some(old) => Placed::Replaced(old.fill),
            None => {
                if scanned {
                    shard.demote(&key_hash);
                }
                self.objects.fetch_add(1, Relaxed);
                Placed::New
            }
        }
    }

    /// Removes the entry of `key_hash` if it is still `fill_id` (a newer fill
    /// may have replaced it). The caller unlinks the file, then releases its
    /// bytes with [`Index::release_object`].
    pub(crate) fn remove(&self, key_hash: u128, fill_id: u64) -> Option<Fill> {
        let mut shard = self.shard(key_hash);
        if shard.peek(&key_hash)?.fill.fill_id != fill_id {
            return None;
        }
        let slot = shard.pop(&key_hash)?;
        self.objects.fetch_sub(1, Relaxed);
        Some(slot.fill)
    }

    /// Removes the next entry in CLOCK order (see the module docs) and counts an
    /// eviction: oldest entries with hits left are put back at the new end with
    /// one hit less, until the oldest has none. The caller unlinks the file, then
    /// releases its bytes.
    pub(crate) fn pop_victim(&self) -> Option<(u128, Fill)> {
        let mut lost_races = 0;
        loop {
            let (shard_no, key, stamp) = self.oldest_tail()?;
            let mut shard = self.shards[shard_no]
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let still_oldest =
                matches!(shard.peek_lru(), Some((k, s)) if *k == key && s.stamp == stamp);
            // After a few lost races, take this shard's tail: nearly as old.
            if !still_oldest && lost_races + 1 < EVICT_ATTEMPTS {
                lost_races += 1;
                continue;
            }
            let Some((&key, slot)) = shard.peek_lru() else {
                lost_races += 1;
                continue;
            };
            if slot.hits > 0 {
                // Put back: each pass spends one hit, so this loop ends after at
                // most MAX_HITS passes over the entries.
                let hits = slot.hits - 1;
                let stamp = self.tick();
                if let Some(slot) = shard.peek_mut(&key) {
                    slot.hits = hits;
                    slot.stamp = stamp;
                }
                shard.promote(&key);
                continue;
            }
            let (key, slot) = shard.pop_lru()?;
            self.objects.fetch_sub(1, Relaxed);
            self.evictions.fetch_add(1, Relaxed);
            return Some((key, slot.fill));
        }
    }

    /// The shard whose tail has the smallest stamp, with that tail's key and stamp.
    fn oldest_tail(&self) -> Option<(usize, u128, u64)> {
        let mut oldest: Option<(usize, u128, u64)> = None;
        for (no, shard) in self.shards.iter().enumerate() {
            let shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((&key, slot)) = shard.peek_lru()
                && oldest.is_none_or(|(_, _, stamp)| slot.stamp < stamp)
            {
                oldest = Some((no, key, slot.stamp));
                if slot.stamp == 0 {
                    break; // Nothing is older than a scanned entry.
                }
            }
        }
        oldest
    }

    /// The budget, `cache.max_size`.
    pub(crate) fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Reserves `bytes` if they fit in the budget as it stands; no eviction.
    pub(crate) fn try_reserve(&self, bytes: u64) -> bool {
        let fits = self
            .used
            .fetch_update(Relaxed, Relaxed, |used| {
                used.checked_add(bytes).filter(|&t| t <= self.max_bytes)
            })
            .is_ok();
        if fits {
            self.reserved.fetch_add(bytes, Relaxed);
        }
        fits
    }

    /// True if `bytes` would fit once every entry were evicted, i.e. beside the
    /// reservations alone.
    pub(crate) fn could_fit(&self, bytes: u64) -> bool {
        let reserved = self.reserved.load(Relaxed);
        bytes.saturating_add(reserved) <= self.max_bytes
    }

    /// Gives back a reservation that will not be used.
    pub(crate) fn release_reservation(&self, bytes: u64) {
        self.reserved.fetch_sub(bytes, Relaxed);
        self.used.fetch_sub(bytes, Relaxed);
    }

    /// Turns a reservation of `reserved` bytes into an entry file of `size`
    /// bytes (`size <= reserved`), giving back the rest.
    pub(crate) fn commit_reservation(&self, reserved: u64, size: u64) {
        debug_assert!(size <= reserved, "{size} > {reserved}");
        self.reserved.fetch_sub(reserved, Relaxed);
        self.object_bytes.fetch_add(size, Relaxed);
        self.used.fetch_sub(reserved.saturating_sub(size), Relaxed);
    }

    /// Gives back the bytes of an entry file once it is unlinked.
    pub(crate) fn release_object(&self, size: u64) {
        self.object_bytes.fetch_sub(size, Relaxed);
        self.used.fetch_sub(size, Relaxed);
    }

    /// Entries currently indexed.
    pub(crate) fn len(&self) -> u64 {
        self.objects.load(Relaxed)
    }

    /// How many objects the cache holds when full, for sizing the admission filter's
    /// generations (`rotate = "auto"`): the entry count scaled by budget / bytes in use,
    /// i.e. at the current mean entry size (0 while empty). Sizing generations to the
    /// entries of a cache that is still filling would admit too little for it to fill.
    pub(crate) fn objects_when_full(&self) -> u64 {
        let used = self.object_bytes.load(Relaxed);
        if used == 0 {
            return 0;
        }
        let scaled = u128::from(self.len()) * u128::from(self.max_bytes) / u128::from(used);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    /// The counters, each read on its own (not one consistent snapshot).
    pub(crate) fn counts(&self) -> Counts {
        Counts {
            objects: self.objects.load(Relaxed),
            object_bytes: self.object_bytes.load(Relaxed),
            reserved_bytes: self.reserved.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
        }
    }
}

#[cfg(test)]
mod tests;
