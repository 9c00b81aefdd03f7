//! The rotating pair of Bloom filters that remembers first requests for a while.
//!
//! A single Bloom filter only fills up: it cannot forget, and its false-positive rate climbs
//! until every key looks "seen". The aging Bloom filter with two active buffers (Yoon, "Aging
//! Bloom Filter with Two Active Buffers for Dynamic Sets", IEEE TKDE 2010; used for exactly this
//! purpose by Akamai, Maggs & Sitaraman, SIGCOMM CCR 2015) keeps two filters:
//!
//! - `current` receives every insert; `previous` is only read.
//! - A key is *seen* if either filter holds it. A key found only in `previous` is copied into
//!   `current`, so a key requested in every generation is never forgotten.
//! - Once `current` has taken `generation_size` new keys (or `max_age` has passed since the
//!   generation began), `previous` is cleared and the two swap roles.
//!
//! So a key recorded once is remembered for at least one and at most two generations, memory is
//! fixed, and the pair's false-positive rate runs from about `p` just after a rotation (previous
//! full, current empty) to about `2p` just before the next (both full).
//!
//! # Concurrency
//! The filters are arrays of atomic words (see [`super::bloom`]), so checks and inserts need no
//! lock of their own. A `std::sync::RwLock` guards the *rotation state*: which filter is current,
//! the generation number and start time, and the rotation counters. Every check holds the read
//! lock for its whole duration, so checks run in parallel with each other; a rotation takes the
//! write lock, so it never overlaps a check. That gives each check one consistent
//! (current, previous) pair: without it a check could read `current`, lose the CPU while the pair
//! rotates, and then insert into a filter that has meanwhile become `previous` (shortening that
//! key's memory to one generation) or read a filter that is being cleared. The cost is an atomic
//! read-modify-write on the lock word per check and a pause of all checks while the old filter is
//! cleared (`O(m/64)` stores); a lock-free rotation is planned and will not change this API.
//!
//! The rule that matters: a key recorded (its `check_and_record` returned) before another
//! check begins is found by that check unless two rotations happened in between. The insert
//! happens-before the check, and a load cannot see a value older in a word's modification order
//! than a write that happens-before it, so `Relaxed` bit operations suffice; the bits can only be
//! cleared by the second rotation after the insert (the first only makes their filter
//! `previous`), and the read/write lock orders rotations with checks. The insert counter is a
//! plain `Relaxed` counter: it publishes no other data, and it is reset only under the write lock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use super::bloom::{BloomFilter, FilterParams};
use super::{Admission, AdmitReason, Decision, FilterHash, RejectReason};

/// The rotating pair: `current` receives inserts, `previous` is read-only. A key is seen if either filter holds it; a key found only in previous is copied into current (Yoon 2010), so a key requested in every generation is never forgotten. current's insert count grows by one whenever an insert sets at least one new bit (copies included); when it reaches params.generation_size, or when max_age has passed since the generation began, previous is cleared and the two swap (previous ← current, current ← the cleared one), count reset, generation start reset.
pub struct AgingPair {
    /// Sizing of each filter (normalised, so every field is in range).
    params: FilterParams,
    /// The longest a generation lasts, however few keys it took.
    max_age: Duration,
    /// The filters and everything a rotation changes; see the module docs for the locking.
    state: RwLock<State>,
}

/// Everything a rotation changes. Read under the read lock, changed only under the write lock
/// (except the filters' bits and `current_inserts`, which are atomics updated by checks).
struct State {
    /// The two filters; `filters[current]` is current, the other is previous.
    filters: [BloomFilter; 2],
    /// Index of the current filter (0 or 1).
    current: usize,
    /// Inserts into the current filter that set at least one new bit in this generation.
    current_inserts: AtomicU64,
    /// Counts rotations; lets a thread that saw a rotation due skip it if another did it first.
    generation: u64,
    /// When the current generation began.
    generation_start: Instant,
    /// Rotations because `current` took `generation_size` keys.
    rotations_on_fill: u64,
    /// Rotations because `max_age` passed.
    rotations_on_age: u64,
}

