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
//! - When the generation ends, `previous` is dropped, `current` becomes `previous`, and an
//!   empty filter becomes `current`.
//!
//! A generation ends on the first of: its target of new keys is reached ([`Cause::Fill`]; the
//! target is `generation_size`, or under `rotate = "auto"` the number of objects in the disk
//! cache clamped to `[auto_floor, generation_size]`); `max_age` has passed since it began
//! ([`Cause::Age`]); more than 60% of its bits are set although the count says it has room
//! ([`Cause::Saturation`] — a filter past that point answers "yes" too often, whatever the
//! count says; it guards against a count that is wrong, e.g. restored against other bits,
//! or a generation size too large for the bits). The fill is estimated from 32 blocks every
//! ~1% of fill's worth of inserts, not counted on every insert (that would be a second
//! atomic read-modify-write on the hot path).
//! An idle gap of `2 · max_age` or more forgets *both* generations ([`Cause::Idle`]): under
//! steady traffic no key older than two generations is remembered, and a quiet night should
//! not change that — one rotation would keep the night's last generation for another
//! `max_age`.
//!
//! So a key recorded once is remembered for at least one and at most two generations, memory
//! is fixed, and the pair's false-positive rate runs from about `p` just after a rotation
//! (previous full, current empty) to about `2p` just before the next (both full).
//!
//! # Concurrency: no lock on the request path
//! A [`Generation`] is an immutable record of `(current, previous, start, target)` plus its
//! insert counter; the live one sits in an [`ArcSwap`]. A check loads it (lock-free: an
//! atomic load and a per-thread slot, no shared write), probes both filters and inserts into
//! `current` — the filters' bits are atomics ([`super::bloom`]). A rotation builds the next
//! `Generation` and publishes it with one pointer swap; checks that loaded the old one finish
//! on it undisturbed. Rotation takes no lock either: every thread that finds a rotation due
//! builds the next generation and tries to install it with a compare-and-swap against the
//! generation it saw; one wins, the others drop their copy and carry on. (A first version
//! serialised rotations with a `try_lock`ed mutex; under 8 threads on 2 cores the property
//! test caught a preempted lock holder letting a generation take three times its target and
//! saturate. With the compare-and-swap any thread can finish the rotation.) The new `current`
//! comes from a pool of spare, already-cleared filters; the retired `previous` goes to a
//! background thread ([`cleaner`]) that waits until no check holds it any more, clears it and
//! returns it to the pool. So no request ever waits for a rotation, and clearing — `O(m)` —
//! happens off the request path. (If the pool is empty because rotations come faster than
//! the cleaner, the rotating thread allocates a new filter rather than wait.)
//!
//! # Why a recorded key is not lost: no false negative within two rotations
//! Claim: if `check_and_record(x)` ran while generation `g` was live (it loaded `g`) and
//! returned before a check of `x` began, and that check loads generation `g` or `g + 1`, the
//! check finds `x`.
//!
//! 1. The record loaded `g` and set `x`'s bits in `F = g.current` (or found them already set),
//!    before it returned.
//! 2. The check loads `g` or `g + 1`; in both, `F` is `current` or `previous`, so the check
//!    reads `F`'s block for `x`.
//! 3. The record's `fetch_or`s happen-before the check's loads (they are sequenced before the
//!    record's return, which happens-before the check by assumption). By write-read
//!    coherence a load cannot see a value older in the word's modification order than a
//!    store that happens-before it; so each load sees those bits, unless a later
//!    modification removed them. (If the record found the bits already set, its own loads
//!    saw them, and by read-read coherence the check's later loads cannot see an older
//!    value either.)
//! 4. Only [`BloomFilter::clear`] removes bits, and the cleaner calls it only after
//!    `Arc::try_unwrap` proved it holds the *last* reference to `F`. The check holds its
//!    generation (an `Arc`, via its `arc_swap` guard: a swap converts outstanding guards of
//!    the old value into counted references before it returns), and that generation holds
//!    `F`. So `F` is not cleared while the check reads it; and it was not cleared between
//!    the record and the check either, because a cleared filter only ever re-enters as the
//!    `current` of a *new* generation (≥ `g + 3`), never as part of `g` or `g + 1`.
//!
//! In words: a key recorded in the current or the previous generation is found. Loading
//! generation `g + 2` or later means the pair rotated twice since the record began, and the
//! key may be forgotten — which is the design. The property tests check this with 8 threads
//! and rotations under way.
//!
//! # Memory orderings
//! - Filter bits: `Relaxed` (see [`super::bloom`]).
//! - `Generation::inserts` and the rotation counters: `Relaxed` counters; they publish no other
//!   data, and a rotation decided on a slightly stale count is merely a request late or early.
//! - The generation pointer: `arc_swap`'s own orderings (a `SeqCst` swap, acquire loads), which
//!   publish the new `Generation`'s fields — and, transitively, the clearing of its spare
//!   filter: the cleaner clears, then pushes into the pool under a `Mutex` (release); the
//!   rotating thread pops under the `Mutex` (acquire) and publishes through the swap.
//! - Clearing: `Arc::try_unwrap` succeeds only after every other reference was dropped;
//!   `Arc`'s release decrements and acquire on success order every insert into the filter
//!   before the clear.
//! - The coarse clock ([`cleaner`]): a `Relaxed` millisecond count; a stale reading only
//!   notices `max_age` a tick late.

