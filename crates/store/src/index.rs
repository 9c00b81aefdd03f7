//! The in-memory index: key hash → newest committed fill, in eviction order,
//! inside a byte budget. Pure bookkeeping: no file is touched here; the store
//! unlinks what this module tells it to.
//!
//! # The eviction order: S3-FIFO's small and main queues
//!
//! Entries are kept in two FIFO queues, each entry with a small hit counter. A hit
//! adds one to its entry's counter, saturating at [`MAX_HITS`], and moves nothing.
//!
//! - A new fill enters the *small* queue. While that queue holds more than a tenth of
//!   the indexed bytes ([`SMALL_SHARE`]), eviction walks it from its old end: an entry hit
//!   since its fill moves to the main queue's new end with its counter spent, and the
//!   first one not hit is evicted. A fill nobody asked for while it passed through the
//!   small queue thus goes before anything that was hit ("quick demotion").
//! - Otherwise eviction walks the *main* queue as a CLOCK: its oldest entry with a
//!   count above 0 is put back at the new end with one less, and the first with 0 is
//!   evicted; a count lets an entry hit several times survive several passes.
//!
//! This is S3-FIFO (Yang et al., "FIFO queues are all you need for cache eviction",
//! SOSP 2023). Its ghost queue is kept only under a policy that stores first sights
//! (`always`, `shadow`; [`Index::keep_ghost`]): each shard then remembers the keys its
//! small queue evicted unhit, up to [`GHOST_TENTHS`] of the budget at their sizes over
//! all shards, and a
//! fill of a remembered key goes straight to the main queue. Under `second-hit` every
//! entry was already requested twice before it was written, the admission filter, which
//! remembers keys seen once, plays the ghost's part, and a ghost changed its misses by
//! under a tenth of a point while writing more. Why, measured with the simulator (it
//! runs this index; `docs/guide/sizing.md`, "Against S3-FIFO", and `benches/RESULTS.md`,
//! "S3-FIFO's small queue" and "a ghost in the store's index", have the numbers): with
//! the main queue alone, a fill never hit again stays for a whole pass of the cache, and
//! secondhit trailed S3-FIFO at a cache of 5% of the unique bytes; the small queue
//! evicts it after a tenth of one and beats S3-FIFO on all six workloads; with the ghost,
//! `always` over this index misses exactly as the simulator's own S3-FIFO does.
//! Measured and not kept: new fills, or refills of recently evicted keys, starting with
//! a count (worse: unhit fills stay longer), and SIEVE's hand that leaves
//! survivors in place (Zhang et al., NSDI 2024: better than one CLOCK, worse than the small
//! queue). A hit costs one shard lock and a counter update, no list move and no shared
//! atomic, and one hash lookup when its entry is in the queue holding more of its shard's
//! entries (two otherwise). Once an entry's count is full, a hit has nothing to count:
//! every change of a shard's fills or counts raises the shard's version, and a hit whose
//! shard kept the version it had when the count was full may skip the lock (the store
//! does, for the copies a thread keeps of its hottest entries), so that a key every
//! worker hits does not move its shard's lock between cores.
//!
//! # Fill order without a global lock
//!
//! The index is split into `SHARDS` shards by key hash, each holding one unbounded
//! `LruCache` per queue used as a FIFO (entries are only pushed at the new end, read
//! with `peek`, and taken from the old end); a hit locks only its key's shard. Every
//! fill and every put-back stamps its entry with the next value of one global
//! counter, taken while the shard lock is held, so inside a shard each queue's order is
//! stamp order and a queue's globally oldest entry is the shard tail with the smallest
//! stamp. Eviction — on the fill path, never on a hit — peeks at every shard's tail of
//! the queue it walks, one lock at a time, and handles the oldest; if a hit or a fill
//! changed that tail in between, it looks again.
//!
//! Entries found by the start-up scan carry stamp 0 and a count of 0 and are put at
//! the old end of their shard's small queue: the previous run's hits are not known, so
//! they go before anything filled since the restart unless they are hit, and those hit
//! move to the main queue like any fill that proved itself.
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

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Mutex, MutexGuard, PoisonError};

