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
//! target is `generation_size`, or under `rotate = "auto"` one to two times the number of
//! objects in the disk cache, steered by the disk writes per new key (`auto`), clamped to
//! `[auto_floor, generation_size]`; under `auto` a generation that reaches it in a burst,
//! sooner than half as long as the one before it lasted, is held open until then, at most
//! `min_generation_age`, up to `generation_size` keys: see [`BURST_HOLD_SHARE`]); `max_age` has passed since it began
//! ([`Cause::Age`]); more than 60% of its bits are set although the count says it has room
//! ([`Cause::Saturation`] — a filter past that point answers "yes" too often, whatever the
//! count says; it guards against a count that is wrong, e.g. restored against other bits,
//! or a generation size too large for the bits). The fill is estimated from 32 blocks every
//! ~1% of fill's worth of inserts, not counted on every insert (that would be a second
//! atomic read-modify-write on the hot path). An idle gap of `2 · max_age` or more forgets
//! *both* generations ([`Cause::Idle`]): under steady traffic no key older than two
//! generations is remembered, and a quiet night should not change that — one rotation would
//! keep the night's last generation for another `max_age`.
//!
//! So a key recorded once is remembered for at least one and at most two generations, memory
//! is fixed, and the pair's false-positive rate runs from about `p` just after a rotation
//! (previous full, current empty) to about `2p` just before the next (both full).
//!
//! # Concurrency: no lock and no shared write on the request path
//! The pair owns exactly three filters for its whole life: `current`, `previous` and a spare
//! (two spares when there is no `previous`). Which is which lives in one `AtomicU64`, the
//! *state* word: generation number, current index, previous index. Each generation's start
//! time, target and insert count live in one of four slots (`number % 4`). A check loads the
//! state word (acquire), probes the two filters and, for a new key, sets its bits in `current`
//! (atomic `fetch_or`s) and counts it in the slot (for generations of 32 768 keys or more
//! only one new key in `2^s`, with weight `2^s`: see [`COUNT_EXACT_BITS`]). Nothing is
//! reference-counted: the filters are never freed while the pair lives, so a check needs no
//! guard and, when the key is already in `current`, writes nothing shared at all.
//!
//! A rotation is a compare-and-swap of the state word from the generation it saw to the next:
//! its spare (already cleared) becomes `current`, `current` becomes `previous`, and the old
//! `previous` is marked retired. Any thread that finds a rotation due may do it; one wins,
//! the others change nothing. No lock is taken: a preempted lock holder would hold the
//! rotation up while the other threads kept inserting into a generation already at its
//! target. The background thread ([`cleaner`]) clears retired filters a grace period
//! later; a rotation that finds its spare still uncleared (rotations faster than the
//! thread) clears it itself. A per-filter state machine (in use → retired → clearing →
//! clean, each step a compare-and-swap) makes sure a filter is cleared only while retired,
//! and by one thread.
//!
//! # Why a recorded key is not lost: no false negative within two rotations
//! Claim: if `check_and_record(x)` loaded generation `g`, and returned before a check of `x`
//! began, the check finds `x` unless by the time the check returns the pair has reached
//! generation `g + 2` (or an idle gap forgot everything).
//!
//! 1. The record set `x`'s bits in `F`, the current filter of `g` (or found them set).
//! 2. The check loads some generation `h ≥ g` (the state word only moves forward); if the pair
//!    is still below `g + 2` when the check returns, `h ≤ g + 1`, and `F` is `current` or
//!    `previous` in `h`, so the check reads `F`'s block for `x`.
//! 3. The record's `fetch_or`s happen-before the check's loads (sequenced before the record's
//!    return, which happens-before the check by assumption). By write-read coherence a load
//!    cannot see a value older in the word's modification order than a store that
//!    happens-before it, so each load sees those bits unless a later store removed them. (If
//!    the record found the bits already set, its own loads saw them, and by read-read
//!    coherence the check's later loads cannot see an older value either.)
//! 4. Only clearing removes bits, and `F` is cleared only once retired, i.e. after the
//!    rotation to `g + 2` (or an idle rotation) — which, by step 2's assumption, has not
//!    happened before the check returned. `F` was clean when `g` was published (a spare is
//!    cleared before it becomes current) and stays in use from then until that rotation.
//!
//! In words: a key recorded in the current or the previous generation is found. The property
//! tests check exactly this claim with 8 threads and rotations under way.
//!
//! A check or record that is slow enough to straddle two rotations may touch a filter that is
//! being cleared or already reused: it may then miss a key (which the claim allows: two
//! rotations) or leave a stray bit in the new `current` (a false positive at worst). Memory
//! safety does not depend on timing: the filters live as long as the pair, and every access
//! is atomic.
//!
//! # Memory orderings
//! - Filter bits: `Relaxed` (see [`super::bloom`]).
//! - The state word: loaded with `Acquire`, swapped with `AcqRel`; the swap publishes the
//!   spare's clearing (done before, or ordered before through the filter's `Clean` state:
//!   release by the clearer, acquire by the rotation) and the new slot's contents.
//! - A slot's `ready` field: the slot's start and target are written, then `ready` is stored
//!   with `Release`; a check that loads `ready` with `Acquire` and finds its generation there
//!   reads start and target written for it. Until then the check skips the age and fill tests.
//! - Insert counts, rotation counters, the retirement time: `Relaxed`; they publish no other
//!   data, and a rotation decided on a slightly stale count is merely a request late or early.
//! - The coarse clock: a `Relaxed` nanosecond count ([`cleaner`]).