/// A snapshot of the pair's fill and rotation counters, for metrics and tests.
#[derive(Clone, Debug)]
pub struct PairStats {
    /// New keys the current filter has taken in this generation.
    pub current_inserts: u64,
    /// New keys a generation takes before the pair rotates.
    pub generation_size: u64,
    /// Rotations because the current filter was full.
    pub rotations_on_fill: u64,
    /// Rotations because the generation was older than `max_age`.
    pub rotations_on_age: u64,
    /// Bits set in the current filter.
    pub current_bits_set: u64,
    /// Bits set in the previous filter.
    pub previous_bits_set: u64,
}

/// Why the pair rotated.
#[derive(Clone, Copy, Debug)]
enum Cause {
    /// The current filter took `generation_size` new keys.
    Fill,
    /// The generation was older than `max_age`.
    Age,
}

impl Cause {
    /// Token for logs.
    fn as_str(self) -> &'static str {
        match self {
            Cause::Fill => "fill",
            Cause::Age => "age",
        }
    }
}

impl AgingPair {
    /// An empty pair of filters sized by `params`; the first generation starts at `Instant::now()`.
    pub fn new(params: FilterParams, max_age: Duration) -> Self {
        let params = params.normalized();
        let p = params.false_positive_rate;
        tracing::info!(
            bits = params.bits,
            probes = params.probes,
            bytes_per_filter = params.filter_bytes(),
            generation_size = params.generation_size,
            max_age_secs = max_age.as_secs_f64(),
            false_positive_rate = p,
            // Just after a rotation only `previous` is full; just before the next both are, and
            // a key is a false positive if either filter says yes.
            pair_false_positive_rate_after_rotation = p,
            pair_false_positive_rate_before_rotation = 1.0 - (1.0 - p) * (1.0 - p),
            "admission filter pair ready"
        );
        AgingPair {
            params,
            max_age,
            state: RwLock::new(State {
                filters: [BloomFilter::new(&params), BloomFilter::new(&params)],
                current: 0,
                current_inserts: AtomicU64::new(0),
                generation: 0,
                generation_start: Instant::now(),
                rotations_on_fill: 0,
                rotations_on_age: 0,
            }),
        }
    }

    /// [`Admission::check_and_record`] with an explicit clock reading, the deterministic entry
    /// point for tests; the trait method calls it with `Instant::now()`.
    pub fn check_and_record_at(&self, hash: FilterHash, now: Instant) -> Decision {
        let mut state = self.read_state();
        // Age first, so that a request arriving after the generation expired lands in the new
        // one rather than in a filter about to become `previous`.
        if now.saturating_duration_since(state.generation_start) >= self.max_age {
            let generation = state.generation;
            drop(state);
            self.rotate(generation, Cause::Age, now);
            state = self.read_state();
        }

        let current = &state.filters[state.current];
        // Plain loads first: a hot key is already in `current`, and skipping the insert spares
        // the cache line a read-modify-write that every core would fight over.
        if current.contains(hash) {
            return Decision::Admit(AdmitReason::SeenBefore);
        }
        let seen = state.filters[1 - state.current].contains(hash);
        // Copying a key found only in `previous` keeps it alive for another generation.
        let full = current.insert(hash)
            && state.current_inserts.fetch_add(1, Ordering::Relaxed) + 1
                >= self.params.generation_size;
        let generation = state.generation;
        drop(state);
        if full {
            self.rotate(generation, Cause::Fill, now);
        }
        if seen {
            Decision::Admit(AdmitReason::SeenBefore)
        } else {
            Decision::Reject(RejectReason::FirstSight)
        }
    }

    /// The sizing in use (with every field in range).
    pub fn params(&self) -> FilterParams {
        self.params
    }

    /// Current fill and rotation counters (counts bits, so `O(m/64)`).
    pub fn stats(&self) -> PairStats {
        let state = self.read_state();
        PairStats {
            current_inserts: state.current_inserts.load(Ordering::Relaxed),
            generation_size: self.params.generation_size,
            rotations_on_fill: state.rotations_on_fill,
            rotations_on_age: state.rotations_on_age,
            current_bits_set: state.filters[state.current].bits_set(),
            previous_bits_set: state.filters[1 - state.current].bits_set(),
        }
    }

