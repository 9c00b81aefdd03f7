//! A miniature of the store's index (`store::index`): the same small FIFO and main CLOCK,
//! hit counts saturating at the same [`MAX_HITS`], the same choice of queue per eviction,
//! and the store's own [`Ghost`] of keys the small queue evicted unhit; single-threaded,
//! for a miniature simulation that already holds one lock for all its caches.
//!
//! It differs from the index only where a miniature needs it to: one set of queues instead
//! of shards (the index's global stamp order makes its shards one FIFO per queue), entries
//! moved lazily (a queue keeps `(key, turn)` and skips a turn its entry no longer has), the
//! small queue's share a parameter (the candidates compare shares; the store runs
//! [`SMALL_SHARE`]), the budget changeable (a lower sampling rate shrinks it), and an object
//! larger than the whole budget refused without evicting anything (the index would empty
//! itself first; in a cache scaled down by the sampling rate that would throw away the
//! miniature for one object the full cache stores). A test replays one trace through both
//! and compares every hit.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::AtomicU64;

use foldhash::quality::RandomState;

#[cfg(doc)]
use secondhit_store::SMALL_SHARE;
use secondhit_store::{GHOST_TENTHS, Ghost, MAX_HITS, StoreHash};

/// One cached object.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Bytes it takes of the budget.
    size: u64,
    /// Hits not yet spent by eviction passes.
    hits: u8,
    /// In the main queue (else the small one).
    main: bool,
    /// Its place in its queue: only the queue item with this turn is the entry.
    turn: u64,
}

/// The ghost and the bytes it remembers (the store shares this total between shards).
struct GhostOf {
    keys: Ghost,
    total: AtomicU64,
}

/// The miniature index: see the module docs.
pub(super) struct MiniIndex {
    entries: HashMap<u64, Entry, RandomState>,
    small: VecDeque<(u64, u64)>,
    main: VecDeque<(u64, u64)>,
    small_bytes: u64,
    main_bytes: u64,
    capacity: u64,
    /// Eviction takes from the small queue while it holds more than `1 / small_divisor`
    /// of the indexed bytes.
    small_divisor: u64,
    ghost: Option<GhostOf>,
    turns: u64,
}

impl MiniIndex {
    /// An empty index of `capacity` bytes, its small queue `1 / small_divisor` of them,
    /// with a ghost when `ghost` (the store keeps one under a policy that stores first
    /// sights).
    pub(super) fn new(capacity: u64, small_divisor: u64, ghost: bool) -> MiniIndex {
        MiniIndex {
            entries: HashMap::default(),
            small: VecDeque::new(),
            main: VecDeque::new(),
            small_bytes: 0,
            main_bytes: 0,
            capacity,
            small_divisor: small_divisor.max(1),
            ghost: ghost.then(|| GhostOf {
                keys: Ghost::default(),
                total: AtomicU64::new(0),
            }),
            turns: 0,
        }
    }

    /// A request for `key`: true, and one more hit counted, if it is cached.
    pub(super) fn touch(&mut self, key: u64) -> bool {
        match self.entries.get_mut(&key) {
            Some(entry) => {
                entry.hits = (entry.hits + 1).min(MAX_HITS);
                true
            }
            None => false,
        }
    }

    /// Stores `key` (not cached) of `size` bytes, evicting in the index's order to make
    /// room; false, evicting nothing, when it is larger than the whole budget.
    pub(super) fn insert(&mut self, key: u64, size: u64) -> bool {
        if size > self.capacity {
            return false;
        }
        while self.used() + size > self.capacity {
            if self.evict().is_none() {
                break;
            }
        }
        let remembered = self
            .ghost
            .as_mut()
            .is_some_and(|g| g.keys.take(ghost_key(key), &g.total));
        let turn = self.next_turn();
        let entry = Entry {
            size,
            hits: 0,
            main: remembered,
            turn,
        };
        if remembered {
            self.main.push_back((key, turn));
            self.main_bytes += size;
        } else {
            self.small.push_back((key, turn));
            self.small_bytes += size;
        }
        self.entries.insert(key, entry);
        true
    }