mod auto;
mod cleaner;
mod history;
mod image;
mod report;
mod rotate;
mod slots;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::bloom::{BloomFilter, FilterParams};
pub use super::stats::Cause;
use super::stats::PairStats;
use super::{
    Admission, AdmissionStats, AdmitReason, Decision, FilterHash, Pending, PolicyKind, RejectReason,
};
use crate::settings::AdmissionPolicy;
pub use auto::steer;
pub use auto::{AUTO_KEYS_PER_OBJECT, AUTO_MIN_KEYS_PER_OBJECT, AUTO_WRITES_PER_NEW_KEY};
use cleaner::CoarseClock;
use history::History;
pub(crate) use image::{FilterImage, PairImage};
use slots::{FilterState, Slot, State};

/// A source of the number of objects in the disk cache (for `rotate = "auto"`).
pub type ObjectCount = Arc<dyn Fn() -> u64 + Send + Sync>;

/// How a generation's target of new keys is chosen.
#[derive(Clone)]
pub enum Rotation {
    /// Always `generation_size` (`rotate = "fill"`).
    Fill,
    /// Between [`AUTO_MIN_KEYS_PER_OBJECT`] and [`AUTO_KEYS_PER_OBJECT`] times the number of
    /// objects in the disk cache at the generation's start, steered toward
    /// [`AUTO_WRITES_PER_NEW_KEY`] disk writes per new key, clamped to
    /// `[auto_floor(generation_size), generation_size]` (`rotate = "auto"`); a generation
    /// that reaches that target early is held open against bursts (see [`BURST_HOLD_SHARE`]).
    Auto {
        /// The objects in the disk cache.
        objects: ObjectCount,
        /// The longest a generation that reaches its target early is held open
        /// (`admission.min_generation_age`; zero: never).
        min_generation_age: Duration,
    },
}

/// Under `rotate = "auto"`, a generation that reaches its target of new keys is not ended by
/// it before it is `1 / BURST_HOLD_SHARE` as old as the generation before it lasted (nor
/// `min_generation_age`): until then it keeps taking keys, up to `generation_size`.
///
/// Why: a generation sized from a nearly empty cache is tiny (the floor, `AUTO_FLOOR`), and
/// a burst of first sights (a scan) used to fill it and the next one within moments,
/// dropping the generation that held the keys seen just before. A floor in keys is no
/// answer (any burst larger than it flushes all the same, and a large floor makes a small
/// cache remember too long: see `AUTO_FLOOR`); a hold in time bounds how fast keys are
/// forgotten, whatever the burst's size. Relative to the generation before, so that steady
/// traffic, whose generations last about as long as each other, is never held and `auto`
/// keeps its sizing (a generation filling at least twice as fast as the one before is what
/// a burst looks like); capped by `min_generation_age` so that the hold stays short after a
/// generation ended by `max_age` or an idle gap. The false-positive rate stays bounded: a
/// held generation still ends at `generation_size` new keys (where one filter reaches the
/// configured rate, the same bound as `rotate = "fill"`), and at `SATURATION`.
pub const BURST_HOLD_SHARE: i64 = 2;

/// Blocks read to estimate the current filter's fill (see [`BloomFilter::sampled_fill`]).
const SATURATION_SAMPLE: usize = 32;

/// Fraction of bits set at which a filter counts as saturated and the pair rotates whatever
/// its count says. A filter at its design load has about half its bits set (that is what the
/// optimal `k` does); 60% is well past it (the false-positive rate is then about `0.6^k`, 3×
/// the 1% target at `k = 6`).
pub(crate) const SATURATION: f64 = 0.6;

