//! One miniature simulation: one candidate at one cache size, over the sampled requests,
//! and what it counted.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::candidate::Candidate;
use super::mini_filter::{Generations, MiniFilter};
use super::mini_index::MiniIndex;

/// What one miniature counted, each request weighted by the inverse of the sampling rate
/// it was sampled at, so that counts estimate the full traffic's.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Counts {
    /// Requests.
    pub requests: f64,
    /// Of them, misses.
    pub misses: f64,
    /// Body bytes requested.
    pub bytes: f64,
    /// Of them, bytes of misses.
    pub miss_bytes: f64,
    /// Body bytes written to the cache.
    pub written_bytes: f64,
    /// Objects written.
    pub written_objects: f64,
}

impl Counts {
    /// `self * keep + other`, field by field.
    fn decayed_into(self, keep: f64, other: Counts) -> Counts {
        Counts {
            requests: self.requests * keep + other.requests,
            misses: self.misses * keep + other.misses,
            bytes: self.bytes * keep + other.bytes,
            miss_bytes: self.miss_bytes * keep + other.miss_bytes,
            written_bytes: self.written_bytes * keep + other.written_bytes,
            written_objects: self.written_objects * keep + other.written_objects,
        }
    }
}

/// The settings every miniature of one estimator shares.
#[derive(Clone, Copy, Debug)]
pub(super) struct Scale {
    /// The sampling rate.
    pub rate: f64,
    /// Bytes an entry takes beside its body.
    pub entry_overhead: u64,
    /// The filters' generations at this rate.
    pub generations: Generations,
}

/// One candidate at one size: see the module docs.
pub(super) struct Miniature {
    candidate: Candidate,
    /// The size as a multiple of the configured one.
    factor: f64,
    /// The full cache's size this miniature stands for.
    full_bytes: u64,
    /// The largest body stored (`cache.max_object_size` resolved for `full_bytes`).
    max_object: u64,
    index: MiniIndex,
    filter: Option<MiniFilter>,
    /// Chooses the first sights `FirstSight` stores.
    chance: Xoshiro256PlusPlus,
    past: Counts,
    epoch: Counts,
}

impl Miniature {
    /// An empty miniature of `candidate` for a cache of `full_bytes`, `factor` times the
    /// configured size, sampled at `scale`.
    pub(super) fn new(
        candidate: Candidate,
        factor: f64,
        full_bytes: u64,
        max_object: u64,
        scale: &Scale,
        now: Duration,
    ) -> Miniature {
        let capacity = (full_bytes as f64 * scale.rate) as u64;
        let generations = Generations {
            window: candidate.window(),
            ..scale.generations
        };
        Miniature {
            candidate,
            factor,
            full_bytes,
            max_object,
            index: MiniIndex::new(
                capacity,
                candidate.small_divisor(),
                candidate.stores_first_sights(),
            ),
            filter: candidate
                .keeps_filters()
                .then(|| MiniFilter::new(generations, now)),
            chance: Xoshiro256PlusPlus::seed_from_u64(full_bytes),
            past: Counts::default(),
            epoch: Counts::default(),
        }
    }

    /// Replays one sampled request for `key`, of a body of `size` bytes, at `now`, as the
    /// proxy handles it: the filters record the key (hits too), a cached key is a hit, and
    /// a miss the candidate admits is stored. Counted with the weight `1 / R`.
    pub(super) fn request(&mut self, key: u64, size: u64, now: Duration, scale: &Scale) {
        let objects = self.index.objects_when_full();
        let seen = self
            .filter
            .as_mut()
            .map(|filter| filter.check_and_record(key, now, objects));
        let hit = self.index.touch(key);
        let weight = 1.0 / scale.rate;
        let size_f = size as f64;
        self.epoch.requests += weight;
        self.epoch.bytes += weight * size_f;
        if hit {
            return;
        }
        self.epoch.misses += weight;
        self.epoch.miss_bytes += weight * size_f;
        if size > self.max_object || !self.admits(seen) {
            return;
        }
        if self
            .index
            .insert(key, size.saturating_add(scale.entry_overhead))
        {
            self.epoch.written_bytes += weight * size_f;
            self.epoch.written_objects += weight;
            if seen == Some(true)
                && let Some(filter) = &mut self.filter
            {
                filter.note_fill();
            }
        }
    }

    /// Whether the candidate stores a miss whose key the filters had `seen` (`None`
    /// without filters).
    fn admits(&mut self, seen: Option<bool>) -> bool {
        match (self.candidate, seen) {
            (_, None | Some(true)) => true,
            (Candidate::FirstSight { one_in }, Some(false)) => {
                self.chance.random_ratio(1, u32::from(one_in.max(1)))
            }
            (_, Some(false)) => false,
        }
    }

    /// Ends an epoch: what was counted so far weighs `keep` from now on.
    pub(super) fn end_epoch(&mut self, keep: f64) {
        self.past = self.past.decayed_into(keep, self.epoch);
        self.epoch = Counts::default();
    }

    /// The counts of the past epochs (decayed) and of the current one.
    pub(super) fn counts(&self) -> Counts {
        self.past.decayed_into(1.0, self.epoch)
    }

    /// Takes a lower sampling rate: keys above `limit` go, the cache shrinks to the
    /// full size times the new rate.
    pub(super) fn rescale(&mut self, limit: u64, scale: &Scale) {
        let capacity = (self.full_bytes as f64 * scale.rate) as u64;
        self.index.rescale(limit, capacity);
        if let Some(filter) = &mut self.filter {
            let generations = Generations {
                window: filter.sizing().window,
                ..scale.generations
            };
            filter.rescale(limit, generations);
        }
    }

    /// The candidate.
    pub(super) fn candidate(&self) -> Candidate {
        self.candidate
    }

    /// The size as a multiple of the configured one.
    pub(super) fn factor(&self) -> f64 {
        self.factor
    }

    /// The full cache's size this stands for.
    pub(super) fn full_bytes(&self) -> u64 {
        self.full_bytes
    }

    /// Keys held by its cache, ghost and filters.
    pub(super) fn keys(&self) -> u64 {
        self.index.keys() + self.filter.as_ref().map_or(0, MiniFilter::keys)
    }

    /// Bytes it allocated.
    pub(super) fn memory_bytes(&self) -> u64 {
        let filter = self.filter.as_ref().map_or(0, MiniFilter::memory_bytes);
        size_of::<Miniature>() as u64 + self.index.memory_bytes() + filter
    }
}