    /// Rotates the pair if it is still in generation `seen_generation` (threads that all saw the
    /// same rotation due queue up here; only the first one rotates).
    fn rotate(&self, seen_generation: u64, cause: Cause, now: Instant) {
        // Poisoning can be ignored: nothing inside these critical sections can panic, so the
        // state is consistent even if some other thread panicked while holding the lock.
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        if state.generation != seen_generation {
            return;
        }
        let inserts = *state.current_inserts.get_mut();
        let age = now.saturating_duration_since(state.generation_start);
        let old_previous = 1 - state.current;
        state.filters[old_previous].clear();
        state.current = old_previous;
        *state.current_inserts.get_mut() = 0;
        state.generation += 1;
        state.generation_start = now;
        match cause {
            Cause::Fill => state.rotations_on_fill += 1,
            Cause::Age => state.rotations_on_age += 1,
        }
        let generation = state.generation;
        drop(state);
        tracing::debug!(
            cause = cause.as_str(),
            generation,
            inserts,
            age_secs = age.as_secs_f64(),
            "admission filters rotated"
        );
    }

    /// The read lock (see [`AgingPair::rotate`] on poisoning).
    fn read_state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Admission for AgingPair {
    /// `Admit(SeenBefore)` if the key is in either filter, else `Reject(FirstSight)`; always records it.
    fn check_and_record(&self, hash: FilterHash) -> Decision {
        self.check_and_record_at(hash, Instant::now())
    }

    /// Both filters' bit arrays.
    fn memory_bytes(&self) -> u64 {
        2 * self.params.filter_bytes()
    }

    fn name(&self) -> &'static str {
        "second-hit"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh3::xxh3_128;

    const HOUR: Duration = Duration::from_secs(3600);
    const FIRST: Decision = Decision::Reject(RejectReason::FirstSight);
    const SEEN: Decision = Decision::Admit(AdmitReason::SeenBefore);

    /// Deterministic test keys: the xxh3-128 of a counter.
    fn key(i: u64) -> FilterHash {
        FilterHash(xxh3_128(&i.to_le_bytes()))
    }

    /// Roomy filters (false positives negligible) that rotate every `generation_size` new keys.
    fn small_generations(generation_size: u64) -> FilterParams {
        FilterParams {
            generation_size,
            ..FilterParams::for_expected_keys(1_000, 0.001)
        }
    }

    /// Records fresh keys (from `*next` upwards) until the pair has rotated on fill once more.
    fn fill_until_rotation(pair: &AgingPair, next: &mut u64, now: Instant) {
        let before = pair.stats().rotations_on_fill;
        for _ in 0..10_000 {
            pair.check_and_record_at(key(*next), now);
            *next += 1;
            if pair.stats().rotations_on_fill > before {
                return;
            }
        }
        panic!("no rotation after 10000 fresh keys");
    }

    #[test]
    fn first_sight_rejected_second_admitted() {
        let params = FilterParams::for_expected_keys(1_000, 0.01);
        let pair = AgingPair::new(params, HOUR);
        assert_eq!(pair.check_and_record(key(1)), FIRST);
        assert_eq!(pair.check_and_record(key(1)), SEEN);
        assert_eq!(pair.check_and_record(key(1)), SEEN);
        assert_eq!(pair.check_and_record(key(2)), FIRST);
        let stats = pair.stats();
        assert_eq!(stats.current_inserts, 2);
        assert_eq!(stats.previous_bits_set, 0);
        assert!(stats.current_bits_set > 0);
        assert_eq!(pair.params(), params);
        assert_eq!(pair.memory_bytes(), 2 * params.filter_bytes());
        assert_eq!(pair.name(), "second-hit");
    }

    #[test]
    fn recorded_once_survives_one_rotation_and_is_forgotten_after_two() {
        let t0 = Instant::now();
        let mut next = 100;

        let pair = AgingPair::new(small_generations(4), HOUR);
        assert_eq!(pair.check_and_record_at(key(1), t0), FIRST);
        fill_until_rotation(&pair, &mut next, t0);
        assert_eq!(
            pair.check_and_record_at(key(1), t0),
            SEEN,
            "still in previous"
        );

        let pair = AgingPair::new(small_generations(4), HOUR);
        assert_eq!(pair.check_and_record_at(key(1), t0), FIRST);
        fill_until_rotation(&pair, &mut next, t0);
        fill_until_rotation(&pair, &mut next, t0);
        assert_eq!(pair.stats().rotations_on_fill, 2);
        assert_eq!(pair.check_and_record_at(key(1), t0), FIRST, "forgotten");
    }

    #[test]
    fn key_seen_every_generation_is_never_forgotten() {
        let t0 = Instant::now();
        let pair = AgingPair::new(small_generations(8), HOUR);
        let mut next = 100;
        assert_eq!(pair.check_and_record_at(key(1), t0), FIRST);
        for generation in 0..50 {
            fill_until_rotation(&pair, &mut next, t0);
            assert_eq!(
                pair.check_and_record_at(key(1), t0),
                SEEN,
                "lost after rotation {generation}"
            );
        }
        assert_eq!(pair.stats().rotations_on_fill, 50);
    }

    #[test]
    fn rotates_on_max_age() {
        let minute = Duration::from_secs(60);
        let pair = AgingPair::new(FilterParams::for_expected_keys(1_000, 0.001), minute);
        // Read after construction, so the first generation began at or before t0.
        let t0 = Instant::now();
        assert_eq!(pair.check_and_record_at(key(1), t0), FIRST);
        assert_eq!(pair.check_and_record_at(key(2), t0 + minute / 2), FIRST);
        assert_eq!(pair.stats().rotations_on_age, 0);

        // The generation began at t0, so this request starts the next one and is recorded in it.
        assert_eq!(pair.check_and_record_at(key(3), t0 + minute), FIRST);
        let stats = pair.stats();
        assert_eq!((stats.rotations_on_age, stats.current_inserts), (1, 1));
        // Key 2 lives on in previous and is copied forward.
        assert_eq!(pair.check_and_record_at(key(2), t0 + minute), SEEN);

        // The second generation began at t0 + 1 min; at t0 + 2 min the first one is cleared.
        assert_eq!(pair.check_and_record_at(key(4), t0 + 2 * minute), FIRST);
        assert_eq!(pair.stats().rotations_on_age, 2);
        assert_eq!(
            pair.check_and_record_at(key(1), t0 + 2 * minute),
            FIRST,
            "aged out"
        );
        assert_eq!(pair.check_and_record_at(key(2), t0 + 2 * minute), SEEN);
        assert_eq!(pair.stats().rotations_on_fill, 0);
    }

    #[test]
    fn rotation_counters_by_cause() {
        let minute = Duration::from_secs(60);
        let pair = AgingPair::new(small_generations(4), minute);
        let t0 = Instant::now();
        let mut next = 100;
        fill_until_rotation(&pair, &mut next, t0);
        fill_until_rotation(&pair, &mut next, t0);
        // A fill rotation restarts the clock, so one minute after t0 is one age rotation.
        pair.check_and_record_at(key(1), t0 + minute);
        // A clock reading older than the generation start (another thread's) changes nothing.
        pair.check_and_record_at(key(2), t0);
        let stats = pair.stats();
        assert_eq!((stats.rotations_on_fill, stats.rotations_on_age), (2, 1));
        assert_eq!(stats.generation_size, 4);
        assert_eq!(stats.current_inserts, 2);
    }

    #[test]
    fn concurrent_disjoint_keys_are_all_recorded() {
        const THREADS: u64 = 8;
        const PER_THREAD: u64 = 5_000;
        let pair = AgingPair::new(FilterParams::for_expected_keys(100_000, 0.01), HOUR);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let pair = &pair;
                s.spawn(move || {
                    for i in 0..PER_THREAD {
                        pair.check_and_record(key(t * 1_000_000 + i));
                    }
                });
            }
        });
        let stats = pair.stats();
        assert_eq!(stats.rotations_on_fill + stats.rotations_on_age, 0);
        // Only a false positive (a key already "present") skips its insert; there are few.
        let total = THREADS * PER_THREAD;
        assert!(stats.current_inserts <= total && stats.current_inserts >= total - 100);
        for t in 0..THREADS {
            for i in 0..PER_THREAD {
                assert_eq!(pair.check_and_record(key(t * 1_000_000 + i)), SEEN);
            }
        }
    }
}