use shard::{Queue, Shard};

use crate::{FillId, FillRef, StoreHash};

pub mod ghost;
mod shard;

/// Number of index shards. A power of two well above the core count keeps two
/// hits on different keys from meeting on one lock.
pub const SHARDS: usize = 32;

/// A shard's version, on a cache line of its own: the shards' changes do not disturb
/// each other's readers.
#[repr(align(64))]
struct Version(AtomicU64);

/// How often eviction looks again when fills keep changing the tail it chose.
const EVICT_ATTEMPTS: usize = 8;

/// A hit counter saturates here (3 bits, where S3-FIFO has 2): in the simulator better in
/// byte hits at a small cache and never worse (`benches/RESULTS.md`, "S3-FIFO's small queue").
pub const MAX_HITS: u8 = 7;

/// The small queue's share, as in S3-FIFO: eviction takes from it while it holds more
/// than `1 / SMALL_SHARE` of the indexed bytes. Of those rather than of the budget:
/// when `cache.min_free` evicts from a cache far below its budget, a share of the
/// budget would leave every entry in the small queue "within its share" and spin the
/// main queue's CLOCK through the few entries that proved themselves.
pub const SMALL_SHARE: u64 = 10;

/// The ghost remembers evicted keys of up to this many tenths of the budget, counted
/// at their entries' sizes, as S3-FIFO's ghost does (90%).
pub const GHOST_TENTHS: u64 = 9;

/// One committed fill as the index knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fill {
    /// Names the file, with the key hash.
    pub fill_id: FillId,
    /// Length of the entry file in bytes (header and body).
    pub size: u64,
}

/// What the index holds per key.
#[derive(Clone, Copy, Debug)]
struct Slot {
    fill: Fill,
    /// Order in its queue: larger is newer (a put-back or a move counts as a fill);
    /// 0 for entries found by the scan.
    stamp: u64,
    /// Hits not yet spent by eviction passes, at most [`MAX_HITS`].
    hits: u8,
    /// Found by the start-up scan, i.e. written by an earlier run: any fill of
    /// this run is newer, whatever the fill ids say.
    scanned: bool,
}

/// The outcome of [`Index::place`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
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
pub enum Provenance {
    /// Committed by this run.
    Live,
    /// Found on disk by the start-up scan.
    Scanned,
}

/// A snapshot of the index's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Entries indexed.
    pub objects: u64,
    /// Their bytes, as the budget counts them.
    pub object_bytes: u64,
    /// Bytes reserved by fills in progress.
    pub reserved_bytes: u64,
    /// Entries evicted since the index was made.
    pub evictions: u64,
    /// Keys the ghost remembers ([`Index::keep_ghost`]).
    pub ghost_keys: u64,
}

/// The sharded two-queue index with its byte budget.
pub struct Index {
    /// Tells this index's keys from another's in a thread's memory of absent keys.
    id: u64,
    shards: Box<[Mutex<Shard>]>,
    /// Per shard: raised by every change of which fill a key has, or of a hit count other
    /// than a hit's ([`Index::touch`], [`Index::unchanged_since`]).
    versions: Box<[Version]>,
    /// The fill-order clock; see the module docs for why one counter suffices.
    clock: AtomicU64,
    /// `cache.max_size`.
    max_bytes: u64,
    /// The ghost's capacity in bytes, over all shards: [`GHOST_TENTHS`] of the budget.
    ghost_bytes: u64,
    /// What all shards' ghosts remember, in bytes at the evicted entries' sizes.
    ghost_total: AtomicU64,
    /// Whether evicted keys are remembered ([`Index::keep_ghost`]).
    ghost_on: AtomicBool,
    /// Object bytes (including evicted files not yet unlinked) plus reservations.
    used: AtomicU64,
    /// Bytes of entry files accounted to `objects/`.
    object_bytes: AtomicU64,
    /// Bytes of the entries in the small and the main queue (changed on the fill path
    /// only).
    small_bytes: AtomicU64,
    main_bytes: AtomicU64,
    /// Bytes reserved by fills in progress.
    reserved: AtomicU64,
    /// Entries currently indexed.
    objects: AtomicU64,
    /// Entries evicted to make room, since start.
    evictions: AtomicU64,
}