mod cleaner;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use super::bloom::{BloomFilter, FilterParams};
use super::stats::{FilterStats, PairStats, RotationCounts};
use super::{Admission, AdmitReason, Decision, FilterHash, RejectReason};
use cleaner::Spares;

/// A source of the number of objects in the disk cache (for `rotate = "auto"`).
pub type ObjectCount = Arc<dyn Fn() -> u64 + Send + Sync>;

/// How a generation's target of new keys is chosen.
#[derive(Clone)]
pub enum Rotation {
    /// Always `generation_size` (`rotate = "fill"`).
    Fill,
    /// The number of objects in the disk cache at the generation's start, clamped to
    /// `[auto_floor(generation_size), generation_size]` (`rotate = "auto"`).
    Auto(ObjectCount),
}

/// Blocks read to estimate the current filter's fill (see [`BloomFilter::sampled_fill`]).
const SATURATION_SAMPLE: usize = 32;

/// Fraction of bits set at which a filter counts as saturated and the pair rotates whatever
/// its count says. A filter at its design load has about half its bits set (that is what the
/// optimal `k` does); 60% is well past it (the false-positive rate is then about `0.6^k`, 3×
/// the 1% target at `k = 6`).
pub const SATURATION: f64 = 0.6;

/// Why the pair rotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The current generation took its target of new keys.
    Fill,
    /// The current generation was older than `max_age`.
    Age,
    /// More than [`SATURATION`] of the current filter's bits were set.
    Saturation,
    /// No request for `2 · max_age` or more: both generations were forgotten.
    Idle,
}

impl Cause {
    /// Token for logs and metrics: "fill" | "age" | "saturation" | "idle".
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Fill => "fill",
            Cause::Age => "age",
            Cause::Saturation => "saturation",
            Cause::Idle => "idle",
        }
    }

    /// Index into the rotation counters.
    fn index(self) -> usize {
        self as usize
    }
}

/// The smallest generation `rotate = "auto"` uses: 1/64 of the largest, at least 1024 keys
/// (but never more than the largest). An empty cache would otherwise give generations of
/// zero keys, which remember nothing and so admit nothing.
pub fn auto_floor(generation_size: u64) -> u64 {
    (generation_size / 64).max(1024).min(generation_size)
}

/// The target of new keys for a generation starting now, for the largest `generation_size`.
fn target(rotation: &Rotation, generation_size: u64) -> u64 {
    match rotation {
        Rotation::Fill => generation_size,
        Rotation::Auto(objects) => objects().clamp(auto_floor(generation_size), generation_size),
    }
}

/// One generation of the pair; immutable except for the atomics inside.
struct Generation {
    /// Counts rotations since the pair began (continued across restarts).
    number: u64,
    /// When this generation began.
    start: Instant,
    /// New keys this generation takes before a fill rotation.
    target: u64,
    /// Receives every insert.
    current: Arc<BloomFilter>,
    /// New keys `current` has taken (checks that found some of their bits missing, copies included).
    inserts: AtomicU64,
    /// The previous generation's filter, read only; `None` when there is none (at the first
    /// start, or after an idle gap forgot it).
    previous: Option<Previous>,
}

/// The previous generation as the current one sees it.
struct Previous {
    filter: Arc<BloomFilter>,
    /// When that generation began.
    start: Instant,
    /// New keys it had taken when it ended.
    inserts: u64,
}

