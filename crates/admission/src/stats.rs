//! What the filter pair reports about itself: fill, estimates and rotations.
//!
//! The number of distinct keys in a filter is estimated from its fill with Swamidass & Baldi
//! ("Mathematical correction for fingerprint similarity measures to improve chemical
//! retrieval", J. Chem. Inf. Model. 2007): a filter of `m` bits with `k` probes and `X` bits
//! set holds about `n* = -(m/k) ln(1 - X/m)` keys. The false-positive rate is estimated from
//! the actual bits, block by block ([`super::BloomFilter::measured_false_positive_rate`]), so
//! it sees an uneven fill that a rate computed from `n*` alone would miss.

use std::time::Duration;

use super::bloom::{BloomFilter, FilterParams};

/// One filter's fill and estimates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FilterStats {
    /// Bits set (`X`).
    pub bits_set: u64,
    /// `X / m`: about 0.5 at the design load; the pair rotates at 0.6 whatever the count.
    pub bits_set_ratio: f64,
    /// New keys counted into the filter by the pair (checks that found some of their bits
    /// missing): exact for generation targets below 32 768 keys, from there on estimated from
    /// a sample of at least 16 384 of them (within about 1%).
    pub inserts: u64,
    /// Distinct keys estimated from the fill, `-(m/k) ln(1 - X/m)` (Swamidass & Baldi);
    /// infinite for a filter with every bit set.
    pub estimated_keys: f64,
    /// The false-positive rate the filter's bits give a random absent key, now.
    pub estimated_false_positive_rate: f64,
    /// Time since the filter's generation began.
    pub age: Duration,
}

impl FilterStats {
    /// The statistics of `filter`, whose generation counted `inserts` new keys and is `age`
    /// old. Reads every block, so `O(m/64)`.
    pub(crate) fn of(filter: &BloomFilter, inserts: u64, age: Duration) -> FilterStats {
        let bits = filter.bits();
        let bits_set = filter.bits_set();
        FilterStats {
            bits_set,
            bits_set_ratio: bits_set as f64 / bits as f64,
            inserts,
            estimated_keys: estimated_keys(bits_set, bits, filter.probes()),
            estimated_false_positive_rate: filter.measured_false_positive_rate(),
            age,
        }
    }
}

/// Rotations since start-up, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RotationCounts {
    /// The current generation took its target of new keys.
    pub fill: u64,
    /// The current generation reached `max_age`.
    pub age: u64,
    /// The current filter passed 60% of bits set before its count said it was full.
    pub saturation: u64,
    /// An idle gap of `2 · max_age` or more forgot both generations (one event each).
    pub idle: u64,
    /// An operator forced a rotation (the admin listener's `POST /rotate`).
    pub forced: u64,
}

impl RotationCounts {
    /// All rotations.
    pub fn total(&self) -> u64 {
        self.fill + self.age + self.saturation + self.idle + self.forced
    }
}

/// The pair's statistics, for logs and metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct PairStats {
    /// Sizing of each filter.
    pub params: FilterParams,
    /// The live generation's number (rotations since the pair began, across restarts).
    pub generation: u64,
    /// New keys the live generation takes before a fill rotation (`generation_size`, or
    /// less under `rotate = "auto"`).
    pub generation_target: u64,
    /// The filter receiving inserts.
    pub current: FilterStats,
    /// The previous generation's filter; `None` right after start-up or an idle gap.
    pub previous: Option<FilterStats>,
    /// Rotations by cause.
    pub rotations: RotationCounts,
    /// The cause of the latest rotation since start-up; `None` before the first.
    pub last_rotation: Option<Cause>,
    /// The modelled rate of one filter at its design load (≤ the configured target).
    pub expected_false_positive_rate: f64,
    /// The pair's modelled rate just after a rotation (about `p`) and just before the next
    /// (about `2p`).
    pub pair_false_positive_rate_range: (f64, f64),
    /// The pair's rate now, from the actual bits: a key is a false positive if either
    /// filter says yes, `1 - (1 - p_current)(1 - p_previous)`.
    pub estimated_pair_false_positive_rate: f64,
    /// The filters that are neither current nor previous (one, or two right after start-up
    /// or an idle gap): where each is on its way to becoming the next `current`.
    pub spares: Vec<SpareState>,
    /// The latest rotations of this run (at most 16), newest first.
    pub recent_rotations: Vec<RecentRotation>,
}