    /// Evicts one entry as `Index::pop_victim` does and returns its size: the queue is
    /// chosen once, by the small queue's share; its old end is walked, entries with hits
    /// moved on (from the small queue to the main one, or around the main CLOCK with one
    /// hit less) until one without hits leaves.
    fn evict(&mut self) -> Option<u64> {
        let indexed = self.small_bytes + self.main_bytes;
        let mut small = self.small_bytes > indexed / self.small_divisor;
        loop {
            let Some((key, turn)) = self.queue(small).pop_front() else {
                if self.queue(!small).is_empty() {
                    return None;
                }
                small = !small;
                continue;
            };
            let Some(entry) = self.entries.get(&key).copied().filter(|e| e.turn == turn) else {
                continue; // moved on or removed since: a stale item
            };
            if entry.hits == 0 {
                self.remove_entry(key, entry);
                if small && let Some(g) = &mut self.ghost {
                    let capacity = self.capacity / 10 * GHOST_TENTHS;
                    g.keys
                        .remember(ghost_key(key), entry.size, &g.total, capacity);
                }
                return Some(entry.size);
            }
            self.pass(key, entry, small);
        }
    }

    /// Moves an entry with hits on: from the small queue to the main one's new end with its
    /// hits spent, or to the main queue's new end with one hit less.
    fn pass(&mut self, key: u64, entry: Entry, from_small: bool) {
        let turn = self.next_turn();
        let hits = if from_small { 0 } else { entry.hits - 1 };
        if from_small {
            self.small_bytes -= entry.size;
            self.main_bytes += entry.size;
        }
        self.entries.insert(
            key,
            Entry {
                hits,
                main: true,
                turn,
                ..entry
            },
        );
        self.main.push_back((key, turn));
    }

    /// Counts `entry` of `key` out.
    fn remove_entry(&mut self, key: u64, entry: Entry) {
        self.entries.remove(&key);
        if entry.main {
            self.main_bytes -= entry.size;
        } else {
            self.small_bytes -= entry.size;
        }
    }

    /// Forgets every key above `limit` (a lower sampling rate no longer samples them) and
    /// shrinks the budget to `capacity`, evicting in order until the rest fits.
    pub(super) fn rescale(&mut self, limit: u64, capacity: u64) {
        let gone: Vec<(u64, Entry)> = self
            .entries
            .iter()
            .filter(|(key, _)| **key > limit)
            .map(|(key, entry)| (*key, *entry))
            .collect();
        for (key, entry) in gone {
            self.remove_entry(key, entry);
        }
        self.small.retain(|(key, _)| *key <= limit);
        self.main.retain(|(key, _)| *key <= limit);
        self.capacity = capacity;
        while self.used() > self.capacity && self.evict().is_some() {}
    }

    fn queue(&mut self, small: bool) -> &mut VecDeque<(u64, u64)> {
        if small {
            &mut self.small
        } else {
            &mut self.main
        }
    }

    fn next_turn(&mut self) -> u64 {
        self.turns += 1;
        self.turns
    }

    fn used(&self) -> u64 {
        self.small_bytes + self.main_bytes
    }

    /// The budget in bytes.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Objects cached.
    pub(super) fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// The objects the cache holds when full, at the current mean size (as
    /// `Index::objects_when_full`, by which `rotate = "auto"` sizes the filters).
    pub(super) fn objects_when_full(&self) -> u64 {
        let used = self.used();
        if used == 0 {
            return 0;
        }
        let scaled = u128::from(self.len()) * u128::from(self.capacity) / u128::from(used);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    }

    /// Keys held: cached ones and the ghost's.
    pub(super) fn keys(&self) -> u64 {
        self.len() + self.ghost.as_ref().map_or(0, |g| g.keys.len() as u64)
    }

    /// Bytes allocated: the map's buckets and the queues' slots; the ghost's at the same
    /// cost per key as the map (it keeps a map and a queue of its own).
    pub(super) fn memory_bytes(&self) -> u64 {
        let bucket = (size_of::<(u64, Entry)>() + 1) as u64;
        let item = size_of::<(u64, u64)>() as u64;
        let queues = (self.small.capacity() + self.main.capacity()) as u64;
        let ghost = self.ghost.as_ref().map_or(0, |g| g.keys.len() as u64);
        self.entries.capacity() as u64 * bucket + queues * item + ghost * (bucket + item)
    }
}

/// The store's ghost keeps the high 64 bits of a store hash; a sample key is 64 bits,
/// which stands for the store hash of the object it samples.
fn ghost_key(key: u64) -> StoreHash {
    StoreHash(u128::from(key) << 64)
}