/// The rotating pair: see the module docs.
pub struct AgingPair {
    /// Sizing of each filter (normalised, so every field is in range).
    params: FilterParams,
    /// The longest a generation lasts, however few keys it took.
    max_age: Duration,
    /// How each generation's target of new keys is chosen.
    rotation: Rotation,
    /// The current filter's fill is sampled once every this many counted inserts (a power of
    /// two): about the inserts that raise the fill by 1%, at most 4096.
    saturation_check_mask: u64,
    /// The live generation.
    live: ArcSwap<Generation>,
    /// Cleared filters for the next rotations, and the thread that clears retired ones.
    spares: Spares,
    /// Rotations by cause, indexed by [`Cause::index`].
    rotations: [AtomicU64; 4],
}

/// A copy of the pair's state, for snapshots (see `persist`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PairImage {
    /// The live generation's number.
    pub generation: u64,
    /// The current filter.
    pub current: FilterImage,
    /// The previous filter, if any.
    pub previous: Option<FilterImage>,
}

/// One filter of a [`PairImage`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct FilterImage {
    /// The bit array, as [`BloomFilter::words`] gives it.
    pub words: Vec<u64>,
    /// New keys its generation took.
    pub inserts: u64,
    /// How long ago its generation began.
    pub age: Duration,
}

impl AgingPair {
    /// An empty pair of filters sized by `params`; the first generation starts at `now`.
    /// Logs the sizing (m, k, bytes, modelled per-filter and pair rates) at info.
    pub fn new(params: FilterParams, max_age: Duration, rotation: Rotation, now: Instant) -> Self {
        let params = params.normalized();
        let (after_rotation, before_rotation) = params.pair_false_positive_rates();
        tracing::info!(
            bits = params.bits,
            probes = params.probes,
            bytes_per_filter = params.filter_bytes(),
            // Two filters answer; a third, cleared in the background, waits for the next rotation.
            bytes_resident = 3 * params.filter_bytes(),
            bits_per_key = params.bits_per_key(),
            generation_size = params.generation_size,
            rotate = match rotation {
                Rotation::Fill => "fill",
                Rotation::Auto(_) => "auto",
            },
            max_age_secs = max_age.as_secs_f64(),
            target_false_positive_rate = params.false_positive_rate,
            expected_false_positive_rate = after_rotation,
            pair_false_positive_rate_after_rotation = after_rotation,
            pair_false_positive_rate_before_rotation = before_rotation,
            "admission filter pair ready"
        );
        let spares = Spares::new(params);
        AgingPair {
            params,
            max_age,
            saturation_check_mask: (params.bits / (100 * u64::from(params.probes)))
                .clamp(1, 4096)
                .next_power_of_two()
                - 1,
            live: ArcSwap::from_pointee(Generation {
                number: 0,
                start: now,
                target: target(&rotation, params.generation_size),
                current: spares.take(),
                inserts: AtomicU64::new(0),
                previous: None,
            }),
            spares,
            rotations: Default::default(),
            rotation,
        }
    }

    /// [`Admission::check_and_record`] with an explicit clock reading, the deterministic entry
    /// point for tests; the trait method calls it with `Instant::now()`.
    pub fn check_and_record_at(&self, hash: FilterHash, now: Instant) -> Decision {
        let mut generation = self.live.load();
        // Age first, so that a request arriving after the generation expired lands in the new
        // one rather than in a filter about to become `previous`.
        if let Some(cause) = self.age_cause(&generation, now) {
            self.rotate(&generation, cause, now);
            generation = self.live.load();
        }
        let probe = generation.current.probe(hash);
        // Both blocks are read before either is tested, so the two cache misses overlap.
        let previous = generation.previous.as_ref().map(|p| &*p.filter);
        let (absent, in_previous) = generation.current.absent_here_and_in(previous, &probe);
        if absent.is_empty() {
            return Decision::Admit(AdmitReason::SeenBefore);
        }
        // Copying a key found only in `previous` keeps it alive for another generation. The
        // key counts as new when `current` lacked some of its bits; two threads inserting the
        // same new key at once both count it, which only brings the rotation forward a key.
        generation.current.insert_absent(&absent);
        let inserts = generation.inserts.fetch_add(1, Ordering::Relaxed) + 1;
        if inserts >= generation.target {
            self.rotate(&generation, Cause::Fill, now);
        } else if inserts & self.saturation_check_mask == 0
            && generation.current.sampled_fill(SATURATION_SAMPLE) >= SATURATION
        {
            self.rotate(&generation, Cause::Saturation, now);
        }
        if in_previous {
            Decision::Admit(AdmitReason::SeenBefore)
        } else {
            Decision::Reject(RejectReason::FirstSight)
        }
    }