/// Where a spare filter is on its way to becoming the next `current`: a rotation retires the
/// old `previous`, a background thread clears it a grace period later (milliseconds), and
/// then it waits, clean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpareState {
    /// Dropped by a rotation; its bits are stale until it is cleared.
    Retired,
    /// Being cleared now.
    Clearing,
    /// All zero, ready for the next rotation.
    Clean,
}

impl SpareState {
    /// Token for `/stats`: "retired" | "clearing" | "clean".
    pub fn as_str(self) -> &'static str {
        match self {
            SpareState::Retired => "retired",
            SpareState::Clearing => "clearing",
            SpareState::Clean => "clean",
        }
    }
}

/// One rotation of the recent past.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RecentRotation {
    /// The generation it began.
    pub generation: u64,
    /// Why it happened.
    pub cause: Cause,
    /// How long ago.
    pub ago: Duration,
    /// New keys the generation it ended had counted.
    pub ended_inserts: u64,
    /// How long the generation it ended had lasted.
    pub ended_age: Duration,
}

impl PairStats {
    /// Assembles the statistics and derives the pair-wide rates (no spares or recent
    /// rotations: the pair sets those fields itself).
    pub(crate) fn new(
        params: FilterParams,
        generation: u64,
        generation_target: u64,
        current: FilterStats,
        previous: Option<FilterStats>,
        rotations: RotationCounts,
        last_rotation: Option<Cause>,
    ) -> PairStats {
        let previous_rate = previous.map_or(0.0, |p| p.estimated_false_positive_rate);
        let estimated_pair_false_positive_rate =
            1.0 - (1.0 - current.estimated_false_positive_rate) * (1.0 - previous_rate);
        PairStats {
            params,
            generation,
            generation_target,
            current,
            previous,
            rotations,
            last_rotation,
            expected_false_positive_rate: params.false_positive_rate_at(params.generation_size),
            pair_false_positive_rate_range: params.pair_false_positive_rates(),
            estimated_pair_false_positive_rate,
            spares: Vec::new(),
            recent_rotations: Vec::new(),
        }
    }
}

/// Swamidass & Baldi: `n* = -(m/k) ln(1 - X/m)` keys for `X` of `m` bits set with `k` probes.
pub(crate) fn estimated_keys(bits_set: u64, bits: u64, probes: u32) -> f64 {
    let m = bits as f64;
    -(m / f64::from(probes)) * (1.0 - bits_set as f64 / m).ln()
}

/// Why the pair rotated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The current generation took its target of new keys.
    Fill,
    /// The current generation was older than `max_age`.
    Age,
    /// More than `aging_pair::SATURATION` of the current filter's bits were set.
    Saturation,
    /// No request for `2 · max_age` or more: both generations were forgotten.
    Idle,
    /// An operator asked for it (`AgingPair::force_rotation`, the admin listener's
    /// `POST /rotate`).
    Forced,
}

impl Cause {
    /// Every cause, in declaration order (the rotation counters index by `cause as usize`).
    pub const ALL: [Cause; 5] = [
        Cause::Fill,
        Cause::Age,
        Cause::Saturation,
        Cause::Idle,
        Cause::Forced,
    ];

    /// Token for logs and metrics: "fill" | "age" | "saturation" | "idle" | "forced".
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Fill => "fill",
            Cause::Age => "age",
            Cause::Saturation => "saturation",
            Cause::Idle => "idle",
            Cause::Forced => "forced",
        }
    }
}