/// The smallest generation `rotate = "auto"` uses, in keys (but never more than the largest,
/// `generation_size`). An empty cache would otherwise give generations of zero keys, which
/// remember nothing and so admit nothing.
///
/// Fixed, not a share of `generation_size`: a floor that grows with `expected_urls` starves
/// a small cache. With the default `expected_urls = 1000000` a floor of 1/64 of it would be
/// 15,625 keys, about ten times the objects a cache of 1% of the simulator's CDN workload
/// holds (20% one-hit wonders), and the pair would remember far too long: fewer hits and
/// several times the disk writes (`benches/RESULTS.md`, "the `rotate = "auto"` floor").
pub const AUTO_FLOOR: u64 = 1024;

/// [`AUTO_FLOOR`], at most `generation_size`.
pub(crate) fn auto_floor(generation_size: u64) -> u64 {
    AUTO_FLOOR.min(generation_size)
}

/// The rotating pair: see the module docs.
pub struct AgingPair {
    /// Everything the cleaner thread shares.
    shared: Arc<Shared>,
    /// Ticked by the cleaner thread; read by [`AgingPair::check_and_record`].
    clock: Arc<CoarseClock>,
}

/// The pair's state, shared with its cleaner thread.
struct Shared {
    /// Sizing of each filter (normalised, so every field is in range).
    params: FilterParams,
    /// The longest a generation lasts, however few keys it took, in nanoseconds (the unit of
    /// every time the pair keeps).
    max_age_nanos: i64,
    /// How each generation's target of new keys is chosen.
    rotation: Rotation,
    /// Time zero: slot times are nanoseconds from here (negative for restored generations).
    epoch: Instant,
    /// The current filter's fill is sampled once every this many counted inserts plus one
    /// (a power of two minus one): about the inserts that raise the fill by 1%, at most 4096.
    saturation_check_mask: u64,
    /// The three filters.
    filters: [BloomFilter; 3],
    /// Each filter's [`FilterState`].
    filter_states: [AtomicU8; 3],
    /// When each filter was retired (nanoseconds from `epoch`), for the cleaner's grace period.
    retired_at: [AtomicI64; 3],
    /// The packed [`State`]: generation number and filter roles.
    state: AtomicU64,
    /// Per-generation start, target and count, at `number % 4`.
    slots: [Slot; 4],
    /// Rotations by cause, indexed by `Cause as usize`.
    rotations: [AtomicU64; Cause::ALL.len()],
    /// The cause of the latest rotation of this run, as `cause as u8 + 1` (0: none yet).
    /// Relaxed, like the counters: it is only reported.
    last_cause: AtomicU8,
    /// The latest rotations, for `/stats` (written by rotations only).
    history: History,
    /// Fills counted in the generations of this run that have ended (`auto`'s warm-up test;
    /// written by rotations only).
    fills_ended: AtomicU64,
}

impl AgingPair {
    /// The memory a pair of filters sized by `params` allocates: the two filters that answer
    /// and the spare that waits for the next rotation.
    pub fn memory_for(params: &FilterParams) -> u64 {
        3 * params.filter_bytes()
    }

    /// An empty pair of filters sized by `params`; the first generation starts at `now`.
    /// Logs the sizing (m, k, bytes, modelled per-filter and pair rates) at info.
    pub fn new(params: FilterParams, max_age: Duration, rotation: Rotation, now: Instant) -> Self {
        let params = params.normalized();
        log_sizing(&params, max_age, &rotation);
        let shared = Arc::new(Shared {
            params,
            max_age_nanos: nanos_of(max_age),
            epoch: now,
            saturation_check_mask: (params.bits / (100 * u64::from(params.probes)))
                .clamp(1, 4096)
                .next_power_of_two()
                - 1,
            filters: std::array::from_fn(|_| BloomFilter::new(&params)),
            filter_states: std::array::from_fn(|_| AtomicU8::new(FilterState::Clean as u8)),
            retired_at: Default::default(),
            state: AtomicU64::new(0),
            slots: Default::default(),
            rotations: Default::default(),
            last_cause: AtomicU8::new(0),
            history: History::default(),
            fills_ended: AtomicU64::new(0),
            rotation,
        });
        shared.begin(
            State {
                number: 0,
                current: 0,
                previous: None,
            },
            0,
            0,
        );
        let clock = cleaner::start(&shared);
        AgingPair { shared, clock }
    }