    /// Whether either filter holds `hash`, without recording it (for tests and tools).
    pub fn contains(&self, hash: FilterHash) -> bool {
        let generation = self.live.load();
        generation.current.contains(hash)
            || generation
                .previous
                .as_ref()
                .is_some_and(|p| p.filter.contains(hash))
    }

    /// The sizing in use (with every field in range).
    pub fn params(&self) -> FilterParams {
        self.params
    }

    /// The live generation's number (rotations since the pair began, across restarts).
    pub fn generation(&self) -> u64 {
        self.live.load().number
    }

    /// Fill, estimates and rotation counters (counts bits, so `O(m/64)`).
    pub fn stats_at(&self, now: Instant) -> PairStats {
        let generation = self.live.load_full();
        let current = FilterStats::of(
            &generation.current,
            generation.inserts.load(Ordering::Relaxed),
            now.saturating_duration_since(generation.start),
        );
        let previous = generation
            .previous
            .as_ref()
            .map(|p| FilterStats::of(&p.filter, p.inserts, now.saturating_duration_since(p.start)));
        let count = |cause: Cause| self.rotations[cause.index()].load(Ordering::Relaxed);
        PairStats::new(
            self.params,
            generation.number,
            generation.target,
            current,
            previous,
            RotationCounts {
                fill: count(Cause::Fill),
                age: count(Cause::Age),
                saturation: count(Cause::Saturation),
                idle: count(Cause::Idle),
            },
        )
    }

    /// A copy of both filters and their counts (`O(m)`; runs beside checks, which carry on:
    /// every key recorded before the copy began is in it).
    pub(crate) fn image_at(&self, now: Instant) -> PairImage {
        // load_full: an owned Arc, because the copy takes a while and arc_swap guards are
        // meant to be short-lived.
        let generation = self.live.load_full();
        PairImage {
            generation: generation.number,
            current: FilterImage {
                words: generation.current.words().collect(),
                inserts: generation.inserts.load(Ordering::Relaxed),
                age: now.saturating_duration_since(generation.start),
            },
            previous: generation.previous.as_ref().map(|p| FilterImage {
                words: p.filter.words().collect(),
                inserts: p.inserts,
                age: now.saturating_duration_since(p.start),
            }),
        }
    }

    /// Replaces the pair's state with `image` (from a snapshot of a pair with the same
    /// params), aged as if no request had come since it was taken: a current generation older
    /// than `max_age` rotates (counted as `age`), one older than `2 · max_age` is forgotten
    /// with its predecessor (counted as `idle`). Returns false, changing nothing, if the
    /// image's arrays do not fit these params.
    pub(crate) fn restore_at(&self, image: PairImage, now: Instant) -> bool {
        let words = self.params.bits / 64;
        let fits = |f: &FilterImage| f.words.len() as u64 == words;
        if !fits(&image.current) || image.previous.as_ref().is_some_and(|p| !fits(p)) {
            return false;
        }
        let cause = self.age_cause_of(image.current.age);
        // Filled into spares, so the pair keeps its three filters.
        let load = |f: &FilterImage| self.spares.take_loaded(&f.words);
        let previous_of = |f: &FilterImage, filter| Previous {
            filter,
            start: now.checked_sub(f.age).unwrap_or(now),
            inserts: f.inserts,
        };
        let restored = match cause {
            None => {
                let Some(current) = load(&image.current) else {
                    return false;
                };
                let previous = match &image.previous {
                    Some(p) => load(p).map(|filter| previous_of(p, filter)),
                    None => None,
                };
                Generation {
                    number: image.generation,
                    // A machine up for less than the generation's age cannot express its
                    // start as an Instant; the generation then counts as starting now.
                    start: now.checked_sub(image.current.age).unwrap_or(now),
                    target: self.next_target(),
                    current,
                    inserts: AtomicU64::new(image.current.inserts),
                    previous,
                }
            }
            Some(cause) => Generation {
                number: image.generation + 1,
                start: now,
                target: self.next_target(),
                current: self.spares.take(),
                inserts: AtomicU64::new(0),
                previous: match cause {
                    Cause::Idle => None,
                    _ => load(&image.current).map(|filter| previous_of(&image.current, filter)),
                },
            },
        };
        if let Some(cause) = cause {
            self.rotations[cause.index()].fetch_add(1, Ordering::Relaxed);
        }
        let old = self.live.swap(Arc::new(restored));
        self.retire(old, true);
        true
    }