#[cfg(test)]
mod tests {
    use rand::rngs::Xoshiro256PlusPlus;
    use rand::{RngExt, SeedableRng};

    use super::*;
    use secondhit_store::FillId;
    use secondhit_store::SMALL_SHARE;
    use secondhit_store::index::{Fill, Index, Provenance};

    /// A seeded trace of (key, size): a skewed popular set and a stream of new keys.
    fn trace(requests: usize) -> Vec<(u64, u64)> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut fresh = 1_000_000u64;
        (0..requests)
            .map(|_| {
                let key = if rng.random_bool(0.4) {
                    fresh += 1;
                    fresh
                } else {
                    let r: f64 = rng.random();
                    (r * r * r * 3_000.0) as u64
                };
                (key, 1_000 + (key * 7_919) % 9_000)
            })
            .collect()
    }

    /// The hits of the store's index over `trace`, offered as the simulator offers them.
    fn index_hits(trace: &[(u64, u64)], capacity: u64, ghost: bool) -> Vec<bool> {
        let index = Index::new(capacity);
        index.keep_ghost(ghost);
        let mut hits = Vec::with_capacity(trace.len());
        for (i, &(key, size)) in trace.iter().enumerate() {
            let key_hash = StoreHash(u128::from(key) << 64 | u128::from(key));
            let hit = index.touch(key_hash).is_some();
            hits.push(hit);
            if hit {
                continue;
            }
            while !index.try_reserve(size) {
                let (_, evicted) = index.pop_victim().expect("the budget holds every object");
                index.release_object(evicted.size);
            }
            let fill = Fill {
                fill_id: FillId(i as u64),
                size,
            };
            index.place(key_hash, fill, Provenance::Live);
            index.commit_reservation(size, size);
        }
        hits
    }

    fn mini_hits(trace: &[(u64, u64)], capacity: u64, ghost: bool) -> Vec<bool> {
        let mut mini = MiniIndex::new(capacity, SMALL_SHARE, ghost);
        trace
            .iter()
            .map(|&(key, size)| {
                let hit = mini.touch(key);
                if !hit {
                    assert!(mini.insert(key, size));
                }
                hit
            })
            .collect()
    }

    #[test]
    fn the_miniature_hits_exactly_where_the_stores_index_hits() {
        let trace = trace(60_000);
        for capacity in [200_000, 2_000_000] {
            let (full, mini) = (
                index_hits(&trace, capacity, false),
                mini_hits(&trace, capacity, false),
            );
            let first_difference = full.iter().zip(&mini).position(|(a, b)| a != b);
            assert_eq!(first_difference, None, "capacity {capacity}");
            assert!(
                full.iter().filter(|&&h| h).count() > 1_000,
                "the trace hits"
            );
        }
    }

    #[test]
    fn with_the_ghost_the_miniature_hits_as_often_as_the_stores_index() {
        // The store's ghost is spread over shards that each forget their own oldest keys:
        // nearly, not exactly, the oldest of all.
        let trace = trace(60_000);
        let count = |hits: Vec<bool>| hits.into_iter().filter(|&h| h).count() as f64;
        let full = count(index_hits(&trace, 500_000, true));
        let mini = count(mini_hits(&trace, 500_000, true));
        let without = count(mini_hits(&trace, 500_000, false));
        assert!((mini / full - 1.0).abs() < 0.02, "{mini} vs {full}");
        assert!(
            mini > without,
            "the ghost changes hits: {mini} vs {without}"
        );
    }

    #[test]
    fn rescaling_forgets_keys_above_the_limit_and_fits_the_new_budget() {
        let mut mini = MiniIndex::new(10_000, SMALL_SHARE, true);
        for key in 0..10 {
            assert!(mini.insert(key * 100, 1_000));
        }
        assert!(!mini.insert(5, 20_000), "larger than the budget");
        assert_eq!(mini.len(), 10, "and nothing evicted for it");
        mini.rescale(450, 3_000);
        assert_eq!(mini.capacity(), 3_000);
        assert!(mini.len() <= 3);
        assert!(!mini.touch(900), "above the limit");
        assert!((0..10).any(|key| mini.touch(key * 100)));
        assert!(mini.used() <= 3_000);
    }
}