    /// Records `hash` and says whether it was seen before: `Admit(SeenBefore)` if the key
    /// is in either filter, else `Reject(FirstSight)`. Reads the cleaner thread's coarse
    /// clock (a few milliseconds of slack on `max_age`) rather than the system clock, which
    /// costs as much as the rest of the check. The pair's [`Admission::on_request`].
    pub fn check_and_record(&self, hash: FilterHash) -> Decision {
        self.check_and_record_nanos(hash, self.clock.nanos())
    }

    /// [`AgingPair::check_and_record`] with an explicit clock reading, the deterministic
    /// entry point for tests and the simulator.
    pub fn check_and_record_at(&self, hash: FilterHash, now: Instant) -> Decision {
        self.check_and_record_nanos(hash, self.shared.nanos(now))
    }

    /// The check and record at `now` nanoseconds from the pair's epoch.
    fn check_and_record_nanos(&self, hash: FilterHash, now: i64) -> Decision {
        let shared = &*self.shared;
        let mut state = shared.state();
        let mut slot = shared.slot(state.number);
        // Age first, so that a request arriving after the generation expired lands in the new
        // one rather than in a filter about to become `previous`.
        if let Some((start, _)) = slot.ready_for(state.number)
            && let Some(cause) = shared.age_cause(now - start)
        {
            shared.rotate(state, cause, now);
            state = shared.state();
            slot = shared.slot(state.number);
        }
        let current = &shared.filters[state.current];
        let probe = current.probe(hash);
        let previous = state.previous.map(|p| &shared.filters[p]);
        let (absent, in_previous) = current.absent_here_and_in(previous, &probe);
        if absent.is_empty() {
            return Decision::Admit(AdmitReason::SeenBefore);
        }
        // Copying a key found only in `previous` keeps it alive for another generation. The
        // key counts as new when `current` lacked some of its bits; two threads inserting the
        // same new key at once both count it, which only brings the rotation forward a key.
        current.insert_absent(&absent);
        if let Some((start, target)) = slot.ready_for(state.number)
            && let Some(weight) = counted_weight(hash, target, shared.saturation_check_mask)
        {
            let inserts = slot.inserts.fetch_add(weight, Ordering::Relaxed) + weight;
            if inserts >= target && shared.fill_may_end(slot, inserts, now - start) {
                shared.rotate(state, Cause::Fill, now);
            } else if inserts & shared.saturation_check_mask == 0
                && current.sampled_fill(SATURATION_SAMPLE) >= SATURATION
            {
                shared.rotate(state, Cause::Saturation, now);
            }
        }
        if in_previous {
            Decision::Admit(AdmitReason::SeenBefore)
        } else {
            Decision::Reject(RejectReason::FirstSight)
        }
    }

    /// Starts loading `hash`'s blocks of the current and the previous filter into the CPU's
    /// cache, so that a [`AgingPair::check_and_record_at`] of it a little later does not wait
    /// for memory; changes nothing (see [`Admission::prefetch`]). If the pair rotates in
    /// between, the check reads one block the prefetch did not fetch: slower, not wrong.
    pub fn prefetch(&self, hash: FilterHash) {
        let shared = &*self.shared;
        let state = shared.state();
        shared.filters[state.current].prefetch(hash);
        if let Some(previous) = state.previous {
            shared.filters[previous].prefetch(hash);
        }
    }

    /// Ends the live generation now ([`Cause::Forced`]) and returns the new generation's
    /// number. The same lock-free rotation as the automatic ones: if another rotation wins
    /// the race, the pair has rotated all the same, and its number is returned.
    pub fn force_rotation(&self) -> u64 {
        let shared = &*self.shared;
        let seen = shared.state();
        shared.rotate(seen, Cause::Forced, self.clock.nanos());
        shared.state().number
    }

    /// Whether either filter holds `hash`, without recording it (for tests).
    #[cfg(test)]
    pub fn contains(&self, hash: FilterHash) -> bool {
        let state = self.shared.state();
        let filters = &self.shared.filters;
        filters[state.current].contains(hash)
            || state.previous.is_some_and(|p| filters[p].contains(hash))
    }

    /// The sizing in use (with every field in range).
    pub fn params(&self) -> FilterParams {
        self.shared.params
    }

    /// The live generation's number (rotations since the pair began, across restarts).
    #[cfg(test)]
    pub fn generation(&self) -> u64 {
        self.shared.state().number
    }
}