/// Each thread's memory of keys it found absent, with their shard's version then.
mod absent {
    use std::cell::Cell;

    use crate::StoreHash;

    /// Keys remembered per thread; a power of two.
    const SLOTS: usize = 16;

    /// An absent key: its index, its hash, and its shard's version when it was looked up.
    type Memo = Option<(u64, StoreHash, u64)>;

    thread_local! {
        // A cell per slot: a look or a note copies one memo, not all of them.
        static ABSENT: [Cell<Memo>; SLOTS] = const { [const { Cell::new(None) }; SLOTS] };
    }

    /// The slot a key's memo takes: bits of its hash the shard is not chosen by.
    fn slot(key_hash: StoreHash) -> usize {
        (key_hash.0 >> 64) as usize & (SLOTS - 1)
    }

    /// Whether this thread found `key_hash` of index `id` absent at `version`.
    pub(super) fn known(id: u64, key_hash: StoreHash, version: u64) -> bool {
        let memo = ABSENT.with(|memos| memos[slot(key_hash)].get());
        memo == Some((id, key_hash, version))
    }

    /// Notes that `key_hash` of index `id` was absent at `version`.
    pub(super) fn remember(id: u64, key_hash: StoreHash, version: u64) {
        ABSENT.with(|memos| memos[slot(key_hash)].set(Some((id, key_hash, version))));
    }
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
    pub fn new(max_bytes: u64) -> Index {
        static NEXT_ID: AtomicU64 = AtomicU64::new(0);
        Index {
            id: NEXT_ID.fetch_add(1, Relaxed),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::new())).collect(),
            versions: (0..SHARDS).map(|_| Version(AtomicU64::new(0))).collect(),
            clock: AtomicU64::new(1),
            max_bytes,
            ghost_bytes: max_bytes / 10 * GHOST_TENTHS,
            ghost_total: AtomicU64::new(0),
            ghost_on: AtomicBool::new(false),
            used: AtomicU64::new(0),
            object_bytes: AtomicU64::new(0),
            small_bytes: AtomicU64::new(0),
            main_bytes: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            objects: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    fn shard(&self, key_hash: StoreHash) -> MutexGuard<'_, Shard> {
        self.lock(key_hash.0 as usize % SHARDS)
    }

    /// The shard of `key_hash`, locked to change which fill a key has or a count.
    fn shard_to_change(&self, key_hash: StoreHash) -> MutexGuard<'_, Shard> {
        self.lock_to_change(key_hash.0 as usize % SHARDS)
    }

    /// Shard `shard_no`, locked, its version raised before anything changes: a reader
    /// that still sees the old version reads nothing of the shard, and one that sees the
    /// new one takes the lock after this.
    fn lock_to_change(&self, shard_no: usize) -> MutexGuard<'_, Shard> {
        let shard = self.lock(shard_no);
        self.versions[shard_no].0.fetch_add(1, Release);
        shard
    }

    fn lock(&self, shard_no: usize) -> MutexGuard<'_, Shard> {
        // The key hash is a uniform 128-bit hash: its low bits pick the shard.
        // Every critical section is a handful of list operations that cannot
        // panic half-way, so a poisoned lock still guards consistent lists.
        self.shards[shard_no]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The next fill-order stamp; call with the shard lock held.
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Relaxed)
    }

    /// The indexed fill of `key_hash`, with one more hit counted (the entry does
    /// not move); and, once its count is full, its shard's version from before the
    /// lookup: while [`Index::unchanged_since`] that version, the key still has this fill
    /// and a full count, so a later hit may skip the lock, having nothing to count.
    ///
    /// A key found absent is remembered by the thread with that version
    /// (`absent`): while the version is unchanged nothing was placed in the shard, so
    /// the key's next misses on this thread (a URL passed through again and again) take
    /// no lock either.
    pub fn touch(&self, key_hash: StoreHash) -> Option<(Fill, Option<u64>)> {
        let shard_no = key_hash.0 as usize % SHARDS;
        let version = self.versions[shard_no].0.load(Acquire);
        if absent::known(self.id, key_hash, version) {
            return None;
        }
        let mut shard = self.lock(shard_no);
        let Some(slot) = shard.slot_mut(&key_hash) else {
            drop(shard);
            absent::remember(self.id, key_hash, version);
            return None;
        };
        slot.hits = (slot.hits + 1).min(MAX_HITS);
        Some((slot.fill, (slot.hits == MAX_HITS).then_some(version)))
    }

    /// Whether nothing changed a fill or a count in the shard of `key_hash` since
    /// [`Index::touch`] gave `version`.
    pub fn unchanged_since(&self, key_hash: StoreHash, version: u64) -> bool {
        self.versions[key_hash.0 as usize % SHARDS].0.load(Acquire) == version
    }

    /// The indexed fill of `key_hash`; no hit is counted.
    pub fn peek(&self, key_hash: StoreHash) -> Option<Fill> {
        self.shard(key_hash)
            .find(&key_hash)
            .map(|(_, slot)| slot.fill)
    }

    /// True if `key_hash` has an entry; no hit is counted.
    pub fn contains(&self, key_hash: StoreHash) -> bool {
        self.shard(key_hash).find(&key_hash).is_some()
    }

    /// Indexes a fill whose file is in `objects/`. A live fill beats a scanned
    /// one; between two of the same provenance the higher fill id wins. A new live
    /// fill goes to the small queue's new end with no hits; a live fill replacing
    /// another goes to the new end of the replaced one's queue and keeps its hits
    /// (they were the key's, not the file's). A scanned fill goes to the small queue's
    /// old end, and one replacing another keeps the replaced one's place.
    pub fn place(&self, key_hash: StoreHash, fill: Fill, provenance: Provenance) -> Placed {
        let scanned = provenance == Provenance::Scanned;
        let mut shard = self.shard_to_change(key_hash);
        let old = shard.find(&key_hash);
        if let Some((queue, old)) = old {
            let wins = match (scanned, old.scanned) {
                (false, true) => true,
                (true, false) => false,
                _ => fill.fill_id > old.fill.fill_id,
            };
            if !wins {
                return Placed::Lost;
            }
            // Add before subtracting: a concurrent reader never sees the count wrap.
            self.bytes(queue).fetch_add(fill.size, Relaxed);
            self.bytes(queue).fetch_sub(old.fill.size, Relaxed);
            let entries = shard.queue(queue);
            if scanned {
                if let Some(slot) = entries.peek_mut(&key_hash) {
                    slot.fill = fill;
                }
            } else {
                let slot = Slot {
                    fill,
                    stamp: self.tick(),
                    hits: old.hits,
                    scanned,
                };
                entries.push(key_hash, slot);
            }
            return Placed::Replaced(old.fill);
        }
        let stamp = if scanned { 0 } else { self.tick() };
        let slot = Slot {
            fill,
            stamp,
            hits: 0,
            scanned,
        };
        // A key the small queue evicted unhit, back within the ghost's memory, skips
        // the probation it failed once (S3-FIFO).
        if !scanned && shard.ghost.take(key_hash, &self.ghost_total) {
            shard.main.push(key_hash, slot);
            self.main_bytes.fetch_add(fill.size, Relaxed);
        } else {
            shard.small.push(key_hash, slot);
            if scanned {
                shard.small.demote(&key_hash);
            }
            self.small_bytes.fetch_add(fill.size, Relaxed);
        }
        self.objects.fetch_add(1, Relaxed);
        Placed::New
    }

    /// Removes the entry of `fill.key` if it is still `fill.fill` (a newer fill
    /// may have replaced it). The caller unlinks the file, then releases its
    /// bytes with [`Index::release_object`].
    pub fn remove(&self, fill: FillRef) -> Option<Fill> {
        let mut shard = self.shard_to_change(fill.key);
        let (queue, slot) = shard.find(&fill.key)?;
        if slot.fill.fill_id != fill.fill {
            return None;
        }
        shard.queue(queue).pop(&fill.key)?;
        self.left(queue, slot.fill);
        Some(slot.fill)
    }

    /// Counts `fill` out of the index, from `queue`.
    fn left(&self, queue: Queue, fill: Fill) {
        self.bytes(queue).fetch_sub(fill.size, Relaxed);
        self.objects.fetch_sub(1, Relaxed);
    }

    /// The byte count of `queue`.
    fn bytes(&self, queue: Queue) -> &AtomicU64 {
        match queue {
            Queue::Small => &self.small_bytes,
            Queue::Main => &self.main_bytes,
        }
    }

    /// Removes the next entry in eviction order (see the module docs) and counts an
    /// eviction. The caller unlinks the file, then releases its bytes.
    pub fn pop_victim(&self) -> Option<(StoreHash, Fill)> {
        // Decided once per eviction, as in S3-FIFO: entries moving to the main queue
        // shrink the small one, but the walk goes on until it evicts.
        let small = self.small_bytes.load(Relaxed);
        let indexed = small.saturating_add(self.main_bytes.load(Relaxed));
        let mut queue = if small > indexed / SMALL_SHARE {
            Queue::Small
        } else {
            Queue::Main
        };
        let mut lost_races = 0;
        loop {
            let Some((shard_no, key, stamp)) = self.oldest_tail(queue) else {
                // This queue is empty: take from the other, unless both are.
                queue = match queue {
                    Queue::Small => Queue::Main,
                    Queue::Main => Queue::Small,
                };
                self.oldest_tail(queue)?;
                continue;
            };
            let mut shard = self.lock_to_change(shard_no);
            let entries = shard.queue(queue);
            let still_oldest =
                matches!(entries.peek_lru(), Some((k, s)) if *k == key && s.stamp == stamp);
            // After a few lost races, take this shard's tail: nearly as old.
            if !still_oldest && lost_races + 1 < EVICT_ATTEMPTS {
                lost_races += 1;
                continue;
            }
            let Some((&key, &slot)) = entries.peek_lru() else {
                lost_races += 1;
                continue;
            };
            if slot.hits == 0 {
                entries.pop_lru();
                if queue == Queue::Small && self.ghost_on.load(Relaxed) {
                    let (total, capacity) = (&self.ghost_total, self.ghost_bytes);
                    shard.ghost.remember(key, slot.fill.size, total, capacity);
                }
                self.left(queue, slot.fill);
                self.evictions.fetch_add(1, Relaxed);
                return Some((key, slot.fill));
            }
            // Each pass spends hits, so this loop ends after at most MAX_HITS passes
            // over the main queue and one over the small one.
            let stamp = self.tick();
            match queue {
                Queue::Small => {
                    entries.pop(&key);
                    self.small_bytes.fetch_sub(slot.fill.size, Relaxed);
                    self.main_bytes.fetch_add(slot.fill.size, Relaxed);
                    let moved = Slot {
                        stamp,
                        hits: 0,
                        ..slot
                    };
                    shard.main.push(key, moved);
                }
                Queue::Main => {
                    if let Some(slot) = entries.peek_mut(&key) {
                        slot.hits -= 1;
                        slot.stamp = stamp;
                    }
                    entries.promote(&key);
                }
            }
        }
    }

    /// The shard whose tail in `queue` has the smallest stamp, with that tail's key
    /// and stamp.
    fn oldest_tail(&self, queue: Queue) -> Option<(usize, StoreHash, u64)> {
        let mut oldest: Option<(usize, StoreHash, u64)> = None;
        for no in 0..SHARDS {
            let mut shard = self.lock(no);
            if let Some((&key, slot)) = shard.queue(queue).peek_lru()
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

    /// Turns the ghost on or off (see the module docs); off forgets every key.
    pub fn keep_ghost(&self, on: bool) {
        if self.ghost_on.swap(on, Relaxed) && !on {
            for no in 0..SHARDS {
                self.lock(no).ghost.clear(&self.ghost_total);
            }
        }
    }

    /// Keys the ghost remembers, summed over the shards (0 while it is off).
    fn ghost_keys(&self) -> u64 {
        if !self.ghost_on.load(Relaxed) {
            return 0;
        }
        (0..SHARDS).map(|no| self.lock(no).ghost.len() as u64).sum()
    }

    /// The budget, `cache.max_size`.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Reserves `bytes` if they fit in the budget as it stands; no eviction.
    pub fn try_reserve(&self, bytes: u64) -> bool {
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

    /// How many bytes of entries must go before `bytes` more fit in the budget as it
    /// stands (0 when they fit).
    pub fn shortfall(&self, bytes: u64) -> u64 {
        (self.used.load(Relaxed))
            .saturating_add(bytes)
            .saturating_sub(self.max_bytes)
    }

    /// True if `bytes` would fit once every entry were evicted, i.e. beside the
    /// reservations alone.
    pub fn could_fit(&self, bytes: u64) -> bool {
        let reserved = self.reserved.load(Relaxed);
        bytes.saturating_add(reserved) <= self.max_bytes
    }

    /// Gives back a reservation that will not be used.
    pub fn release_reservation(&self, bytes: u64) {
        self.reserved.fetch_sub(bytes, Relaxed);
        self.used.fetch_sub(bytes, Relaxed);
    }

    /// Turns a reservation of `reserved` bytes into an entry file of `size`
    /// bytes (`size <= reserved`), giving back the rest.
    pub fn commit_reservation(&self, reserved: u64, size: u64) {
        debug_assert!(size <= reserved, "{size} > {reserved}");
        self.reserved.fetch_sub(reserved, Relaxed);
        self.object_bytes.fetch_add(size, Relaxed);
        self.used.fetch_sub(reserved.saturating_sub(size), Relaxed);
    }

    /// Gives back the bytes of an entry file once it is unlinked.
    pub fn release_object(&self, size: u64) {
        self.object_bytes.fetch_sub(size, Relaxed);
        self.used.fetch_sub(size, Relaxed);
    }

    /// Entries currently indexed.
    pub fn len(&self) -> u64 {
        self.objects.load(Relaxed)
    }

    /// Whether no entry is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many objects the cache holds when full, for sizing the admission filter's
    /// generations (`rotate = "auto"`): the entry count scaled by budget / bytes in use,
    /// i.e. at the current mean entry size (0 while empty). Sizing generations to the
    /// entries of a cache that is still filling would admit too little for it to fill.
    pub fn objects_when_full(&self) -> u64 {
        let used = self.object_bytes.load(Relaxed);
        if used == 0 {
            return 0;
        }
        let scaled = u128::from(self.len()) * u128::from(self.max_bytes) / u128::from(used);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    /// The counters, each read on its own (not one consistent snapshot).
    pub fn counts(&self) -> Counts {
        Counts {
            objects: self.objects.load(Relaxed),
            object_bytes: self.object_bytes.load(Relaxed),
            reserved_bytes: self.reserved.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
            ghost_keys: self.ghost_keys(),
        }
    }
}

#[cfg(test)]
mod tests;