    /// The rotation an age of the live generation calls for, if any.
    fn age_cause(&self, generation: &Generation, now: Instant) -> Option<Cause> {
        self.age_cause_of(now.saturating_duration_since(generation.start))
    }

    /// `Idle` at `2 · max_age` or more, `Age` at `max_age` or more, else none.
    fn age_cause_of(&self, age: Duration) -> Option<Cause> {
        let idle = self.max_age.saturating_mul(2);
        if age >= idle {
            Some(Cause::Idle)
        } else if age >= self.max_age {
            Some(Cause::Age)
        } else {
            None
        }
    }

    /// The target of new keys for a generation starting now.
    fn next_target(&self) -> u64 {
        target(&self.rotation, self.params.generation_size)
    }

    /// Rotates the pair if generation `seen` is still live. Lock-free: when several threads
    /// try at once, one compare-and-swap wins and the others change nothing.
    fn rotate(&self, seen: &Arc<Generation>, cause: Cause, now: Instant) {
        // Cheap early exit for the threads that arrive after the winner.
        if self.live.load().number != seen.number {
            return;
        }
        let spare = self.spares.take();
        let previous = match cause {
            Cause::Idle => None,
            _ => Some(Previous {
                filter: seen.current.clone(),
                start: seen.start,
                inserts: seen.inserts.load(Ordering::Relaxed),
            }),
        };
        let next = Arc::new(Generation {
            number: seen.number + 1,
            start: now,
            target: self.next_target(),
            current: spare.clone(),
            inserts: AtomicU64::new(0),
            previous,
        });
        let target = next.target;
        let replaced = self.live.compare_and_swap(seen, next);
        if !Arc::ptr_eq(&replaced, seen) {
            // Another thread rotated first; our `next` was dropped, so the spare is ours
            // alone again and goes back, still clean, to the pool.
            drop(replaced);
            self.spares.put_back(spare);
            return;
        }
        drop(replaced);
        self.rotations[cause.index()].fetch_add(1, Ordering::Relaxed);
        tracing::debug!(
            cause = cause.as_str(),
            generation = seen.number + 1,
            inserts = seen.inserts.load(Ordering::Relaxed),
            age_secs = now.saturating_duration_since(seen.start).as_secs_f64(),
            next_target = target,
            "admission filters rotated"
        );
        self.retire(seen.clone(), cause == Cause::Idle);
    }

    /// Hands the filters of a replaced generation that the new one no longer uses to the
    /// cleaner: its `previous`, and its `current` too when `both`. Takes the generation by
    /// value and drops it first, so that the cleaner usually finds the filters free at once.
    fn retire(&self, old: Arc<Generation>, both: bool) {
        let previous = old.previous.as_ref().map(|p| p.filter.clone());
        let current = both.then(|| old.current.clone());
        drop(old);
        for filter in [previous, current].into_iter().flatten() {
            self.spares.retire(filter);
        }
    }
}

impl Admission for AgingPair {
    /// `Admit(SeenBefore)` if the key is in either filter, else `Reject(FirstSight)`; always
    /// records it. Reads the cleaner thread's coarse clock (a few milliseconds of slack on
    /// `max_age`) rather than the system clock, which costs as much as the rest of the check.
    fn check_and_record(&self, hash: FilterHash) -> Decision {
        self.check_and_record_at(hash, self.spares.now())
    }

    /// The two filters that answer and the spare that waits for the next rotation.
    fn memory_bytes(&self) -> u64 {
        3 * self.params.filter_bytes()
    }

    fn name(&self) -> &'static str {
        "second-hit"
    }

    fn filter_stats(&self) -> Option<PairStats> {
        Some(self.stats_at(Instant::now()))
    }
}

#[cfg(test)]
mod tests;