/// Logs the sizing at info, once per pair.
fn log_sizing(params: &FilterParams, max_age: Duration, rotation: &Rotation) {
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
            Rotation::Auto { .. } => "auto",
        },
        max_age_secs = max_age.as_secs_f64(),
        target_false_positive_rate = params.false_positive_rate,
        expected_false_positive_rate = after_rotation,
        pair_false_positive_rate_after_rotation = after_rotation,
        pair_false_positive_rate_before_rotation = before_rotation,
        "admission filter pair ready"
    );
}

/// A non-negative span of nanoseconds as a duration (negative spans are zero).
fn duration(nanos: i64) -> Duration {
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
}

/// `now` in nanoseconds from `epoch` (negative before it).
fn nanos_since(epoch: Instant, now: Instant) -> i64 {
    match now.checked_duration_since(epoch) {
        Some(after) => nanos_of(after),
        None => -nanos_of(epoch.duration_since(now)),
    }
}

/// Generation targets below `2^(COUNT_EXACT_BITS + 1)` (32 768) new keys are counted
/// exactly; larger ones count one new key in `2^s` (chosen by its hash) with weight `2^s`, `s` such that at
/// least `2^COUNT_EXACT_BITS` keys are counted per generation. Why: the count is the only
/// write to memory shared by every thread on the request path, one locked add per new key
/// and a cache line bouncing between cores under load (`benches/RESULTS.md`, "sampled count
/// of new keys"); sampled, the generation still ends within about 1% of its target
/// (standard error `2^-7`).
const COUNT_EXACT_BITS: u32 = 14;

/// The weight with which a new key `hash` counts toward a generation of `target` new keys,
/// in a pair that samples the fill every `saturation_check_mask + 1` counted inserts:
/// `Some(2^s)` for one key in `2^s`, `None` for the others (see [`COUNT_EXACT_BITS`]). `2^s`
/// never exceeds that cadence, so a filter too small for its target (which only the fill
/// check catches) is still checked at least every ~1% of its fill. The keys counted are
/// those whose hash's low `s` bits are zero: the hash is keyed, so no client can choose to
/// be counted, or not.
fn counted_weight(hash: FilterHash, target: u64, saturation_check_mask: u64) -> Option<u64> {
    let shift = (target >> COUNT_EXACT_BITS)
        .checked_ilog2()
        .unwrap_or(0)
        .min(saturation_check_mask.count_ones());
    ((hash.0 as u64).trailing_zeros() >= shift).then(|| 1u64 << shift)
}

/// A duration in nanoseconds, saturating at `i64::MAX` (292 years).
fn nanos_of(age: Duration) -> i64 {
    i64::try_from(age.as_nanos()).unwrap_or(i64::MAX)
}

impl Shared {
    /// The state word, unpacked.
    fn state(&self) -> State {
        State::unpack(self.state.load(Ordering::Acquire))
    }

    /// The slot of generation `number`.
    fn slot(&self, number: u64) -> &Slot {
        &self.slots[(number % 4) as usize]
    }

    /// `now` in nanoseconds from the epoch (negative before it).
    fn nanos(&self, now: Instant) -> i64 {
        nanos_since(self.epoch, now)
    }
}

impl Admission for AgingPair {
    /// Checks and records the key ([`AgingPair::check_and_record`]); the filters' answer
    /// is the plan, and the response changes nothing of it (the default `on_response`).
    fn on_request(&self, hash: FilterHash) -> Pending {
        Pending::new(hash, self.check_and_record(hash))
    }

    fn on_request_at(&self, hash: FilterHash, now: Instant) -> Pending {
        Pending::new(hash, self.check_and_record_at(hash, now))
    }

    fn prefetch(&self, hash: FilterHash) {
        AgingPair::prefetch(self, hash)
    }

    /// Counts a fill the filter's own admission led to, for `rotate = "auto"`.
    fn note_fill(&self, decision: Decision) {
        if decision == Decision::Admit(AdmitReason::SeenBefore) {
            self.shared.count_fill();
        }
    }
}

impl AdmissionStats for AgingPair {
    fn memory_bytes(&self) -> u64 {
        AgingPair::memory_for(&self.shared.params)
    }

    fn kind(&self) -> PolicyKind {
        AdmissionPolicy::SecondHit.into()
    }

    fn filter_stats(&self) -> Option<PairStats> {
        Some(self.stats_nanos(self.clock.nanos()))
    }

    fn rotate(&self) -> Option<u64> {
        Some(self.force_rotation())
    }
}

#[cfg(test)]
mod tests;
